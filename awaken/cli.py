"""The ``awaken`` command: ``serve``, ``ledger copy`` and ``ledger migrate``.

``awaken serve [--config PATH] [--bind HOST:PORT]`` loads the config (one clear line and exit 2 on a
bad one), opens the ledger, starts the MCP servers and serves on hypercorn's trio worker until
SIGINT/SIGTERM; then it drains (``drain``: ``/readyz`` 503, new runs refused, the runs in progress
given ``[server] drain_seconds``), the HTTP side stops and the MCP servers (stdio children) after it;
the process exits 0.
With ``[server] workers = N > 1`` it supervises N such processes on one address (``awaken/runtime/workers.py``).
Once serving, each process freezes its start-up objects out of the cycle collector's reach and collects
less often (``collect_for_latency``): a collection pauses the event loop whichever thread triggers it.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator

import attrs
import orjson
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from awaken import __version__
from awaken.config import AppConfig, environment, load_config, unset_key_variables
from awaken.core.errors import ConfigError, StoreUnavailable
from awaken.http.app import build_asgi
from awaken.http.context import ServerContext
from awaken.ledger.copy import add_copy_command
from awaken.ledger.migrate import add_migrate_command
from awaken.ledger.registry import check_workers
from awaken.runtime import memory, tcp
from awaken.runtime.tuning import GC_THRESHOLDS, SWITCH_INTERVAL
from awaken.runtime.workers import supervise
from awaken.streams.exchange import MAX_BODY
from awaken.telemetry import logs, tracing

log = logging.getLogger("awaken")

DEFAULT_CONFIG = "config.toml"
CONFIG_HELP = ("config file (default: ./config.toml if it exists, else none: environment variables and "
               "defaults only; '' for none)")


def hypercorn_config(config: AppConfig, worker_fd: int | None = None) -> HypercornConfig:
    hc = HypercornConfig()
    # a worker serves the socket its supervisor bound and passed down
    hc.bind = [config.server.bind if worker_fd is None else f"fd://{worker_fd}"]
    hc.graceful_timeout = config.server.graceful_timeout
    hc.backlog = config.server.backlog
    hc.accesslog = None
    # hypercorn's log lines go through the root handler alone (awaken/telemetry/logs.py): with a
    # handler of its own ("-") each line, "Running on" first, was printed twice
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.keep_alive_timeout = 75
    hc.websocket_max_message_size = MAX_BODY  # a WebSocket request may be as large as a POST body
    return tcp.configure(hc, config.server.write_timeout_seconds)


def collect_for_latency() -> None:
    """Tune the cycle collector for a server whose loop must never pause long: what exists once the
    server is up lives as long as the process (modules, config, agents, routes), so it is frozen out
    of the collector's reach, and collections are made rarer (``GC_THRESHOLDS``). Worker threads hand
    the interpreter back to the loop sooner (``SWITCH_INTERVAL``)."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL)


