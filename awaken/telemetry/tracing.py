"""A run's spans: always kept as its timeline (the console's), exported as OpenTelemetry traces when an
exporter is configured.

Every run records its spans here (``run`` opens its root, ``child`` the others; ``conventions`` names
them): admission, each step, each model call, each tool call, each wait at a gate and each ledger
commit. The spans of recent runs stay in bounded memory (a ``Timelines`` store, one per server: its
context holds it, as it holds the metrics registry; at most ``MAX_RUNS`` runs and ``TIMELINE_BYTES``
bytes, ``MAX_SPANS`` spans per run) and are what the console's timeline shows, with no collector
anywhere. A run's spans are objects while it executes; once its execution ended they are kept packed,
as compact JSON rows (``Timeline.pack``; ``span_json`` makes a row what the console reads): a run that
ended costs one ``bytes`` object, not a span object, an attribute dict and their values per span.

With an exporter configured (``configure``: the standard ``OTEL_*`` variables first, then the
``[telemetry]`` table) each span is also an OpenTelemetry span: the SDK's ``BatchSpanProcessor`` hands
ended spans to the OTLP/HTTP exporter in its own thread, so the event loop never waits on a collector,
and a collector that is down loses spans (the queue is bounded), never runs. Whether the OpenTelemetry
side exists is decided once, at start-up: with nothing configured no OpenTelemetry object is made and
a span costs a small Python object.

Parentage follows the task tree: the current span is a ``ContextVar``, which trio copies into every
task a nursery spawns, so the tools a step runs concurrently and a run's first write, started beside
its first step, are children of the span that spawned them. With the exporter on, the current span is
also OpenTelemetry's current context while it is open: a client's ``traceparent`` (``incoming``, the
W3C propagator) is the parent of the run it asks for, and the OpenAI-compatible provider's and MCP's
HTTP requests carry the span they were made in (``inject``). Message content is recorded only with
``capture_content`` (``[telemetry]``, or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).

Shutting down: ``shutdown()`` flushes what is queued and stops the exporter's thread; it blocks (up
to its timeout), so the server calls it off the event loop (``flush``: ``trio.to_thread``).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from importlib import metadata
from typing import Any

import attrs
import orjson
import trio

from awaken.core.messages import Message
from awaken.telemetry import conventions as C

log = logging.getLogger("awaken.telemetry")

#: runs whose timelines are kept (the oldest goes first), and spans kept per run (the rest are counted)
MAX_RUNS = 256
MAX_SPANS = 400
#: the bytes the packed timelines of ended runs may take together (the oldest go first; ``python -m
#: bench.memtrace``: a run that ends waiting packs its 7 spans into about 1 KB)
TIMELINE_BYTES = 256 * 1024
#: how long ``flush`` waits for queued spans to reach the collector at shutdown
FLUSH_SECONDS = 2.0
#: the longest attribute value recorded (content, error texts)
MAX_VALUE = 8192

_ids = itertools.count(1)


_time_ns = time.time_ns


def now_ns() -> int:
    return _time_ns()


# -- the settings -----------------------------------------------------------------------------


@attrs.frozen
class TraceSettings:
    """What ``configure`` decided: where spans go (None: nowhere but the timelines) and what they hold."""

    #: ``otlp`` or ``console``; None: no exporter, no OpenTelemetry
    exporter: str | None = None
    #: the OTLP/HTTP traces URL (``…/v1/traces``)
    endpoint: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    service_name: str = "awaken"
    capture_content: bool = False


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def traces_url(base: str) -> str:
    """An OTLP/HTTP base URL as its traces URL (``http://collector:4318`` → ``…/v1/traces``)."""
    base = base.strip()
    return base if base.rstrip("/").endswith("/v1/traces") else base.rstrip("/") + "/v1/traces"


def parse_headers(text: str) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS``: ``key=value,key2=value2`` (values percent-decoded)."""
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if eq and key.strip():
            headers[key.strip().lower()] = unquote(value.strip())
    return headers


def settings_from(environ: Mapping[str, str], *, endpoint: str | None = None,
                  headers: Mapping[str, str] | None = None, service_name: str | None = None,
                  capture_content: bool = False) -> TraceSettings:
    """The trace settings from the standard ``OTEL_*`` variables over the ``[telemetry]`` table's
    (``endpoint``, ``headers``, ``service_name``, ``capture_content``).

    An exporter is on when ``OTEL_TRACES_EXPORTER`` names one (``otlp``, ``console``) or, unset, when
    an endpoint is configured (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``
    or ``endpoint``); ``OTEL_TRACES_EXPORTER=none`` and ``OTEL_SDK_DISABLED=true`` turn it off."""
    capture = capture_content or _truthy(environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))
    name = environ.get("OTEL_SERVICE_NAME") or service_name or "awaken"
    if _truthy(environ.get("OTEL_SDK_DISABLED")):
        return TraceSettings(service_name=name, capture_content=capture)
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        url: str | None = environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()  # used as it is, by the spec
    elif environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        url = traces_url(environ["OTEL_EXPORTER_OTLP_ENDPOINT"])
    else:
        url = traces_url(endpoint) if endpoint else None
    wanted = [e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    exporter = next((e for e in wanted if e in ("otlp", "console")), None) if wanted else ("otlp" if url else None)
    if wanted and exporter is None and wanted != ["none"]:
        log.warning("OTEL_TRACES_EXPORTER=%s: only otlp (over HTTP) and console are supported; tracing is off",
                    ",".join(wanted))
    if exporter == "otlp" and url is None:
        url = "http://localhost:4318/v1/traces"  # the OTLP/HTTP default
    env_headers = environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or environ.get("OTEL_EXPORTER_OTLP_HEADERS")
    sent = parse_headers(env_headers) if env_headers else {k.lower(): v for k, v in (headers or {}).items()}
    return TraceSettings(exporter, url if exporter == "otlp" else None, sent, name, capture)


# -- the process's tracing: decided once ------------------------------------------------------


class _Tracing:
    """The process's tracing: the OpenTelemetry tracer (None: off) and its provider."""

    __slots__ = ("capture", "exporter", "propagator", "provider", "settings", "tracer")

    def __init__(self) -> None:
        self.settings = TraceSettings()
        self.tracer: Any = None
        self.provider: Any = None
        self.exporter: Any = None
        self.propagator: Any = None
        self.capture = False


STATE = _Tracing()


def configure(settings: TraceSettings) -> None:
    """Start tracing as ``settings`` say (an exporter: the OpenTelemetry SDK, its batch processor and
    exporter; none: nothing). Replaces what an earlier ``configure`` started (stopping its exporter)."""
    shutdown(0.0)
    global _SPAN, _LEAF
    STATE.settings = settings
    STATE.capture = settings.capture_content
    if settings.exporter is None:
        return
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    try:
        version = metadata.version("awaken")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree never installed
        version = "0"
    if settings.exporter == "console":
        exporter: Any = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.endpoint, headers=dict(settings.headers) or None)
    resource = Resource.create({SERVICE_NAME: settings.service_name, "service.version": version})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    STATE.provider = provider
    STATE.exporter = exporter
    STATE.tracer = provider.get_tracer(C.SCOPE, version)
    STATE.propagator = TraceContextTextMapPropagator()
    _SPAN, _LEAF = OtelSpan, OtelLeaf
    log.info("tracing: exporting spans (%s%s) as service %s", settings.exporter,
             f" to {settings.endpoint}" if settings.endpoint else "", settings.service_name)


