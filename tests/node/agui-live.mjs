// Drives a live loopgate server with the real @ag-ui/client HttpAgent.
//
//   node agui-live.mjs http://127.0.0.1:PORT
//
// Runs every scenario and prints one JSON object: {scenario: summary}. A summary records the
// event types, the terminal event (asserted by the Python side: runAgent() resolves even when
// the stream ends without one), the agent's messages, and every error or console warning.

import { main, newAgent as agentAt, run, runId, user } from "./agui-support.mjs";

const base = process.argv[2];
const newAgent = (threadId) => agentAt(base, threadId);

const scenarios = {
  async text() {
    const agent = newAgent("t-text");
    agent.addMessage(user("plain hello there"));
    return run(agent, { runId: runId("text") });
  },

  async reasoning() {
    const agent = newAgent("t-reasoning");
    agent.addMessage(user("think about the sky"));
    return run(agent, { runId: runId("reasoning") });
  },

  async toolRound() {
    const agent = newAgent("t-tools");
    agent.addMessage(user("What time is it, and what is 6 * 7?"));
    return run(agent, { runId: runId("tools") });
  },

  async frontendTool() {
    const agent = newAgent("t-frontend");
    const tools = [
      {
        name: "pick_color",
        description: "Ask the user's browser for a colour",
        parameters: { type: "object", properties: { topic: { type: "string" } } },
      },
    ];
    agent.addMessage(user("client tool: choose a colour"));
    const first = await run(agent, { runId: runId("frontend"), tools });
    const pending = first.terminal?.outcome?.pendingToolCallIds ?? [];
    for (const id of pending) {
      agent.addMessage({ id: `tool-${id}`, role: "tool", toolCallId: id, content: "teal" });
    }
    const second = await run(agent, { runId: runId("frontend"), tools });
    return { first, second, pending };
  },

  async interruptResume() {
    const agent = newAgent("t-interrupt");
    agent.addMessage(user("ask user about my trip"));
    const first = await run(agent, { runId: runId("interrupt") });
    const interrupts = first.terminal?.outcome?.interrupts ?? [];
    const resume = interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: "option B" }));
    const second = await run(agent, { runId: runId("interrupt"), resume });
    return { first, second, interrupts };
  },

  async cancelled() {
    const agent = newAgent("t-cancel");
    agent.addMessage(user("tell me a long story"));
    const id = runId("cancel");
    let asked = false;
    const result = await run(agent, { runId: id }, {
      onEvent: async (event) => {
        if (event.type === "TEXT_MESSAGE_CONTENT" && !asked) {
          asked = true;
          await fetch(`${base}/v1/runs/${id}/cancel`, { method: "POST" });
        }
      },
    });
    return result;
  },

  async aborted() {
    // The browser goes away mid-run: the server must cancel the run.
    const agent = newAgent("t-abort");
    agent.addMessage(user("tell me another long story"));
    const id = runId("abort");
    const result = await run(agent, { runId: id }, {
      onEvent: async (event) => {
        if (event.type === "TEXT_MESSAGE_CONTENT") agent.abortRun();
      },
    });
    let status = null;
    for (let i = 0; i < 100 && status === null; i++) {
      const info = await (await fetch(`${base}/v1/runs/${id}`)).json();
      status = info.status;
      if (status === null) await new Promise((r) => setTimeout(r, 50));
    }
    return { ...result, serverStatus: status };
  },
};

await main(scenarios, process.argv.slice(3));
