"""Config: the repo's config.toml is the working default; bad config stops start-up with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest
import trio

from awaken.config import load_config, parse_config
from awaken.core.errors import ConfigError
from awaken.http.context import ServerContext
from tests.builders import ROOT, agui_body, agui_text, default_config_data, free_port, live_server, post_agui


def test_repo_config_is_the_working_default():
    """CONTRACT §2.1/§8: config.toml publishes assistant (default), guarded and frontend."""
    config = load_config(ROOT / "config.toml")
    assert config.default_agent == "assistant"
    assert set(config.agents) == {"assistant", "guarded", "frontend"}
    # ./var/awaken.db, read from the config file's directory
    assert config.ledger.backend == "sqlite" and config.ledger.path == str(ROOT / "var" / "awaken.db")
    assert config.server.bind == "127.0.0.1:8000"
    ctx = ServerContext.build(config)
    assistant = ctx.agents.get("assistant").describe()
    assert [(t["name"], t["kind"], t["permission"]) for t in assistant["tools"]] == [
        ("calculator", "server", "allow"), ("current_time", "server", "allow"), ("set_state", "server", "allow")]
    guarded = ctx.agents.get("guarded").describe()
    assert {t["permission"] for t in guarded["tools"]} == {"ask"}
    frontend = ctx.agents.get("frontend").describe()
    assert [(t["name"], t["kind"]) for t in frontend["tools"]] == [("ask_user", "client")]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["agents"]["assistant"].update(modle="x"), "unknown key agents.assistant.modle"),
        (lambda d: d.update(colour="blue"), "unknown key colour"),
        (lambda d: d["server"].update(keepalive_seconds="soon"),
         "server.keepalive_seconds: expected float, got str 'soon'"),
        (lambda d: d["agents"]["assistant"].update(max_steps="8"),
         "agents.assistant.max_steps: expected int, got str '8'"),
        (lambda d: d.update(default_agent="ghost"),
         "default_agent: agent 'ghost' is not defined under [agents]"),
        (lambda d: d["agents"]["assistant"].update(model="gpt"),
         "agents.assistant.model: 'gpt' is neither 'scripted' nor 'openai:<model>'"),
        (lambda d: d["agents"]["guarded"].update(permissions={"nope": "ask"}),
         "agents.guarded.permissions.nope: the agent has no such tool"),
        (lambda d: d["server"].update(bind="8000"), "server.bind: '8000' is not HOST:PORT"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(change, message):
    """Issue 2.2: unknown key, wrong type, missing agent → one clear line naming the key."""
    data = default_config_data()
    change(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.toml")
    assert str(info.value) == f"config.toml: {message}"
    assert "\n" not in str(info.value)


def test_unknown_tool_and_backend_are_named():
    data = default_config_data()
    data["agents"]["assistant"]["tools"] = ["calculator", "teleport"]
    with pytest.raises(ConfigError, match=r"^agents\.assistant\.tools: unknown tool 'teleport'; known tools: "):
        ServerContext.build(parse_config(data))
    data = default_config_data()
    data["ledger"]["backend"] = "mongo"
    with pytest.raises(ConfigError, match=r"^ledger\.backend: unknown backend 'mongo'; known backends: .*files.*sqlite"):
        ServerContext.build(parse_config(data))


def test_cli_bad_config_exits_with_one_line(tmp_path):
    """`awaken serve --config PATH` with a bad key prints one line and exits 2."""
    bad = tmp_path / "bad.toml"
    bad.write_text((ROOT / "config.toml").read_text().replace("keepalive_seconds", "keepalive_secs"))
    proc = subprocess.run([sys.executable, "-m", "awaken", "serve", "--config", str(bad)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"awaken: {bad}: unknown key server.keepalive_secs"]


async def test_cli_serves_with_config_and_bind_override(tmp_path):
    """`--config` and `--bind` override; the server answers /healthz and stops on SIGTERM."""
    cfg = tmp_path / "c.toml"
    cfg.write_text((ROOT / "config.toml").read_text().replace("./var/awaken.db", str(tmp_path / "a.db")))
    port = free_port()
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "awaken", "serve", "--config", str(cfg), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(100):
                try:
                    r = await client.get(f"http://127.0.0.1:{port}/healthz")
                    break
                except httpx.TransportError:
                    await trio.sleep(0.1)
            assert r.status_code == 200 and r.json() == {"status": "ok"}
            assert (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            await proc.wait()
    assert proc.returncode == 0
    assert (tmp_path / "a.db").exists()


def test_docs_openai_snippet_is_a_valid_agent_table():
    """Issue 6.6: the docs' three lines point an agent at a local OpenAI-compatible server."""
    import re
    import tomllib

    readme = (ROOT / "docs" / "tools-and-models.md").read_text()
    snippet = re.search(r"```toml\n(\[agents\.assistant\]\n.*?)```", readme, re.S).group(1)
    assert len(snippet.strip().splitlines()) == 3
    data = default_config_data()
    data["agents"]["assistant"].update(tomllib.loads(snippet)["agents"]["assistant"])
    config = parse_config(data)
    agent = config.agents["assistant"]
    assert agent.model == "openai:llama3.2"
    assert config.provider_for(agent).base_url == "http://127.0.0.1:11434/v1"
    assert config.provider_for(agent).api_key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    ("key", "value"),
    [("keepalive_seconds", 0.0), ("max_buffered_bytes", 0), ("ws_ping_seconds", -1.0), ("graceful_timeout", -1.0),
     ("replay_memo_bytes", -1)],
)
def test_server_values_out_of_range_are_refused(key, value):
    """A zero keep-alive interval would flood a stream with comments; refuse it at start-up."""
    data = default_config_data()
    data["server"][key] = value
    with pytest.raises(ConfigError, match=rf"^config: server\.{key}: .* is out of range"):
        parse_config(data)


