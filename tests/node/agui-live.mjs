// Drives a live loopgate server with the real @ag-ui/client HttpAgent.
//
//   node agui-live.mjs http://127.0.0.1:PORT
//
// Runs every scenario and prints one JSON object: {scenario: summary}. A summary records the
// event types, the terminal event (asserted by the Python side: runAgent() resolves even when
// the stream ends without one), the agent's messages, and every error or console warning.

import { HttpAgent } from "@ag-ui/client";

const base = process.argv[2];
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

function newAgent(threadId) {
  return new HttpAgent({ url: `${base}/agui`, threadId });
}

function captureConsole(sink) {
  const original = { warn: console.warn, error: console.error };
  console.warn = (...args) => sink.push(`warn: ${args.map(String).join(" ")}`);
  console.error = (...args) => sink.push(`error: ${args.map(String).join(" ")}`);
  return () => Object.assign(console, original);
}

async function run(agent, params, { onEvent } = {}) {
  const events = [];
  const problems = [];
  const restore = captureConsole(problems);
  let failed = null;
  try {
    await agent.runAgent(params, {
      onEvent: async ({ event }) => {
        events.push(event);
        if (onEvent) await onEvent(event);
      },
      onRunFailed: ({ error }) => {
        failed = String(error?.message ?? error);
      },
    });
  } catch (error) {
    failed = String(error?.message ?? error);
  } finally {
    restore();
  }
  const terminal = events.filter((e) => TERMINAL.has(e.type)).at(-1) ?? null;
  return {
    types: events.map((e) => e.type),
    terminal,
    failed,
    problems,
    messages: structuredClone(agent.messages),
  };
}

let counter = 0;
const runId = (name) => `${name}-${process.pid}-${++counter}`;

function user(text) {
  return { id: `u-${++counter}`, role: "user", content: text };
}

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

const wanted = process.argv.slice(3);
const out = {};
for (const [name, scenario] of Object.entries(scenarios)) {
  if (wanted.length && !wanted.includes(name)) continue;
  try {
    out[name] = await scenario();
  } catch (error) {
    out[name] = { crashed: String(error?.stack ?? error) };
  }
}
process.stdout.write(JSON.stringify(out));
