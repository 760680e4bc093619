"""AI SDK encoder: AgentEvents → UI Message Stream chunks (``x-vercel-ai-ui-message-stream: v1``).

Shape (``reference/aisdk.md`` §4, §7)::

    start{messageId, messageMetadata{runId}} → (start-step … finish-step)*
        → finish{finishReason, messageMetadata{runId, usage}}

A committed state change is a ``data-state`` chunk ``{id: "state_<runId>", data: <the whole state>}``
(one id per run, so the client replaces the part each time).

Inside a step: ``text-*`` / ``reasoning-*`` start/delta/end triads (the engine closes them before a
tool block), ``tool-input-start`` → ``tool-input-delta``* → ``tool-input-available`` (or
``tool-input-error`` when the model's arguments are not JSON), then the committed outcome:
``tool-output-available`` / ``tool-output-error`` / ``tool-output-denied`` or
``tool-approval-request``; while a server tool runs, its progress is a ``tool-output-available`` with
``preliminary: true`` (the outcome replaces it). ``finishReason`` is ``tool-calls`` for a run that waits (not a failure) and
``stop`` for a completed one. A resumed run first emits the committed results of the calls it waited
on, *outside* any step (the client finds those parts anywhere in the continued message), and every
model step opens with ``start-step`` — without it ``useChat`` re-posts forever (§3.3).

Failure: open text/reasoning blocks are closed (``*-end``), a tool input still streaming becomes
``tool-input-error``, then ``error{errorText: "<CODE>: <message>"}`` and ``finish{finishReason:
"error"}``; nothing follows. A refusal before the run (no ``RunStarted``) is just ``error`` + ``finish``.

Stopped (``POST /v1/threads/{id}/stop``): open blocks close the same way, an open step gets its
``finish-step``, then ``abort`` (no ``reason``: 6.0.0-6.0.14 reject it); ``[DONE]`` follows.

Every chunk is in the ai@6.0.0 strict field set (``wire.py``): absent optional fields are omitted,
never null; ``input``/``output`` are always present. Pure: no I/O, no clock, no ids minted here
except the derived ``approvalId``.
"""

from __future__ import annotations

from typing import Any

from awaken.core import events as ev
from awaken.core.jsonbody import loads_bounded
from awaken.core.messages import Usage
from awaken.wires.aisdk.wire import approval_id
from awaken.wires.encoding import EncoderBase, EncoderMisuse, WireEvent

_FINISH_REASON = {"completed": "stop", "waiting": "tool-calls"}


def parse_json_or_text(content: str) -> Any:
    """A tool result as the client sees it: its JSON value, or the text itself when it is not JSON."""
    try:
        return loads_bounded(content)
    except ValueError:  # not JSON, or nested too deep to send back as JSON
        return content


def usage_metadata(usage: Usage, run_id: str | None = None) -> dict[str, Any]:
    """``messageMetadata`` for a run: its id and usage (live ``finish`` and history carry the same shape)."""
    out: dict[str, Any] = {"runId": run_id} if run_id else {}
    out["usage"] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                    "totalTokens": usage.total_tokens}
    return out


def state_part_id(run_id: str) -> str:
    """The id of a run's ``data-state`` part: one per run, so each state chunk replaces the last."""
    return f"state_{run_id}"