def test_backend_options_it_does_not_take_are_a_config_error():
    """`[ledger] options` go to the backend's constructor: refusals are one line naming the key."""
    data = default_config_data()
    data["ledger"]["options"] = {"bogus": 1}
    with pytest.raises(ConfigError, match=r"^ledger\.options: the sqlite backend refused its options: .*bogus"):
        ServerContext.build(parse_config(data))
    data["ledger"]["options"] = {"busy_timeout_ms": "soon"}
    with pytest.raises(ConfigError, match=r"^ledger\.options: .*busy_timeout_ms must be a non-negative integer"):
        ServerContext.build(parse_config(data))


def test_a_backend_registered_by_a_third_party_package_is_chosen_by_name(tmp_path, monkeypatch):
    """Issue 5.1: any name registered under the `awaken.ledgers` entry-point group is a backend; an
    unknown name lists every known one, the third party's included."""
    from importlib.metadata import EntryPoint

    import awaken.ledger.interface as ledger_module

    plugin = EntryPoint(name="vendor-db", value="storage_backends.sqlite_ledger:SqliteLedger",
                        group="awaken.ledgers")
    real = ledger_module.entry_points

    def entry_points(group: str):  # noqa: ANN202 - the importlib.metadata signature
        return [*real(group=group), plugin] if group == "awaken.ledgers" else real(group=group)

    monkeypatch.setattr(ledger_module, "entry_points", entry_points)
    data = default_config_data()
    data["ledger"] = {"backend": "vendor-db", "path": str(tmp_path / "v.db")}
    ctx = ServerContext.build(parse_config(data))
    assert type(ctx.ledger).__name__ == "SqliteLedger"
    data["ledger"]["backend"] = "nope"
    with pytest.raises(ConfigError, match=r"known backends: files, postgres, sqlite, vendor-db$"):
        ServerContext.build(parse_config(data))


