"""The history projections of an answer cut off by its run's early end (sans-IO): AG-UI gives the assistant
message ``metadata: {"incomplete": reason}``, also when only reasoning was streamed; the AI SDK gives the run's
``UIMessage`` ``metadata.incomplete`` beside its run id and usage; a whole answer carries neither."""

from __future__ import annotations

from awaken.core.messages import IncompletePart, Message, ReasoningPart, TextPart, Usage
from awaken.wires.agui.history import project_history as agui_history
from awaken.wires.aisdk.history import project_history as aisdk_history

ASKED = Message("u1", "user", (TextPart("tell me"),), "r1", 1)
CUT = Message("m1", "assistant", (ReasoningPart("rs1", "thinking "), TextPart("Once upon"), IncompletePart("stopped")),
              "r1", 2)
THINKING_ONLY = Message("m2", "assistant", (ReasoningPart("rs2", "hmm "), IncompletePart("client_gone")), "r2", 4)
WHOLE = Message("m3", "assistant", (TextPart("Done."),), "r3", 6)


def test_agui_marks_the_cut_off_message_and_nothing_else():
    assert agui_history([ASKED, CUT, THINKING_ONLY, WHOLE]) == [
        {"id": "u1", "role": "user", "content": "tell me"},
        {"id": "rs1", "role": "reasoning", "content": "thinking "},
        {"id": "m1", "role": "assistant", "content": "Once upon", "metadata": {"incomplete": "stopped"}},
        {"id": "rs2", "role": "reasoning", "content": "hmm "},
        {"id": "m2", "role": "assistant", "metadata": {"incomplete": "client_gone"}},
        {"id": "m3", "role": "assistant", "content": "Done."},
    ]


def test_aisdk_marks_the_runs_message_beside_its_usage():
    usage = {"r1": Usage(3, 2)}
    assert aisdk_history([ASKED, CUT], usage=usage)[1] == {
        "id": "m1", "role": "assistant",
        "metadata": {"runId": "r1", "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
                     "incomplete": "stopped"},
        "parts": [{"type": "step-start"}, {"type": "reasoning", "id": "rs1", "text": "thinking ", "state": "done"},
                  {"type": "text", "text": "Once upon", "state": "done"}],
    }
    assert aisdk_history([THINKING_ONLY])[0]["metadata"] == {"incomplete": "client_gone"}
    assert "metadata" not in aisdk_history([WHOLE])[0]