def enabled() -> bool:
    """Whether spans are exported (an exporter is configured)."""
    return STATE.tracer is not None


def shutdown(timeout: float = FLUSH_SECONDS) -> None:
    """Export what is queued (for up to ``timeout`` seconds) and stop the exporter; tracing is off
    afterwards. Blocking: from the event loop, ``await flush()``."""
    global _SPAN, _LEAF
    provider, exporter = STATE.provider, STATE.exporter
    STATE.tracer = STATE.provider = STATE.exporter = STATE.propagator = None
    _SPAN, _LEAF = Span, Leaf
    if provider is None:
        return
    try:
        if timeout > 0:
            # the SDK's flush waits for an export in progress whatever its timeout (one retrying against
            # a collector that is down retries for up to the exporter's own 10 s): wait for it apart
            flusher = threading.Thread(target=provider.force_flush, args=(int(timeout * 1000),), daemon=True)
            flusher.start()
            flusher.join(timeout)
        exporter.shutdown()  # first: an export still retrying gives up now, the rest is dropped
        provider.shutdown()
    except Exception as exc:  # a collector's trouble never stops the server
        log.warning("tracing: shutting the exporter down failed: %s", exc)


async def flush(seconds: float = FLUSH_SECONDS) -> None:
    """``shutdown``, off the event loop (a worker thread; a cancellation abandons the wait)."""
    if STATE.provider is not None:
        await trio.to_thread.run_sync(shutdown, seconds, abandon_on_cancel=True)


# -- propagation ------------------------------------------------------------------------------