# --- model providers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["providers"]["openai"].update(base_ur="x"), "unknown key providers.openai.base_ur"),
        (lambda d: d["providers"]["openai"].update(max_retries=2.5),
         "providers.openai.max_retries: expected int, got float 2.5"),
        (lambda d: d["agents"]["assistant"].update(model="openai:m", provider={"max_retries": "2"}),
         "agents.assistant.provider.max_retries: expected int, got str '2'"),
        (lambda d: d["agents"]["assistant"].update(model="openai:m", provider={"bas_url": "http://h/v1"}),
         "unknown key agents.assistant.provider.bas_url"),
        (lambda d: d["agents"]["assistant"].update(provider={"base_url": "http://h/v1"}),
         "unknown key agents.assistant.provider.base_url"),
        (lambda d: d["providers"].update(scripted={"speed": 2}), "unknown key providers.scripted.speed"),
        (lambda d: d["providers"].update(opena={}),
         "providers.opena: unknown provider 'opena'; known providers: openai, scripted"),
        (lambda d: d["agents"]["assistant"].update(model="vendor:m"),
         "agents.assistant.model: 'vendor:m' is neither 'scripted' nor 'openai:<model>'"),
        (lambda d: d["agents"]["assistant"].update(model="openai:"),
         "agents.assistant.model: 'openai:' is neither 'scripted' nor 'openai:<model>'"),
        (lambda d: d["agents"]["assistant"].update(model="scripted:m"),
         "agents.assistant.model: 'scripted:m' is neither 'scripted' nor 'openai:<model>'"),
    ],
)
def test_each_provider_validates_its_own_table_in_one_line_naming_the_key(change, message):
    """Issue 11.5: `[providers.<name>]` and an agent's `provider = {...}` are checked against the named
    provider's config class; the scripted provider takes no settings and no model name."""
    data = default_config_data()
    change(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.toml")
    assert str(info.value) == f"config.toml: {message}"


def test_an_agents_provider_overrides_merge_over_the_providers_table(monkeypatch):
    """The agent's model gets `[providers.openai]` with its own `provider` keys on top; scripted agents
    share one scripted model."""
    from awaken.engine.agents import build_models
    from awaken.models.openai import OpenAIConfig, OpenAIModel
    from awaken.models.scripted import ScriptedModel

    data = default_config_data()
    data["providers"]["openai"] = {"base_url": "http://127.0.0.1:9/v1", "max_retries": 5}
    data["agents"]["assistant"].update(model="openai:llama3.2", provider={"max_retries": 0, "temperature": 0})
    models = build_models(parse_config(data))
    assistant = models["assistant"]
    assert isinstance(assistant, OpenAIModel) and assistant.model == "llama3.2"
    assert assistant.config == OpenAIConfig(base_url="http://127.0.0.1:9/v1", max_retries=0, temperature=0.0)
    assert isinstance(models["guarded"], ScriptedModel) and models["guarded"] is models["frontend"]


@pytest.fixture
def echo_provider_installed(tmp_path, monkeypatch):
    """A package registering `echo` under `awaken.models`, as pip would install it: a dist-info on sys.path."""
    dist = tmp_path / "site" / "awaken_echo_model-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: awaken-echo-model\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[awaken.models]\necho = tests.plugins.echo_model:EchoProvider\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


async def test_a_model_provider_registered_by_a_third_party_package_is_chosen_by_name(
    tmp_path, echo_provider_installed
):
    """Issue 11.5: any name under the `awaken.models` group is a provider: `echo:<model>` picks it, its
    own config class validates `[providers.echo]` and the agent's overrides, and it serves runs."""
    data = default_config_data()
    data["ledger"] = {"backend": "sqlite", "path": str(tmp_path / "a.db")}
    data["providers"]["echo"] = {"prefix": "parrot"}
    data["agents"]["assistant"].update(model="echo:polly", provider={"shout": True})
    config = parse_config(data)
    async with live_server(config) as server, server.client() as client:
        events = await post_agui(client, agui_body("t1", "r1", [{"id": "u1", "role": "user", "content": "hello"}]))
        agents = (await client.get("/v1/agents")).json()
    assert agui_text(events) == "PARROT POLLY: HELLO"
    assert [a["model"] for a in agents["agents"] if a["id"] == "assistant"] == ["echo:polly"]

    data["providers"]["echo"] = {"prefix": " "}
    with pytest.raises(ConfigError, match=r"^config: providers\.echo: prefix must not be blank$"):
        parse_config(data)
    data["providers"]["echo"] = {"prefix": "parrot"}
    data["agents"]["assistant"]["provider"] = {"shout": "yes"}
    with pytest.raises(ConfigError, match=r"^config: agents\.assistant\.provider\.shout: expected bool, got str 'yes'$"):
        parse_config(data)
    data["agents"]["assistant"]["model"] = "parrot"
    del data["agents"]["assistant"]["provider"]
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert str(info.value) == (
        "config: agents.assistant.model: 'parrot' is none of 'scripted', 'echo:<model>', 'openai:<model>'")
    data["agents"]["assistant"]["model"] = "scripted"
    data["providers"]["parrot"] = {}
    with pytest.raises(ConfigError, match=r"^config: providers\.parrot: unknown provider 'parrot'; "
                                          r"known providers: echo, openai, scripted$"):
        parse_config(data)
