"""Prometheus metrics: every metric's name, labels and help text, and the objects that count them.

``ServerMetrics`` is one server's metrics in a registry of its own (never prometheus-client's global
one: two servers in one process, as the tests build them, count apart); ``GET /metrics`` serves
``render()`` in the Prometheus text format (``awaken/http/metrics.py``). Each fact is counted at the one
place that decides it, which calls in here:

* a run's start and end: its ``RunState`` (``awaken/engine/state.py``) tells its ``RunMetrics``
  (``begin``, ``ended``, ``left_waiting``), so every path to an outcome (the step loop, a failure, an
  interruption, the reconciler's late commit) is counted once;
* a model call (``model_call``: its duration, tokens, and the run's first output, once per execution,
  seen by swapping the step builder's sink for one event), a committed step's tool results and gate
  decisions (``committed``);
* a ledger commit's latency: the configured ledger's writes, timed (``time_commits``, from the ledger
  registry);
* a refusal: the one writer of each refusal (``error_body`` for JSON errors, ``Protocol.refusal`` for
  refusal streams) tells the request's metrics (``awaken.core.errors.count_refusal``);
* an HTTP request and an open stream: the ASGI middleware (``awaken/http/metrics.py``).

The hot path (a delta) does no work here: counting happens per run, step, model call, commit and
request. The GenAI semantic conventions' client metrics (``gen_ai.client.token.usage``,
``gen_ai.client.operation.duration``, Development status) appear under their Prometheus names
(``gen_ai_client_token_usage``, ``gen_ai_client_operation_duration_seconds``) with their buckets.
"""

from __future__ import annotations

import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.utils import floatToGoString

from awaken.telemetry import logs

#: the media type of ``GET /metrics`` (the Prometheus text format, 0.0.4)
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # what every Prometheus version reads

#: time to first delta and ledger commits are short; a run may take minutes
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: the GenAI semantic conventions' advice for ``gen_ai.client.token.usage`` and ``…operation.duration``
GEN_AI_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
                        67108864)
GEN_AI_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
                           81.92)