def incoming(app: Callable[..., Any]) -> Callable[..., Any]:
    """``app`` honouring a client's ``traceparent``: the request runs in the context it names (the
    run it starts is its child). With no exporter, ``app`` itself: nothing is read."""
    if STATE.tracer is None:
        return app
    from opentelemetry import context as otel_context

    propagator = STATE.propagator

    async def traced(scope: dict, receive: Callable, send: Callable) -> None:
        carrier = None
        if scope.get("type") in ("http", "websocket"):
            for key, value in scope.get("headers", ()):
                if key == b"traceparent":
                    carrier = {"traceparent": value.decode("latin-1")}
                elif key == b"tracestate" and carrier is not None:
                    carrier["tracestate"] = value.decode("latin-1")
        if carrier is None:
            await app(scope, receive, send)
            return
        token = otel_context.attach(propagator.extract(carrier))
        try:
            await app(scope, receive, send)
        finally:
            otel_context.detach(token)

    return traced


def inject(headers: Any) -> None:
    """Put the current span's ``traceparent`` into ``headers`` (an outgoing HTTP request's)."""
    if STATE.propagator is not None:
        STATE.propagator.inject(headers)


async def inject_hook(request: Any) -> None:
    """An httpx ``request`` event hook: the request carries the span it is sent in."""
    inject(request.headers)


def request_hooks() -> dict[str, list[Callable[..., Any]]]:
    """The event hooks an outgoing HTTP client gets: ``inject_hook`` with an exporter, else none."""
    return {"request": [inject_hook]} if STATE.tracer is not None else {}


# -- spans ------------------------------------------------------------------------------------


_CURRENT: ContextVar[Span | None] = ContextVar("awaken_span", default=None)


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_VALUE:
        return value[:MAX_VALUE] + "…"
    return value


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: a classified error's code, a cancellation's ``cancelled``, else
    the exception's class."""
    if isinstance(exc, trio.Cancelled):
        return "cancelled"
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code else type(exc).__qualname__


class Shared(dict):  # type: ignore[type-arg]
    """Attributes spans share (every first step's, every call of one model's) until one of them sets its
    own: it is given a copy then (``Span.set``, ``Span.fail``)."""

    __slots__ = ()


class Span:
    """One timed piece of a run: its timeline entry (and, with an exporter, an ``OtelSpan``: also its
    OpenTelemetry span).

    Opened (``with``, or ``open``/``close``) it is the current span of its task and of the tasks that
    task spawns (a ``Leaf``, a span with no span under it, leaves its parent current); closing it
    records its end, and an exception passing through as ``error.type``. With nothing configured a span
    is this small object: a few slots, its attribute dict (shared until it sets its own: ``Shared``)
    and its place in the timeline."""

    __slots__ = ("_root", "_token", "attributes", "end_ns", "error", "id", "name", "parent", "since_ns",
                 "start_ns", "subject", "timeline")

    def __init__(self, name: str, parent: Span | None, attributes: dict[str, Any], start_ns: int | None,
                 timeline: Timeline, kind: Any = None) -> None:
        self.id = next(_ids)
        self.name = name
        self.parent = parent
        # a run's root keeps None here, not itself: a span referring to itself is a reference cycle, and
        # every run's root (with its timeline) then waited for the cycle collector after the run ended
        self._root: Span | None = (parent._root or parent) if parent is not None else None
        self.start_ns = start_ns or _time_ns()
        self.end_ns: int | None = None
        self.attributes = attributes
        self.error: str | None = None
        self.timeline = timeline
        self._token: Any = None
        # ``subject`` and ``since_ns``: a run's root only (``run`` sets them)
        if len(timeline.spans) + timeline.packed_count < MAX_SPANS:  # Timeline.add, inlined: every span passes here
            timeline.spans.append(self)
        else:
            timeline.dropped += 1

    @property
    def root(self) -> Span:
        """The root of the run this span belongs to (itself for the root)."""
        return self._root if self._root is not None else self

    def set(self, key: str, value: Any) -> None:
        if value is None:
            return
        if type(value) is str and len(value) > MAX_VALUE:
            value = _clip(value)
        attributes = self.attributes
        if type(attributes) is Shared:
            attributes = self.attributes = dict(attributes)
        attributes[key] = value

    def fail(self, kind: str, message: str | None = None) -> None:
        """The span's operation failed: ``error.type`` = ``kind``, status ERROR (``message``: why)."""
        self.error = kind
        attributes = self.attributes
        if type(attributes) is Shared:
            attributes = self.attributes = dict(attributes)
        attributes[C.ERROR_TYPE] = kind

    def open(self, current: bool = True) -> Span:
        if current:
            self._token = _CURRENT.set(self)
        return self

    def close(self, exc: BaseException | None = None, end_ns: int | None = None) -> None:
        """End the span (once); ``exc``: the exception that ended it, recorded unless it already failed."""
        if self.end_ns is not None:
            return
        if exc is not None and self.error is None:
            self.fail(error_type(exc), str(exc) or None)
        self.end_ns = end_ns or _time_ns()
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None

    def __enter__(self) -> Span:
        self._token = _CURRENT.set(self)  # ``open``, inlined
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        self.close(exc)

    def row(self) -> tuple[Any, ...]:
        """The span as the timeline keeps it once packed: ``(id, parent id, name, start ns, end ns, the
        attributes the console shows under their labels, error)`` (``span_json`` reads it back)."""
        shown = _SHOWN
        return (self.id, self.parent.id if self.parent is not None else None, self.name, self.start_ns, self.end_ns,
                {shown[key]: value for key, value in self.attributes.items() if key in shown}, self.error)

    def as_json(self) -> dict[str, Any]:
        return span_json(self.row())


