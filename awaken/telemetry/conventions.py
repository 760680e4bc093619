"""Every span name, span kind and attribute name the server's traces use, in one place.

The OpenTelemetry GenAI semantic conventions (``gen_ai.*``) are at Development status: a rename in a
later release is one edit here. Names of our own (the run id, its outcome, the gate, the ledger
commits) are under ``awaken.*``, as the conventions ask of names they do not define.

A run's trace::

    invoke_agent <agent>                 one per execution of a run (a resumed run has a second one)
    ├── awaken.admission                 the claim, the thread read, the request's checks
    ├── awaken.gate <tool>               a resume only: the wait at a permission gate, from the
    │                                    committed ``waiting`` to the decision
    ├── execute_tool <tool>              a resume only: a decided call (and a client tool's answer)
    ├── awaken.commit <status>           every ledger commit of the run (``start``: its first write)
    └── awaken.step <n>                  one model step
        ├── chat <model>                 the model call
        ├── execute_tool <tool>          each tool call of the step
        └── awaken.commit <status>
"""

from __future__ import annotations

#: the tracer's instrumentation scope
SCOPE = "awaken"

# -- span names (the GenAI ones are ``<operation> <target>``) ------------------------------------

OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
SPAN_ADMISSION = "awaken.admission"
SPAN_STEP = "awaken.step"
SPAN_GATE = "awaken.gate"
SPAN_COMMIT = "awaken.commit"

#: the timeline's kind of each span (what the console draws it as), by the first word of its name
KINDS = {OP_INVOKE_AGENT: "run", OP_CHAT: "model", OP_EXECUTE_TOOL: "tool", SPAN_ADMISSION: "admission",
         SPAN_STEP: "step", SPAN_GATE: "gate", SPAN_COMMIT: "commit"}

# -- GenAI attributes --------------------------------------------------------------------------

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_DESCRIPTION = "gen_ai.agent.description"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
#: opt-in content (``[telemetry] capture_content``)
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
#: the general convention's failure class (a failed span also gets status ERROR)
ERROR_TYPE = "error.type"

#: ``gen_ai.tool.type`` of every tool the server knows: a function the model calls
TOOL_TYPE_FUNCTION = "function"
#: ``gen_ai.response.finish_reasons`` of a step that ended with tool calls, and of one that answered
FINISH_TOOL_CALLS = "tool_calls"
FINISH_STOP = "stop"

# -- our own attributes ------------------------------------------------------------------------

RUN_ID = "awaken.run.id"
#: the status the run's execution ended in: completed, waiting, failed, interrupted
RUN_STATUS = "awaken.run.status"
#: why an interrupted run stopped (a ``Cause`` value)
RUN_CAUSE = "awaken.run.cause"
#: whether the execution continued a waiting run (a resume)
RUN_RESUMED = "awaken.run.resumed"
#: the step's number in the run (counting across resumes)
STEP_NUMBER = "awaken.step.number"
#: where a tool runs: ``server`` (built-ins, plugins), ``mcp`` or ``client`` (the browser)
TOOL_KIND = "awaken.tool.kind"
#: the tool result's status: ok, error, denied
TOOL_STATUS = "awaken.tool.status"
#: the gate's decision: ``allow``/``deny`` (the agent's policy), ``approve``/``deny`` (a person)
GATE_DECISION = "awaken.gate.decision"
#: who decided: ``policy``, or the subject of the principal whose request carried the decision
GATE_DECIDED_BY = "awaken.gate.decided_by"
#: what a commit moved the run to (``start``: the run's first write) and how many messages it wrote
COMMIT_STATUS = "awaken.commit.status"
COMMIT_MESSAGES = "awaken.commit.messages"
#: the ledger backend (its class)
LEDGER_BACKEND = "awaken.ledger.backend"

#: ``GATE_DECIDED_BY`` for a decision the agent's configuration made
BY_POLICY = "policy"

#: the attributes the console's timeline shows, with the short label it shows them under
TIMELINE_ATTRIBUTES = {
    GEN_AI_REQUEST_MODEL: "model",
    GEN_AI_PROVIDER_NAME: "provider",
    GEN_AI_USAGE_INPUT_TOKENS: "inputTokens",
    GEN_AI_USAGE_OUTPUT_TOKENS: "outputTokens",
    GEN_AI_RESPONSE_FINISH_REASONS: "finishReasons",
    GEN_AI_TOOL_NAME: "tool",
    GEN_AI_TOOL_CALL_ID: "toolCallId",
    TOOL_KIND: "toolKind",
    TOOL_STATUS: "toolStatus",
    GATE_DECISION: "decision",
    GATE_DECIDED_BY: "decidedBy",
    COMMIT_STATUS: "commitStatus",
    COMMIT_MESSAGES: "messages",
    STEP_NUMBER: "step",
    RUN_STATUS: "status",
    RUN_CAUSE: "cause",
    RUN_RESUMED: "resumed",
    ERROR_TYPE: "error",
}