#: name -> (kind, help text, label names): every metric the server exports (``ServerMetrics`` makes
#: exactly these; docs/deploying.md lists them)
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "awaken_runs_started": ("counter", "Runs that started executing (a new run, or a waiting run resumed), by agent.",
                            ("agent",)),
    "awaken_runs_ended": ("counter", "Runs that stopped executing, by agent and outcome (completed, waiting, "
                          "failed, interrupted).", ("agent", "outcome")),
    "awaken_runs_active": ("gauge", "Runs executing in this process now.", ()),
    "awaken_runs_waiting": ("gauge", "Runs this process put in waiting (for tool results or a gate) since it "
                            "started, less those it resumed or superseded.", ()),
    "awaken_streams_open": ("gauge", "Open run streams: SSE responses and WebSockets of run and rejoin routes.",
                            ()),
    "awaken_stream_watchers": ("gauge", "Watchers attached to the active runs' broadcasts.", ()),
    "awaken_run_first_delta_seconds": ("histogram", "Seconds from a run's start to its model's first output, "
                                       "by agent.", ("agent",)),
    "awaken_run_duration_seconds": ("histogram", "Seconds a run executed, from its start (or resume) to its "
                                    "outcome, by agent and outcome.", ("agent", "outcome")),
    "awaken_tokens": ("counter", "Model tokens, by agent, model and direction (input, output).",
                      ("agent", "model", "direction")),
    "awaken_tool_calls": ("counter", "Tool results committed, by tool and outcome (ok, error, denied).",
                          ("tool", "outcome")),
    "awaken_gate_decisions": ("counter", "Permission gates decided, by tool and decision (approved, denied).",
                              ("tool", "decision")),
    "awaken_ledger_commit_seconds": ("histogram", "Seconds a ledger write of a run took (its first write and "
                                     "every commit), by backend.", ("backend",)),
    "awaken_refusals": ("counter", "Errors answered, by code (a JSON error, or a run route's refusal "
                        "stream).", ("code",)),
    "awaken_http_requests": ("counter", "HTTP requests and WebSockets answered, by method, route template "
                             "and status.", ("method", "route", "status")),
    "gen_ai_client_token_usage": ("histogram", "Tokens per model call (GenAI semantic conventions: "
                                  "gen_ai.client.token.usage).",
                                  ("gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model",
                                   "gen_ai_token_type")),
    "gen_ai_client_operation_duration_seconds": (
        "histogram", "Seconds per model call (GenAI semantic conventions: gen_ai.client.operation.duration).",
        ("gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "error_type")),
}

_BUCKETS = {
    "awaken_run_first_delta_seconds": LATENCY_BUCKETS,
    "awaken_run_duration_seconds": RUN_BUCKETS,
    "awaken_ledger_commit_seconds": LATENCY_BUCKETS,
    "gen_ai_client_token_usage": GEN_AI_TOKEN_BUCKETS,
    "gen_ai_client_operation_duration_seconds": GEN_AI_DURATION_BUCKETS,
}


# -- the instruments ------------------------------------------------------------------------------
#
# prometheus-client's own metric objects take a lock on every increment (a histogram's observation:
# two) and rebuild their key on every ``labels`` call: several microseconds per run here, against
# nothing for these. Every instrument is touched from the event loop's thread only (the ledger's
# writes are timed around their ``await``, the gauges' functions read at a scrape), so a series is a
# plain number; prometheus-client still writes the text format, from ``Family.collect``.


class Series:
    """One series of a counter or gauge (one set of label values): a number."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount


class HistogramSeries:
    """One series of a histogram: a count per bucket (the last one: above every bound) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value: Prometheus's ``le``
        self.sum += value


class Family:
    """One metric: its name, kind, help text and label names, and its series by label values. A metric
    without labels is its own one series (``inc``, ``dec``; a gauge may be read from ``set_function``)."""

    def __init__(self, name: str, kind: str, help_text: str, labelnames: tuple[str, ...],
                 buckets: tuple[float, ...] = ()) -> None:
        self.name, self.kind, self.help, self.labelnames = name, kind, help_text, labelnames
        self.bounds = tuple(float(b) for b in buckets)
        self.series: dict[tuple[str, ...], Any] = {}
        self.function: Callable[[], float] | None = None
        self._only = self.labels() if not labelnames else None

    def labels(self, *values: str) -> Any:
        """The series of these label values (made on first use)."""
        found = self.series.get(values)
        if found is None:
            found = self.series[values] = HistogramSeries(self.bounds) if self.kind == "histogram" else Series()
        return found

    def inc(self, amount: float = 1.0) -> None:
        self._only.value += amount  # type: ignore[union-attr]

    def dec(self, amount: float = 1.0) -> None:
        self._only.value -= amount  # type: ignore[union-attr]

    def set_function(self, read: Callable[[], float]) -> None:
        """A gauge whose value is ``read()`` at each scrape."""
        self.function = read

    def collect(self) -> Metric:
        """The metric as prometheus-client's exposition writes it."""
        labels = list(self.labelnames)
        if self.kind == "histogram":
            family: Any = HistogramMetricFamily(self.name, self.help, labels=labels)
            les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
            for values, series in self.series.items():
                running, buckets = 0, []
                for le, count in zip(les, series.counts, strict=True):
                    running += count
                    buckets.append((le, running))
                family.add_metric([str(v) for v in values], buckets, series.sum)
            return family
        make = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        family = make(self.name, self.help, labels=labels)
        if self.function is not None:
            family.add_metric([], float(self.function()))
        else:
            for values, series in self.series.items():
                family.add_metric([str(v) for v in values], series.value)
        return family


class _Families:
    """The registry's one collector: every family of a server."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families = tuple(families)

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield family.collect()


def provider_and_model(model: str) -> tuple[str, str]:
    """``openai:gpt-4o-mini`` -> ``("openai", "gpt-4o-mini")``; ``scripted`` -> ``("scripted", "scripted")``."""
    provider, _, name = model.partition(":")
    return provider, name or provider


class RunView(Protocol):
    """What the run metrics read of a run (``engine.rundata.RunBase`` has it): its ids and its agent."""

    thread_id: str
    run_id: str

    @property
    def agent(self) -> Any: ...


class ServerMetrics:
    """One server's metrics, in its own registry (``registry``); ``render`` is the text ``/metrics`` serves."""

    def __init__(self, backend: str = "") -> None:
        self.backend = backend
        made = {name: Family(name, kind, help_text, labels, _BUCKETS.get(name, ()))
                for name, (kind, help_text, labels) in METRICS.items()}
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Families(made.values()))  # type: ignore[arg-type]
        self.started: Family = made["awaken_runs_started"]
        self.ended: Family = made["awaken_runs_ended"]
        self.active: Family = made["awaken_runs_active"]
        self.waiting: Family = made["awaken_runs_waiting"]
        self.streams: Family = made["awaken_streams_open"]
        self.watchers: Family = made["awaken_stream_watchers"]
        self.first_delta: Family = made["awaken_run_first_delta_seconds"]
        self.duration: Family = made["awaken_run_duration_seconds"]
        self.tokens: Family = made["awaken_tokens"]
        self.tool_calls: Family = made["awaken_tool_calls"]
        self.gates: Family = made["awaken_gate_decisions"]
        self.commits: Family = made["awaken_ledger_commit_seconds"]
        self.refusals: Family = made["awaken_refusals"]
        self.requests: Family = made["awaken_http_requests"]
        self.token_usage: Family = made["gen_ai_client_token_usage"]
        self.operation_duration: Family = made["gen_ai_client_operation_duration_seconds"]
        #: runs this process put in waiting minus those taken out of it (clamped at 0 when read: a run
        #: that waited before a restart may be resumed after it)
        self._waiting = 0
        self.waiting.set_function(lambda: max(0, self._waiting))
        #: runs executing and streams open now (the gauges read them when scraped: counting one is an
        #: addition to an attribute of this object, which every request and run holds)
        self.active_runs = 0
        self.open_streams = 0
        #: the runs that began executing and are not counted in ``awaken_runs_started`` yet
        self.begun: list[RunMetrics] = []
        self.active.set_function(lambda: self.active_runs)
        self.streams.set_function(lambda: self.open_streams)
        self.watchers.set_function(lambda: 0)
        self._commit_timer = self.commits.labels(backend) if backend else None
        self._agents: dict[tuple[str, str], AgentSeries] = {}

    def render(self) -> bytes:
        """Every metric in the Prometheus text format."""
        self.count_begun()
        return generate_latest(self.registry)

    def count_begun(self) -> None:
        """Count the runs that began since the last count in ``awaken_runs_started`` (a run's start only
        notes itself: ``RunMetrics.begin``)."""
        begun, self.begun = self.begun, []
        for run in begun:
            run.series().started.value += 1

    # -- what the server wires in -----------------------------------------------------------------

    def count_watchers(self, count: Callable[[], int]) -> None:
        """``awaken_stream_watchers`` is ``count()`` when scraped (the active runs' broadcasts)."""
        self.watchers.set_function(count)

    def time_commits(self, ledger: Any) -> None:
        """Time every write the engine makes to ``ledger`` (``start_run``, ``commit``) under its backend
        label: the instance's methods are wrapped in place, so its type and every other method stay."""
        timer = self._commit_timer
        if timer is None:
            return
        for name in ("start_run", "commit"):
            setattr(ledger, name, _timed(getattr(ledger, name), timer))

    def refused(self, code: str) -> None:
        self.refusals.labels(code).inc()

    def request(self, method: str, route: str, status: int) -> None:
        self.requests.labels(method, route, str(status)).inc()

    def run(self, run: RunView, subject: str | None) -> RunMetrics:
        """The metrics of one admitted run, started by ``subject`` (its ``RunState`` reports to them)."""
        return RunMetrics(self, run, subject)

    def agent(self, agent: Any) -> AgentSeries:
        """The series a run of ``agent`` (an ``AgentSpec``: its id, its ``config.model``) counts into."""
        key = (agent.id, agent.config.model)
        found = self._agents.get(key)
        if found is None:
            found = self._agents[key] = AgentSeries(self, *key)
        return found