class Leaf(Span):
    """A span under which no span is opened (a model call, a commit, admission): opened, it leaves its
    parent the current span (no context change to make and undo)."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return self

    def open(self, current: bool = False) -> Span:
        return self


class OtelSpan(Span):
    """A span when an exporter is configured: also an OpenTelemetry span, started and ended with it,
    given its attributes and its status; while open it is OpenTelemetry's current context too (a leaf's
    as well: the OpenAI-compatible provider's HTTP request carries its model call's span)."""

    __slots__ = ("_otel_token", "otel")

    def __init__(self, name: str, parent: Span | None, attributes: dict[str, Any], start_ns: int | None,
                 timeline: Timeline, kind: Any = None) -> None:
        super().__init__(name, parent, attributes, start_ns, timeline, kind)
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        self._otel_token: Any = None
        parent_otel = getattr(parent, "otel", None)
        context = trace.set_span_in_context(parent_otel) if parent_otel is not None else otel_context.get_current()
        self.otel = STATE.tracer.start_span(name, context=context, kind=kind or trace.SpanKind.INTERNAL,
                                            attributes={k: v for k, v in attributes.items() if v is not None},
                                            start_time=self.start_ns)

    def set(self, key: str, value: Any) -> None:
        if value is None:
            return
        if type(value) is str and len(value) > MAX_VALUE:
            value = _clip(value)
        super().set(key, value)
        self.otel.set_attribute(key, value)

    def fail(self, kind: str, message: str | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        super().fail(kind, message)
        self.otel.set_attribute(C.ERROR_TYPE, kind)
        self.otel.set_status(Status(StatusCode.ERROR, _clip(message) if message else None))

    def __enter__(self) -> Span:
        return self.open()

    def open(self, current: bool = True) -> Span:
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        if current:
            self._token = _CURRENT.set(self)
        self._otel_token = otel_context.attach(trace.set_span_in_context(self.otel))
        return self

    def close(self, exc: BaseException | None = None, end_ns: int | None = None) -> None:
        if self.end_ns is not None:
            return
        super().close(exc, end_ns)
        if self._otel_token is not None:
            from opentelemetry import context as otel_context

            otel_context.detach(self._otel_token)
            self._otel_token = None
        self.otel.end(end_time=self.end_ns)


class OtelLeaf(OtelSpan):
    """A leaf (``Leaf``) when an exporter is configured: OpenTelemetry's current context while open."""

    __slots__ = ()

    def open(self, current: bool = False) -> Span:
        return super().open(False)


#: attribute key -> the label the console's timeline shows it under
_SHOWN = C.TIMELINE_ATTRIBUTES


def span_json(row: Sequence[Any]) -> dict[str, Any]:
    """A span's ``row`` as the console reads it (times in ms since the epoch)."""
    span_id, parent_id, name, start_ns, end_ns, attributes, error = row
    start = start_ns / 1e6
    end = end_ns / 1e6 if end_ns is not None else None
    return {"id": span_id, "parentId": parent_id, "kind": C.KINDS.get(name.split(" ", 1)[0], "span"), "name": name,
            "start": round(start, 3), "end": round(end, 3) if end is not None else None,
            "durationMs": round(end - start, 3) if end is not None else None,
            "attributes": attributes, "error": error}


class _NoSpan:
    """The span of code that runs outside any run (a unit test calling the step loop bare, the
    reconciler): records nothing."""

    __slots__ = ()
    root: Any = None
    attributes: dict[str, Any] = {}

    def set(self, key: str, value: Any) -> None:
        pass

    def fail(self, kind: str, message: str | None = None) -> None:
        pass

    def open(self) -> _NoSpan:
        return self

    def close(self, exc: BaseException | None = None, end_ns: int | None = None) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        pass


NO_SPAN = _NoSpan()


def current() -> Span | None:
    """The span open in this task (None outside a run)."""
    return _CURRENT.get()


#: the classes spans are made of: decided with the exporter (``configure``)
_SPAN: type[Span] = Span
_LEAF: type[Span] = Leaf