async def serve(config: AppConfig, worker_fd: int | None = None, *,
                task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
    """Open the ledger, serve until SIGINT/SIGTERM (or cancellation), close everything. The signals are
    this function's until it returns: the first starts the drain, a second ends it early, and none
    cuts the closing short (a process killed by one would leave its ledger registration behind)."""
    memory.tune()  # large freed blocks go back to the system (awaken/runtime/memory.py)
    ctx = ServerContext.build(config)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        await ctx.open()
        try:

            async def shutdown_trigger() -> None:
                async for _ in signals:
                    break
                await drain(ctx, signals)
                ctx.app.shutting_down()  # a run the graceful timeout cuts off is interrupted for it

            # runs execute in the server's own nursery (they may outlive their connection); leaving it
            # after hypercorn's graceful shutdown interrupts what still runs for ``shutdown``
            async with ctx.app.hosting(), trio.open_nursery() as nursery:
                await nursery.start(ctx.run_mcp)
                await nursery.start(ctx.run_claims)

                async def web(task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
                    tcp.install()  # write deadlines, batched accepts (awaken/runtime/tcp.py, accept.py)
                    await hypercorn_serve(build_asgi(ctx), hypercorn_config(config, worker_fd),
                                          shutdown_trigger=shutdown_trigger, task_status=task_status)
                    nursery.cancel_scope.cancel()  # the web side is done: stop the MCP servers

                binds = await nursery.start(web)
                collect_for_latency()
                where = ", ".join(binds) if worker_fd is None else f"{config.server.bind} as worker {os.getpid()}"
                print(f"awaken: serving on {where} (ledger: {config.ledger.backend} at "
                      f"{config.ledger.path})", flush=True)
                task_status.started(binds)
        finally:
            with trio.CancelScope(shield=True):
                await ctx.aclose()


async def drain(ctx: ServerContext, signals: AsyncIterator[int]) -> None:
    """A shutdown's first part, while the server still answers: ``/readyz`` says 503 and new runs are
    refused (``SERVER_DRAINING``); the runs in progress get ``[server] drain_seconds`` to end or reach
    their next step boundary (``RunApplication.drain``), a second SIGINT/SIGTERM cuts that short; their
    outcomes are committed and their streams end (at their last position: a client rejoins from it).
    Then telemetry is flushed, and hypercorn's graceful shutdown closes the connections."""
    seconds = ctx.config.server.drain_seconds
    active = ctx.app.active_count
    print(f"awaken: draining: no new runs; {active} in progress get up to {seconds:g} s "
          "(send the signal again to stop them now)", flush=True)
    cut = trio.Event()
    async with trio.open_nursery() as nursery:

        async def second_signal() -> None:
            async for _ in signals:
                cut.set()
                return

        nursery.start_soon(second_signal)
        await ctx.app.drain(seconds, cut)
        nursery.cancel_scope.cancel()
    await tracing.flush()  # the spans still queued are exported before the process goes
    print("awaken: drained; closing connections", flush=True)


def config_path(given: str | None) -> str | None:
    """The config file to read: ``--config`` when given (``""``: none, the environment and defaults
    only), else ``./config.toml`` when it exists, else none (a container started with environment
    variables alone serves the default agents)."""
    if given is not None:
        return given or None
    return DEFAULT_CONFIG if os.path.exists(DEFAULT_CONFIG) else None


def load(given: str | None) -> AppConfig:
    """The effective configuration (file, environment, defaults), with the secrets its ``…_env`` keys
    name read from ``<NAME>_FILE`` where only that is set (put into this process's environment)."""
    config = load_config(config_path(given))
    os.environ.update(environment.secret_files(attrs.asdict(config), os.environ))
    return config


def warn_unset_keys(config: AppConfig) -> None:
    """Warn once at start-up about each API key variable an agent's provider names but the environment
    leaves unset: its runs go without credentials, which a hosted endpoint refuses."""
    for variable, agents in unset_key_variables(config, os.environ).items():
        log.warning("$%s is not set: agent%s %s call%s the model without an API key (fine for a local "
                    "endpoint; a hosted one refuses every run with MODEL_UNAVAILABLE)", variable,
                    "s" if len(agents) > 1 else "", ", ".join(agents), "" if len(agents) > 1 else "s")


def _serve_command(args: argparse.Namespace) -> int:
    try:
        config = load(args.config)
        logs.configure(config.server.log_format)
        if args.bind:
            config = attrs.evolve(config, server=attrs.evolve(config.server, bind=args.bind))
            host, _, port = args.bind.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"--bind: {args.bind!r} is not HOST:PORT")
        ServerContext.build(config)  # surface plugin/tool/backend errors before serving
        check_workers(config)
    except ConfigError as exc:
        print(f"awaken: {exc}", file=sys.stderr)
        return 2
    if args.worker_fd is None:  # a worker's supervisor said it already
        warn_unset_keys(config)
    try:
        if config.server.workers > 1 and args.worker_fd is None:
            trio.run(supervise, config_path(args.config) or "", config.server.bind, config.server.workers, config.server.backlog)
        else:
            trio.run(serve, config, args.worker_fd)
    except StoreUnavailable as exc:
        print(f"awaken: the ledger is unavailable: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def _check_command(args: argparse.Namespace) -> int:
    """``awaken config check``: everything ``serve`` checks before it opens anything (the file, the
    environment, plugins, tools, the backend's options, ``[auth]``'s keys), then the effective settings
    as JSON with every secret redacted; exit 2 and one line on a bad configuration."""
    try:
        config = load(args.config)
        ServerContext.build(config)
        check_workers(config)
    except ConfigError as exc:
        print(f"awaken: {exc}", file=sys.stderr)
        return 2
    source = config_path(args.config) or "no config file"
    print(f"awaken: the configuration is valid ({source}; environment over file over default)", file=sys.stderr)
    sys.stdout.write(orjson.dumps(environment.redacted(config), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="awaken", description="A self-hosted agent server.")
    parser.add_argument("--version", action="version", version=f"awaken {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="serve the published agents over HTTP")
    p_serve.add_argument("--config", help=CONFIG_HELP)
    p_serve.add_argument("--bind", help="HOST:PORT, overriding server.bind")
    p_serve.add_argument("--worker-fd", type=int, help=argparse.SUPPRESS)  # set by the workers' supervisor
    p_serve.set_defaults(func=_serve_command)
    p_ledger = sub.add_parser("ledger", help="ledger maintenance")
    ledger_sub = p_ledger.add_subparsers(dest="ledger_command", required=True)
    add_copy_command(ledger_sub)
    add_migrate_command(ledger_sub)
    p_config = sub.add_parser("config", help="configuration")
    config_sub = p_config.add_subparsers(dest="config_command", required=True)
    p_check = config_sub.add_parser(
        "check", help="validate the configuration (file and environment) without starting; print the "
                      "effective settings, secrets redacted")
    p_check.add_argument("--config", help=CONFIG_HELP)
    p_check.set_defaults(func=_check_command)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