class AiSdkEncoder(EncoderBase):
    """One response stream.

    ``message_id`` is the id of the assistant message the client is continuing (the request's last
    message, when it is an assistant message); ``start.messageId`` reuses it so the client folds the
    stream into that message instead of showing a duplicate. Otherwise ``RunStarted.message_id``.
    """

    def __init__(self, message_id: str | None = None) -> None:
        super().__init__()
        self.continued_id = message_id
        self.started = False
        self.run_id = ""
        self.step_open = False
        self.open_text: set[str] = set()
        self.open_reasoning: set[str] = set()
        #: calls whose input is streaming (tool-input-start sent, input not yet complete): id -> name
        self.streaming_calls: dict[str, str] = {}
        #: calls whose tool part exists in the message this stream builds (or continues)
        self.known_calls: set[str] = set()

    # -- helpers ---------------------------------------------------------------------------------

    def _need_step(self, what: str) -> None:
        if not self.step_open:
            raise EncoderMisuse(f"{what} outside a step")

    def _need_closed_blocks(self, what: str) -> None:
        if self.open_text or self.open_reasoning:
            raise EncoderMisuse(f"{what} while a text or reasoning block is open")

    # -- lifecycle -------------------------------------------------------------------------------

    def on_run_started(self, e: ev.RunStarted) -> list[WireEvent]:
        if self.started:
            raise EncoderMisuse("a second RunStarted")
        if e.resumed and self.continued_id is None:
            # The committed results of a resumed run refer to tool parts of an earlier message; a
            # client that is not continuing that message would fail on them.
            raise EncoderMisuse("a resumed run needs the continued assistant message id")
        self.started = True
        self.run_id = e.run_id
        return [{"type": "start", "messageId": self.continued_id or e.message_id,
                 "messageMetadata": {"runId": e.run_id}}]

    def on_step_started(self, e: ev.StepStarted) -> list[WireEvent]:
        if not self.started:
            raise EncoderMisuse("StepStarted before RunStarted")
        if self.step_open:
            raise EncoderMisuse("StepStarted inside an open step")
        self.step_open = True
        return [{"type": "start-step"}]

    def on_step_finished(self, e: ev.StepFinished) -> list[WireEvent]:
        self._need_step("StepFinished")
        self._need_closed_blocks("StepFinished")
        if self.streaming_calls:
            raise EncoderMisuse("StepFinished while a tool input is streaming")
        self.step_open = False
        return [{"type": "finish-step"}]

    def on_run_finished(self, e: ev.RunFinished) -> list[WireEvent]:
        if not self.started:
            raise EncoderMisuse("RunFinished before RunStarted")
        if self.step_open:
            raise EncoderMisuse("RunFinished inside an open step")
        return [{"type": "finish", "finishReason": _FINISH_REASON[e.outcome],
                 "messageMetadata": usage_metadata(e.usage, e.run_id)}]

    def on_state_changed(self, e: ev.StateChanged) -> list[WireEvent]:
        if not self.started:
            raise EncoderMisuse("StateChanged before RunStarted")
        return [{"type": "data-state", "id": state_part_id(self.run_id), "data": e.state}]

    def _close_open(self, why: str) -> list[WireEvent]:
        out: list[WireEvent] = [{"type": "reasoning-end", "id": i} for i in sorted(self.open_reasoning)]
        out += [{"type": "text-end", "id": i} for i in sorted(self.open_text)]
        out += [{"type": "tool-input-error", "toolCallId": call_id, "toolName": name, "input": None,
                 "errorText": f"the run {why} before this call was complete"}
                for call_id, name in self.streaming_calls.items()]
        self.open_reasoning.clear()
        self.open_text.clear()
        self.streaming_calls.clear()
        return out

    def on_run_stopped(self, e: ev.RunStopped) -> list[WireEvent]:
        """A stop the user asked for: open blocks close, the open step finishes, then ``abort`` (without
        ``reason``, which clients before 6.0.15 reject). ``useChat`` ends ``ready`` with the partial parts."""
        if not self.started:
            raise EncoderMisuse("RunStopped before RunStarted")
        out = self._close_open("was stopped")
        if self.step_open:
            self.step_open = False
            out.append({"type": "finish-step"})
        out.append({"type": "abort"})
        return out

    def on_run_failed(self, e: ev.RunFailed) -> list[WireEvent]:
        out = self._close_open("failed")
        out.append({"type": "error", "errorText": f"{e.code}: {e.message}"})
        out.append({"type": "finish", "finishReason": "error"})
        return out

    # -- text and reasoning ----------------------------------------------------------------------

    def on_text_start(self, e: ev.TextStart) -> list[WireEvent]:
        self._need_step("TextStart")
        if e.message_id in self.open_text:
            raise EncoderMisuse(f"TextStart for open text {e.message_id}")
        self.open_text.add(e.message_id)
        return [{"type": "text-start", "id": e.message_id}]

    def on_text_delta(self, e: ev.TextDelta) -> list[WireEvent]:
        if e.message_id not in self.open_text:
            raise EncoderMisuse("TextDelta without an open text block")
        return [{"type": "text-delta", "id": e.message_id, "delta": e.delta}] if e.delta else []

    def on_text_end(self, e: ev.TextEnd) -> list[WireEvent]:
        if e.message_id not in self.open_text:
            raise EncoderMisuse("TextEnd without an open text block")
        self.open_text.discard(e.message_id)
        return [{"type": "text-end", "id": e.message_id}]

    def on_reasoning_start(self, e: ev.ReasoningStart) -> list[WireEvent]:
        self._need_step("ReasoningStart")
        if e.message_id in self.open_reasoning:
            raise EncoderMisuse(f"ReasoningStart for open reasoning {e.message_id}")
        self.open_reasoning.add(e.message_id)
        return [{"type": "reasoning-start", "id": e.message_id}]

    def on_reasoning_delta(self, e: ev.ReasoningDelta) -> list[WireEvent]:
        if e.message_id not in self.open_reasoning:
            raise EncoderMisuse("ReasoningDelta without open reasoning")
        return [{"type": "reasoning-delta", "id": e.message_id, "delta": e.delta}] if e.delta else []

    def on_reasoning_end(self, e: ev.ReasoningEnd) -> list[WireEvent]:
        if e.message_id not in self.open_reasoning:
            raise EncoderMisuse("ReasoningEnd without open reasoning")
        self.open_reasoning.discard(e.message_id)
        return [{"type": "reasoning-end", "id": e.message_id}]

    # -- tools -----------------------------------------------------------------------------------

    def on_tool_call_start(self, e: ev.ToolCallStart) -> list[WireEvent]:
        self._need_step("ToolCallStart")
        self._need_closed_blocks("ToolCallStart")
        if e.tool_call_id in self.known_calls:
            raise EncoderMisuse(f"ToolCallStart for known call {e.tool_call_id}")
        self.streaming_calls[e.tool_call_id] = e.name
        self.known_calls.add(e.tool_call_id)
        return [{"type": "tool-input-start", "toolCallId": e.tool_call_id, "toolName": e.name}]

    def on_tool_call_args(self, e: ev.ToolCallArgs) -> list[WireEvent]:
        if e.tool_call_id not in self.streaming_calls:
            raise EncoderMisuse(f"ToolCallArgs for call {e.tool_call_id}, which is not streaming")
        if not e.delta:
            return []
        return [{"type": "tool-input-delta", "toolCallId": e.tool_call_id, "inputTextDelta": e.delta}]

    def on_tool_call_end(self, e: ev.ToolCallEnd) -> list[WireEvent]:
        self._need_step("ToolCallEnd")
        if e.tool_call_id not in self.streaming_calls:
            raise EncoderMisuse(f"ToolCallEnd for call {e.tool_call_id}, which is not streaming")
        del self.streaming_calls[e.tool_call_id]
        try:
            arguments = loads_bounded(e.arguments)
        except ValueError:
            return [{"type": "tool-input-error", "toolCallId": e.tool_call_id, "toolName": e.name,
                     "input": e.arguments, "errorText": "the model's arguments for this call are not valid JSON"}]
        return [{"type": "tool-input-available", "toolCallId": e.tool_call_id, "toolName": e.name,
                 "input": arguments}]

    def on_tool_approval_requested(self, e: ev.ToolApprovalRequested) -> list[WireEvent]:
        if e.tool_call_id not in self.known_calls or e.tool_call_id in self.streaming_calls:
            raise EncoderMisuse(f"approval requested for call {e.tool_call_id} before its input is complete")
        return [{"type": "tool-approval-request", "approvalId": approval_id(e.tool_call_id),
                 "toolCallId": e.tool_call_id}]

    def on_tool_result(self, e: ev.ToolResult) -> list[WireEvent]:
        if not self.started:
            raise EncoderMisuse("ToolResult before RunStarted")
        if e.tool_call_id in self.streaming_calls:
            raise EncoderMisuse(f"ToolResult for call {e.tool_call_id} before its input is complete")
        if e.tool_call_id not in self.known_calls and self.continued_id is None:
            raise EncoderMisuse(f"ToolResult for call {e.tool_call_id}, which is not in this message")
        self.known_calls.add(e.tool_call_id)
        return [tool_outcome_chunk(e.tool_call_id, e.content, e.status, e.approval)]


    def on_tool_progress(self, e: ev.ToolProgress) -> list[WireEvent]:
        """A server tool's progress: a preliminary ``tool-output-available`` (the committed outcome
        replaces it). Best-effort: progress for a call this stream does not show is dropped."""
        if e.tool_call_id in self.streaming_calls or (e.tool_call_id not in self.known_calls
                                                      and self.continued_id is None):
            return []
        return [{"type": "tool-output-available", "toolCallId": e.tool_call_id, "output": e.data,
                 "preliminary": True}]

def tool_outcome_chunk(tool_call_id: str, content: str, status: str, approval: str | None) -> WireEvent:
    """The ``tool-output-*`` chunk of a committed outcome.

    A person's denial is ``tool-output-denied``; a denial by policy (no person asked) is an
    ``tool-output-error`` carrying the reason, since the client has no approval to attach it to.
    """
    if status == "ok":
        return {"type": "tool-output-available", "toolCallId": tool_call_id, "output": parse_json_or_text(content)}
    if status == "denied" and approval == "denied":
        return {"type": "tool-output-denied", "toolCallId": tool_call_id}
    return {"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": content}