def child(name: str, attributes: dict[str, Any] | None = None, *, start_ns: int | None = None,
          kind: Any = None, leaf: bool = False) -> Span | _NoSpan:
    """A span under the current one (not opened yet: ``with child(...) as span``); outside a run,
    ``NO_SPAN``. A ``leaf`` has no span under it: opened, it leaves its parent the current span."""
    parent = _CURRENT.get()
    if parent is None:
        return NO_SPAN
    return (_LEAF if leaf else _SPAN)(name, parent, attributes if attributes is not None else {}, start_ns,
                                      parent.timeline, kind)


# -- the spans of a run, by what they are -------------------------------------------------------


#: (agent id, description) -> its runs' root name and attributes, the thread's left to fill (a few
#: agents, asked on every run)
_ROOTS: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
#: the most keys a cache of span names and attributes holds (beyond: emptied, then filled again)
_NAMES_KEPT = 256


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> Any:
    """Keep ``value`` as ``cache[key]`` (a span name and attributes made once per agent, model or step;
    the hit is a plain ``dict.get`` at the call site) and return it."""
    if len(cache) > _NAMES_KEPT:
        cache.clear()
    cache[key] = value
    return value


def _root_names(agent_id: str, description: str) -> tuple[str, dict[str, Any]]:
    template: dict[str, Any] = {C.GEN_AI_OPERATION_NAME: C.OP_INVOKE_AGENT, C.GEN_AI_AGENT_ID: agent_id,
                                C.GEN_AI_AGENT_NAME: agent_id, C.GEN_AI_CONVERSATION_ID: None}
    if description:
        template[C.GEN_AI_AGENT_DESCRIPTION] = description
    return f"{C.OP_INVOKE_AGENT} {agent_id}", template


def run(agent_id: str, description: str, thread_id: str, subject: str | None,
        timelines: Timelines | None = None, *, current: bool = False) -> Span:
    """The root of one execution of a run (``invoke_agent <agent>``) for the request of ``subject``,
    not opened yet (``current``: opened, the current span). Its run id is named once admission knows it
    (``admitted``: its timeline is then kept in ``timelines``, None: nowhere); its outcome when it ends
    (``ended``)."""
    known = _ROOTS.get((agent_id, description)) or _remember(_ROOTS, (agent_id, description),
                                                             _root_names(agent_id, description))
    attributes = known[1].copy()
    attributes[_CONVERSATION_ID] = thread_id
    root = _SPAN(known[0], None, attributes, None, Timeline(timelines))
    root.subject = subject
    root.since_ns = None
    if current:
        if type(root) is Span:
            root._token = _CURRENT.set(root)  # ``open``, inlined
        else:
            root.open()
    return root


_CONVERSATION_ID = C.GEN_AI_CONVERSATION_ID


def identify(root: Span, run_id: str, *, resumed: bool) -> None:
    """The run has its id: the root says it, and the run's timeline is kept under it in the store
    ``run`` named (a resumed run's spans join the timeline of its earlier execution)."""
    if type(root) is Span:  # ``set``, inlined: no exporter
        root.attributes[C.RUN_ID] = run_id
    else:
        root.set(C.RUN_ID, run_id)
    if resumed:
        root.set(C.RUN_RESUMED, True)
    timeline = root.timeline
    if timeline.store is not None:
        timeline.store.keep(root.attributes[_CONVERSATION_ID], run_id, timeline, resumed=resumed)


def admitted(root: Span, run_id: str, *, resumed: bool) -> None:
    """Admission gave the run its id: its span (``awaken.admission``, from the root's start to now) is
    recorded, and the run identified (``identify``). With nothing but the timelines to record to, the
    root says its id now and the rest is left to the store's next read or the run's end
    (``Timelines.settle``): none of it comes between a run and its first delta."""
    if type(root) is Span:
        store = root.timeline.store
        if store is not None:
            attributes = root.attributes
            attributes[C.RUN_ID] = run_id
            if resumed:
                attributes[C.RUN_RESUMED] = True
            store._pending.append((root, run_id, resumed, _time_ns()))
            return
    elif root is NO_SPAN:
        return
    _admission(root, _time_ns())
    identify(root, run_id, resumed=resumed)


def _admission(root: Span, end_ns: int, exc: BaseException | None = None) -> None:
    """Record admission's span: from the root's start to ``end_ns``, right after the root."""
    timeline = root.timeline
    span = _LEAF(C.SPAN_ADMISSION, root, {}, root.start_ns, timeline)
    span.close(exc, end_ns)
    spans = timeline.spans
    if spans and spans[-1] is span and spans[0] is not span:  # made after the run's other spans: it follows the root
        spans.pop()
        at = next((i for i, s in enumerate(spans) if s is root), len(spans) - 1) + 1
        spans.insert(at, span)


