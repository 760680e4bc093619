// A CopilotKit app on Awaken's CopilotKit runtime (/v1/copilotkit), no Node runtime in between.
//
//   index.html?server=http://127.0.0.1:8000&thread=<id>
//
// * <CopilotKitProvider runtimeUrl=".../v1/copilotkit"> and <CopilotChat threadId=...>: the chat connects
//   to the thread on load, so a reload shows its history (the thread id is kept in localStorage);
// * `pick_color` is a frontend tool (useFrontendTool): the agent calls it, the page answers;
// * the server's `calculator` asks a person first (`permission = "ask"`): useHumanInTheLoop with the same
//   name shows Approve / Deny and answers {approved: true} or {approved: false, reason}.
import {
  CopilotChat,
  CopilotKitProvider,
  useAgent,
  useFrontendTool,
  useHumanInTheLoop,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { z } from "zod";

const params = new URLSearchParams(location.search);
const server = params.get("server") ?? "http://127.0.0.1:8000";
const agentId = params.get("agent") ?? "assistant";
const thread = params.get("thread") ?? localStorage.getItem("awaken-thread") ?? `ck-${crypto.randomUUID()}`;
localStorage.setItem("awaken-thread", thread);

function ToolCall({ name, args, result, children }: { name: string; args: unknown; result?: string; children?: any }) {
  return (
    <div className="tool-call" data-tool={name}>
      <code>{`${name}(${JSON.stringify(args ?? {})})`}</code>
      {result !== undefined ? <span className="output">{` → ${result}`}</span> : null}
      {children}
    </div>
  );
}

function Tools({ color }: { color: string }) {
  useFrontendTool({
    name: "pick_color",
    description: "Ask the page which color the user picked.",
    parameters: z.object({ question: z.string() }),
    handler: async () => ({ color }),
    render: ({ name, args, result }) => <ToolCall name={name} args={args} result={result} />,
  }, [color]);
  useHumanInTheLoop({
    name: "calculator",
    description: "Evaluate an arithmetic expression, once the user allows it.",
    parameters: z.object({ expression: z.string() }),
    render: ({ name, status, args, result, respond }) => (
      <ToolCall name={name} args={args} result={result}>
        {status === "executing" && respond ? (
          <>
            <button className="approve" onClick={() => void respond({ approved: true })}>Approve</button>
            <button className="deny" onClick={() => void respond({ approved: false, reason: "not now" })}>Deny</button>
          </>
        ) : null}
      </ToolCall>
    ),
  });
  return null;
}

/** The agent's messages and run status on `window.__copilot`, for the tests. */
function Probe() {
  const { agent, isReady } = useAgent({ agentId });
  const [, bump] = useState(0);
  useEffect(() => {
    const subscription = agent.subscribe({
      onMessagesChanged: () => bump((n) => n + 1),
      onRunInitialized: () => bump((n) => n + 1),
      onRunFinalized: () => bump((n) => n + 1),
    });
    return () => subscription.unsubscribe();
  }, [agent]);
  (window as any).__copilot = JSON.parse(JSON.stringify({ ready: isReady, running: agent.isRunning, messages: agent.messages }));
  return null;
}

function App() {
  const [color, setColor] = useState("teal");
  return (
    <CopilotKitProvider runtimeUrl={`${server}/v1/copilotkit`} showDevConsole={false} enableInspector={false}>
      <h1>CopilotKit · {agentId}</h1>
      <label>Favorite color <input id="color" value={color} onChange={(e) => setColor(e.target.value)} /></label>
      <Tools color={color} />
      <Probe />
      <div id="chat"><CopilotChat agentId={agentId} threadId={thread} /></div>
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")!).render(<App />);
