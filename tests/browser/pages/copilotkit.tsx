// A CopilotKit app (@copilotkit/react-core v2) on another origin than the server, the documented way:
//
//   copilotkit.html?server=…&thread=…&agent=…&mode=runtime   <CopilotKitProvider runtimeUrl=".../v1/copilotkit">
//   copilotkit.html?server=…&thread=…&agent=…&mode=direct    agents__unsafe_dev_only: an HttpAgent for
//                                                            /v1/ag-ui/agents/{agent}
//
// `CopilotChat` (with the thread id, so it connects to the thread on load: through the runtime a reload
// shows it; the direct HttpAgent answers connect from the history route, see ThreadHttpAgent) renders
// the conversation; tools are declared with the hooks: `useFrontendTool` (`pick_color`, answered by the
// page with the color in #color), `useHumanInTheLoop` named `calculator` (Approve / Deny buttons:
// respond({approved: true}) or respond({approved: false, reason})), `useAgentContext` (the favorite
// color) and the agent's shared state, which the page writes with `agent.setState` (#set-state).
// Every tool call is rendered with data-tool / data-status / data-call attributes for the tests.
import {
  type BaseEvent,
  CopilotChat,
  CopilotKitProvider,
  EventType,
  HttpAgent,
  type RunAgentInput,
  useAgent,
  useAgentContext,
  useFrontendTool,
  useHumanInTheLoop,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { Observable } from "rxjs";
import { z } from "zod";

import { agentId, authHeaders, params, publish, readHistory, server, thread } from "./common";

const mode = params.get("mode") ?? "runtime";

/**
 * The direct agent: AG-UI's HttpAgent has no `connect` (it throws "not implemented", so CopilotKit's
 * connect on load, which first clears the agent, would leave a reloaded page empty). This one answers
 * `connect` with the thread's committed history, read from the AG-UI history route.
 */
class ThreadHttpAgent extends HttpAgent {
  connect(input: RunAgentInput): Observable<BaseEvent> {
    return new Observable<BaseEvent>((subscriber) => {
      readHistory(`/v1/ag-ui/threads/${encodeURIComponent(input.threadId)}/messages`).then(({ items }) => {
        if (items.length) {
          const run = { threadId: input.threadId, runId: input.runId };
          subscriber.next({ type: EventType.RUN_STARTED, ...run } as BaseEvent);
          subscriber.next({ type: EventType.MESSAGES_SNAPSHOT, messages: items } as BaseEvent);
          subscriber.next({ type: EventType.RUN_FINISHED, ...run } as BaseEvent);
        }
        subscriber.complete();
      }, (err) => subscriber.error(err));
    });
  }
}

const errors: string[] = [];

function ToolView(props: { name: string; status: string; args: any; result?: string; children?: any }) {
  return (
    <div className="ck-tool" data-tool={props.name} data-status={props.status}>
      <code>{`${props.name}(${JSON.stringify(props.args ?? {})})`}</code>
      {props.result !== undefined ? <span className="output">{` → ${props.result}`}</span> : null}
      {props.children}
    </div>
  );
}

function Tools({ color }: { color: string }) {
  useFrontendTool({
    name: "pick_color",
    description: "Ask the page which color to use.",
    parameters: z.object({ question: z.string() }),
    handler: async ({ question }) => ({ question, color }),
    render: ({ name, status, args, result }) => <ToolView name={name} status={status} args={args} result={result} />,
  }, [color]);
  useHumanInTheLoop({
    name: "calculator",
    description: "Evaluate an arithmetic expression, once a person allows it.",
    parameters: z.object({ expression: z.string() }),
    render: ({ name, status, args, result, respond }) => (
      <ToolView name={name} status={status} args={args} result={result}>
        {status === "executing" && respond ? (
          <span className="gate" style={{ display: "inline-flex", gap: 8, marginLeft: 8 }}>
            <button className="approve" onClick={() => void respond({ approved: true })}>Approve</button>
            <button className="deny" onClick={() => void respond({ approved: false, reason: "the user said no" })}>
              Deny
            </button>
          </span>
        ) : null}
      </ToolView>
    ),
  });
  useAgentContext({ description: "favorite color", value: color });
  return null;
}

/** Publishes the agent's messages, state and run status for the tests; writes the shared state. */
function Probe({ color }: { color: string }) {
  const { agent, isReady } = useAgent({ agentId });
  const [, bump] = useState(0);
  useEffect(() => {
    const subscription = agent.subscribe({
      onMessagesChanged: () => bump((n) => n + 1),
      onStateChanged: () => bump((n) => n + 1),
      onRunInitialized: () => bump((n) => n + 1),
      onRunFinalized: () => bump((n) => n + 1),
      onRunFailed: ({ error }) => {
        errors.push(String(error));
        bump((n) => n + 1);
      },
    });
    return () => subscription.unsubscribe();
  }, [agent]);

  publish({
    page: "copilotkit", mode, thread, agent: agentId, ready: isReady, running: agent.isRunning,
    threadId: agent.threadId, messages: agent.messages, state: agent.state, errors,
  });
  return (
    <div id="probe">
      <button id="set-state" onClick={() => agent.setState({ ...(agent.state ?? {}), color })}>Share color</button>
      <span id="status" data-running={String(agent.isRunning)}>{agent.isRunning ? "running" : "ready"}</span>
    </div>
  );
}

function App() {
  const [color, setColor] = useState("teal");
  const agents = useMemo(() => mode === "direct" ? {
    [agentId]: new ThreadHttpAgent({ url: `${server}/v1/ag-ui/agents/${encodeURIComponent(agentId)}`, headers: authHeaders }),
  } : undefined, []);
  const renderAny = useMemo(() => [{
    name: "*",
    render: ({ name, status, args, result }: any) => <ToolView name={name} status={status} args={args} result={result} />,
  }], []);
  return (
    <CopilotKitProvider
      {...(mode === "direct" ? { agents__unsafe_dev_only: agents } : { runtimeUrl: `${server}/v1/copilotkit` })}
      headers={authHeaders}
      renderToolCalls={renderAny}
      showDevConsole={false}
      enableInspector={false}
      onError={({ error, code }) => {
        errors.push(`${code}: ${error.message}`);
      }}
    >
      <h1>{`CopilotKit (${mode}) · agent ${agentId} · thread ${thread}`}</h1>
      <label>
        Color <input id="color" value={color} onChange={(e) => setColor(e.target.value)} />
      </label>
      <Tools color={color} />
      <Probe color={color} />
      <div style={{ height: 520, border: "1px solid #ddd" }}>
        <CopilotChat agentId={agentId} threadId={thread} />
      </div>
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")!).render(<App />);