def refused(root: Span, status: str, exc: BaseException) -> None:
    """Admission refused the run (``exc``): its span records why, and the root ends."""
    if root is NO_SPAN:
        return
    _admission(root, _time_ns(), exc)
    ended(root, status, exc)


def renamed(run_id: str) -> None:
    """The ledger gave the current run a fresh id (the client's was taken): its root and timeline say so."""
    span = _CURRENT.get()
    if span is not None:
        identify(span.root, run_id, resumed=False)


def committed(run_id: str, status: str, cause: str | None, error_code: str | None,
              error_message: str | None) -> None:
    """Run ``run_id`` committed its outcome ``status`` (``cause``: an interruption's; ``error_code``: a
    failure's): when it is the current run, its root says so."""
    span = _CURRENT.get()
    if span is None or span.root.attributes.get(C.RUN_ID) != run_id:
        return  # outside a run, or another run's commit (a waiting run superseded)
    root = span.root
    root.set(C.RUN_STATUS, status)
    root.set(C.RUN_CAUSE, cause)
    if error_code:
        root.fail(error_code, error_message)
    elif cause:
        root.fail(cause, error_message)


def ended(root: Span, status: str, exc: BaseException | None = None) -> None:
    """Close the run's root: its execution ended in ``status`` (as far as it was committed), or was
    refused by ``exc`` before it started."""
    if C.RUN_STATUS not in root.attributes and C.RUN_ID in root.attributes:
        root.set(C.RUN_STATUS, status)
    root.close(exc)
    store = root.timeline.store
    if store is not None:
        store.settle()  # the keeping its start left to now (``Timelines.keep``: a resume's joins its run's)
    root.timeline.pack()


def waiting_since(ms: int) -> None:
    """A resume: the run it continues has waited since ``ms`` (its committed ``waiting``)."""
    span = _CURRENT.get()
    if span is not None:
        span.root.since_ns = ms * 1_000_000


def decider() -> str | None:
    """Who made the current run's decisions: the subject of the request that resumed it."""
    span = _CURRENT.get()
    return (span.root.subject or "anonymous") if span is not None else None


def waited(name: str, call_id: str, decision: str) -> None:
    """Record the wait at the gate of call ``call_id`` (``awaken.gate <tool>``), from the run's
    committed ``waiting`` to now, with the decision and who made it."""
    span = _CURRENT.get()
    if span is None:
        return
    with gate(name, call_id, decision, decider() or "anonymous", span.root.since_ns):
        pass


def since() -> int | None:
    """When the current run started waiting (a resume), in ns since the epoch."""
    span = _CURRENT.get()
    return span.root.since_ns if span is not None else None


def model_names(model: str) -> tuple[str, str]:
    """(provider, model) of an agent's ``model`` setting: ``openai:gpt-4o`` → (openai, gpt-4o); a
    provider that takes no model name reports its own name (``scripted`` → (scripted, scripted))."""
    provider, _, name = model.partition(":")
    return provider, name or provider


#: a model setting -> its chat span's name and attributes (a few settings, asked on every model call)
_CHATS: dict[str, tuple[str, dict[str, Any]]] = {}


def _chat_names(model: str) -> tuple[str, Shared]:
    provider, name = model_names(model)
    return f"{C.OP_CHAT} {name}", Shared({C.GEN_AI_OPERATION_NAME: C.OP_CHAT, C.GEN_AI_PROVIDER_NAME: provider,
                                          C.GEN_AI_REQUEST_MODEL: name})


def chat(model: str) -> Span | _NoSpan:
    """A model call's span (``chat <model>``)."""
    parent = _CURRENT.get()
    if parent is None:
        return NO_SPAN
    known = _CHATS.get(model) or _remember(_CHATS, model, _chat_names(model))
    kind = None
    if STATE.tracer is not None:
        from opentelemetry.trace import SpanKind

        kind = SpanKind.CLIENT
    return _LEAF(known[0], parent, known[1], None, parent.timeline, kind)


def chat_result(span: Span | _NoSpan, input_tokens: int, output_tokens: int, tool_calls: bool) -> None:
    span.set(C.GEN_AI_RESPONSE_FINISH_REASONS, (C.FINISH_TOOL_CALLS if tool_calls else C.FINISH_STOP,))
    span.set(C.GEN_AI_USAGE_INPUT_TOKENS, input_tokens)
    span.set(C.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens)