def _timed(write: Callable[..., Any], timer: Any) -> Callable[..., Any]:
    """``write`` (a ledger's coroutine method), its every call's duration observed by ``timer``."""

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await write(*args, **kwargs)
        finally:
            timer.observe(time.perf_counter() - started)

    return timed


def _NO_RUN() -> None:
    return None


class AgentSeries:
    """The series a run of one agent (with one ``model`` setting) counts into, found once per run
    (``ServerMetrics.agent``) instead of by label values at every count."""

    __slots__ = ("duration_error", "duration_ok", "first_delta", "input_tokens", "input_usage", "output_tokens",
                 "output_usage", "started")

    def __init__(self, metrics: ServerMetrics, agent_id: str, model: str) -> None:
        provider, name = provider_and_model(model)
        self.started = metrics.started.labels(agent_id)
        self.first_delta = metrics.first_delta.labels(agent_id)
        self.duration_ok = metrics.operation_duration.labels("chat", provider, name, "")
        #: a failed call's duration series, by the exception's type (few, made on first use)
        self.duration_error: Callable[[str], Any] = lambda kind: metrics.operation_duration.labels(
            "chat", provider, name, kind)
        self.input_usage = metrics.token_usage.labels("chat", provider, name, "input")
        self.output_usage = metrics.token_usage.labels("chat", provider, name, "output")
        self.input_tokens = metrics.tokens.labels(agent_id, model, "input")
        self.output_tokens = metrics.tokens.labels(agent_id, model, "output")