def tool(name: str, call_id: str, kind: str, *, decision: str | None = None, decided_by: str | None = None,
         start_ns: int | None = None) -> Span | _NoSpan:
    """A tool call's span (``execute_tool <tool>``): ``kind`` server, mcp or client; the gate's
    decision and who made it."""
    return child(f"{C.OP_EXECUTE_TOOL} {name}", {
        C.GEN_AI_OPERATION_NAME: C.OP_EXECUTE_TOOL, C.GEN_AI_TOOL_NAME: name, C.GEN_AI_TOOL_CALL_ID: call_id,
        C.GEN_AI_TOOL_TYPE: C.TOOL_TYPE_FUNCTION, C.TOOL_KIND: kind, C.GATE_DECISION: decision,
        C.GATE_DECIDED_BY: decided_by}, start_ns=start_ns)


def tool_result(span: Span | _NoSpan, status: str, arguments: str | None = None, result: str | None = None) -> None:
    """The call's result status (ok, error, denied), and with ``capture_content`` its arguments and result."""
    span.set(C.TOOL_STATUS, status)
    if status == "error":
        span.fail("tool_error")
    if STATE.capture:
        span.set(C.GEN_AI_TOOL_CALL_ARGUMENTS, arguments)
        span.set(C.GEN_AI_TOOL_CALL_RESULT, result)


def gate(name: str, call_id: str, decision: str, decided_by: str, since_ns: int | None) -> Span | _NoSpan:
    """The wait at a permission gate (``awaken.gate <tool>``), from ``since_ns`` (the committed
    ``waiting``) to now, when the decision arrived."""
    return child(f"{C.SPAN_GATE} {name}", {C.GEN_AI_TOOL_NAME: name, C.GEN_AI_TOOL_CALL_ID: call_id,
                                           C.GATE_DECISION: decision, C.GATE_DECIDED_BY: decided_by},
                 start_ns=since_ns)


#: a step number -> its span's name and attributes
_STEPS: dict[int, tuple[str, Shared]] = {}


def step(number: int) -> Span | _NoSpan:
    parent = _CURRENT.get()  # ``child``, inlined: one a step
    if parent is None:
        return NO_SPAN
    known = _STEPS.get(number) or _remember(_STEPS, number, (f"{C.SPAN_STEP} {number}",
                                                              Shared({C.STEP_NUMBER: number})))
    return _SPAN(known[0], parent, known[1], None, parent.timeline)


def commit(status: str, messages: int, backend: str) -> Span | _NoSpan:
    """A ledger commit of the run (``awaken.commit <status>``; ``start``: its first write)."""
    return child(f"{C.SPAN_COMMIT} {status}", {C.COMMIT_STATUS: status, C.COMMIT_MESSAGES: messages,
                                               C.LEDGER_BACKEND: backend}, leaf=True)


def admission() -> Span | _NoSpan:
    """Admission's span (a leaf)."""
    parent = _CURRENT.get()
    if parent is None:
        return NO_SPAN
    return _LEAF(C.SPAN_ADMISSION, parent, {}, None, parent.timeline)


def capture(span: Span | _NoSpan, key: str, value: Callable[[], Any]) -> None:
    """Record ``value()`` as ``key`` on ``span`` when content is captured (the value is only made then)."""
    if STATE.capture and span is not NO_SPAN:
        span.set(key, value())


def messages_json(messages: Iterable[Message]) -> str:
    """Messages in the GenAI conventions' shape (``[{role, parts: [{type, ...}]}]``), as JSON."""
    out = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        for part in message.parts:
            kind = part.kind
            if kind == "text":
                parts.append({"type": "text", "content": part.text})
            elif kind == "reasoning":
                parts.append({"type": "reasoning", "content": part.text})
            elif kind == "tool_call":
                parts.append({"type": "tool_call", "id": part.tool_call_id, "name": part.name,
                              "arguments": part.arguments})
            elif kind == "tool_result":
                parts.append({"type": "tool_call_response", "id": part.tool_call_id, "response": part.content})
            else:
                parts.append({"type": kind})
        out.append({"role": message.role, "parts": parts})
    return json.dumps(out, ensure_ascii=False)


# -- the timelines of recent runs -----------------------------------------------------------------