class RunMetrics:
    """One run's instruments: what its ``RunState`` and its steps report, counted once each, and the
    run's ``run`` log line at its outcome. ``NO_RUN_METRICS`` is the one that counts nothing.

    Between a run's start and its first output little is done: its agent's series are found when it is
    admitted, its start counts two numbers (``begin``), and its model call (``model_call``: this object
    is that call's context manager, a run makes one at a time) notes the time of the first output,
    observed when the call ends."""

    __slots__ = ("_agent", "_began", "_call_started", "_first", "_first_at", "_input", "_metrics", "_original",
                 "_output", "_run", "_series", "_sink_owner", "subject")

    def __init__(self, metrics: ServerMetrics | None, run: RunView | None, subject: str | None) -> None:
        self._metrics = metrics
        # weakly: the run holds its state, which holds these metrics; a strong reference back would put
        # every run in a reference cycle, garbage the cyclic collector has to find later
        self._run = weakref.ref(run) if run is not None else _NO_RUN
        #: the run's agent, and its series once a count needs them (after the run's first output)
        self._agent = run.agent if run is not None else None
        self._series: AgentSeries | None = None
        self.subject = subject
        self._began: float | None = None
        self._first = False
        # set by ``begin``: ``_input``, ``_output``, the tokens of this execution's model calls; by
        # ``model_call``: ``_sink_owner``, ``_original``, ``_call_started``, ``_first_at``, the call in
        # progress (its output, whose sink is watched until the first output, the sink put back after
        # it, its start, and the first output's time)

    def begin(self) -> None:
        """The run starts executing (a fresh run, or a waiting one resumed)."""
        metrics = self._metrics
        if metrics is None or self._began is not None:
            return
        self._began = time.perf_counter()
        self._input = self._output = 0
        metrics.active_runs += 1
        metrics.begun.append(self)  # counted in ``awaken_runs_started`` at the next scrape or run end

    def series(self) -> AgentSeries:
        """The series this run counts into (its agent's)."""
        series = self._series
        if series is None:
            assert self._metrics is not None
            series = self._series = self._metrics.agent(self._agent)
        return series

    def first_output(self, at: float | None = None) -> None:
        """The run's model produced its first output (text, reasoning or a tool call) in this execution,
        at ``at`` (``time.perf_counter``; None: now)."""
        if self._metrics is None or self._first or self._began is None:
            return
        self._first = True
        self.series().first_delta.observe((at if at is not None else time.perf_counter()) - self._began)

    def ended(self, outcome: str, cause: str | None = None, error_code: str | None = None) -> None:
        """The run stopped executing with ``outcome`` (a status: completed, waiting, failed, interrupted)."""
        metrics, began = self._metrics, self._began
        if metrics is None or began is None:
            return
        self._began = None
        seconds = time.perf_counter() - began
        metrics.count_begun()
        run = self._run()
        agent = run.agent.id
        metrics.ended.labels(agent, outcome).inc()
        metrics.duration.labels(agent, outcome).observe(seconds)
        metrics.active_runs -= 1
        logs.run_line(thread=run.thread_id, run=run.run_id, agent=agent, outcome=outcome, cause=cause,
                      error_code=error_code, seconds=seconds, input_tokens=self._input,
                      output_tokens=self._output, subject=self.subject)

    def entered_waiting(self) -> None:
        if self._metrics is not None:
            self._metrics._waiting += 1

    def left_waiting(self) -> None:
        if self._metrics is not None:
            self._metrics._waiting -= 1

    def model_call(self, output: Any) -> RunMetrics | NoModelCall:
        """Time one model call whose output is ``output`` (a ``StepBuilder``: its ``step_usage`` is read
        at the end; ``with``); a call that raises is recorded with its error type. The run's first output
        is seen by swapping the builder's sink for one event (and putting it back), so no delta after it
        pays anything."""
        if self._metrics is None or self._began is None:
            return NO_MODEL_CALL
        self._sink_owner = output
        if not self._first:
            self._original = output.sink
            output.sink = self._watch
        else:
            self._original = None
        self._first_at = None
        self._call_started = time.perf_counter()
        return self

    def _watch(self, event: Any) -> None:
        self._first_at = time.perf_counter()
        original = self._sink_owner.sink = self._original
        original(event)

    def __enter__(self) -> RunMetrics:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        ended = time.perf_counter()
        output, original = self._sink_owner, self._original
        self._sink_owner = self._original = None
        if original is not None and output.sink == self._watch:
            output.sink = original
        if self._first_at is not None:
            self.first_output(self._first_at)
        series = self.series()
        if isinstance(exc, Exception):  # a cancellation is timed as a call that ended
            series.duration_error(type(exc).__name__).observe(ended - self._call_started)
            return
        series.duration_ok.observe(ended - self._call_started)
        usage = output.step_usage
        self._input += usage.input_tokens
        self._output += usage.output_tokens
        series.input_usage.observe(usage.input_tokens)
        series.output_usage.observe(usage.output_tokens)
        series.input_tokens.value += usage.input_tokens
        series.output_tokens.value += usage.output_tokens

    def committed(self, commit: Any) -> None:
        """A step was committed: count its tool results (by outcome) and gate decisions."""
        metrics = self._metrics
        if metrics is None:
            return
        for message in commit.messages:
            part = message.tool_result
            if part is None:
                continue
            metrics.tool_calls.labels(part.name, part.status).inc()
            if part.approval is not None:
                metrics.gates.labels(part.name, part.approval).inc()


class NoModelCall:
    """The model call of a run no server counts: nothing."""

    __slots__ = ()

    def __enter__(self) -> NoModelCall:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        pass


NO_MODEL_CALL = NoModelCall()


#: the run metrics of a run no server counts (a bare engine in a test, crash recovery)
NO_RUN_METRICS = RunMetrics(None, None, None)