class Timeline:
    """The spans of one run (all its executions), in the order they started; at most ``MAX_SPANS``.

    An execution's spans are objects while it runs (``spans``); once every span is closed (its
    execution ended: ``ended``) they are packed (``pack``): their rows (``Span.row``) as the items of
    one JSON array, one ``bytes`` object for the run, and the span objects dropped. A resumed execution's spans
    follow the packed ones."""

    __slots__ = ("dropped", "key", "packed", "packed_count", "spans", "store")

    def __init__(self, store: Timelines | None = None) -> None:
        self.spans: list[Span] = []
        self.dropped = 0
        #: the ended executions' spans: the items of a JSON array, comma-separated (b"" when none)
        self.packed = b""
        self.packed_count = 0
        #: the store the run's timeline is kept in once it has its id (None: nowhere), and its key there
        #: while it is kept (``(thread id, run id)``)
        self.store = store
        self.key: tuple[str, str] | None = None

    def add(self, span: Span) -> None:
        if len(self.spans) + self.packed_count < MAX_SPANS:
            self.spans.append(span)
        else:
            self.dropped += 1

    def pack(self) -> None:
        """Keep the spans as their JSON once none is open any more (an execution still running keeps
        its spans as objects: a resumed one that started before the one it continues ended)."""
        spans = self.spans
        if not spans or any(s.end_ns is None for s in spans):
            return
        items = orjson.dumps([s.row() for s in spans])[1:-1]  # rows: no dict, no rounding per span
        grown = len(items) + (1 if self.packed else 0)
        self.packed = self.packed + b"," + items if self.packed else items
        self.packed_count += len(spans)
        self.spans = []
        if self.key is not None and self.store is not None:
            self.store.grew(grown)

    def as_json(self) -> dict[str, Any]:
        spans = [span_json(row) for row in orjson.loads(b"[" + self.packed + b"]")] if self.packed else []
        return {"spans": spans + [s.as_json() for s in self.spans], "dropped": self.dropped}


class Timelines:
    """The timelines of the runs this server ran most recently, by thread and run id: at most
    ``limit`` runs, and at most ``limit_bytes`` of packed spans (the oldest runs go first). One per
    server (``ServerContext.timelines``), handed to the engine, read by the threads API."""

    def __init__(self, limit: int = MAX_RUNS, limit_bytes: int = TIMELINE_BYTES) -> None:
        self.limit = limit
        self.limit_bytes = limit_bytes
        #: the packed bytes of the timelines kept
        self.size = 0
        self._runs: OrderedDict[tuple[str, str], Timeline] = OrderedDict()
        #: what ``keep`` (and ``admitted``) asked and ``settle`` has not done yet
        self._pending: list[tuple[Any, str, Any, Any]] = []

    def __len__(self) -> int:
        self.settle()
        return len(self._runs)

    def keep(self, thread_id: str, run_id: str, timeline: Timeline, *, resumed: bool = False) -> None:
        """Keep ``timeline`` as the run's; a resumed run's earlier execution's spans come first. A fresh
        run whose id another run holds is not kept under it (the ledger gives it a fresh id).

        Done at the next read of the store or the end of a run (``settle``), in the order asked: a run's
        start (before its first output) only notes it, and every reader finds the running run."""
        self._pending.append((thread_id, run_id, timeline, resumed))

    def settle(self) -> None:
        """Do the keeping asked so far (``keep``, and ``admitted``: a run's admission span first)."""
        pending = self._pending
        if pending:
            self._pending = []
            for first, run_id, third, fourth in pending:
                if type(first) is str:
                    self._keep(first, run_id, third, fourth)
                else:  # (root, run id, resumed, admission's end): ``admitted``
                    _admission(first, fourth)
                    self._keep(first.attributes[_CONVERSATION_ID], run_id, first.timeline, third)

    def _keep(self, thread_id: str, run_id: str, timeline: Timeline, resumed: bool) -> None:
        key = (thread_id, run_id)
        earlier = self._runs.get(key)
        if earlier is not None and earlier is not timeline and not resumed:
            return
        if timeline.key is not None and timeline.key != key:  # renamed: kept under its new id only
            self._drop(timeline.key)
        if earlier is not None and earlier is not timeline:
            for span in timeline.spans:
                span.timeline = earlier
                earlier.add(span)
            timeline.spans = []
            timeline = earlier
        elif earlier is None:
            timeline.key = key
            self.size += len(timeline.packed)
        self._runs[key] = timeline
        self._runs.move_to_end(key)  # the most recent
        self._evict()

    def grew(self, size: int) -> None:
        """A kept timeline packed ``size`` more bytes."""
        self.size += size
        self._evict()

    def _evict(self) -> None:
        runs = self._runs
        while len(runs) > self.limit or (self.size > self.limit_bytes and len(runs) > 1):
            self._drop(next(iter(runs)))

    def _drop(self, key: tuple[str, str]) -> None:
        timeline = self._runs.pop(key, None)
        if timeline is not None:
            timeline.key = None
            self.size -= len(timeline.packed)

    def get(self, thread_id: str, run_id: str) -> Timeline | None:
        self.settle()
        return self._runs.get((thread_id, run_id))

    def clear(self) -> None:
        self.settle()
        for timeline in self._runs.values():
            timeline.key = None
        self._runs.clear()
        self.size = 0
