// Drives a plugged loop behind a live loopgate with the real @ag-ui/client HttpAgent.
//
//   node agui-plug.mjs http://127.0.0.1:PORT SCENARIO… [--prompt TEXT] [--decision allow_once]
//                      [--attach RUN_ID] [--after SEQ]
//
// Prints {scenario: summary} (see agui-support.mjs); the Python side asserts on it.

import { main, newAgent, run, runId, user } from "./agui-support.mjs";

const [base, ...rest] = process.argv.slice(2);
const option = (name) => {
  const i = rest.indexOf(`--${name}`);
  return i >= 0 ? rest.splice(i, 2)[1] : undefined;
};
const decision = option("decision") ?? "allow_once";
const attach = option("attach");
const after = Number(option("after") ?? 0);
const prompt = option("prompt");

async function once(prompt, name) {
  const agent = newAgent(base, `t-${name}-${process.pid}`);
  agent.addMessage(user(prompt));
  return run(agent, { runId: runId(name) });
}

async function post(path, body) {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return response.json();
}

const scenarios = {
  text: () => once(prompt ?? "hello from agui", "text"),
  tool: () => once("tool please", "tool"),

  // The loop asks before a tool: the stream ends with an interrupt, and the same agent
  // resumes with the answer; the run goes on where it stopped.
  async approval() {
    const agent = newAgent(base, `t-approval-${process.pid}`);
    agent.addMessage(user("ask before writing"));
    const first = await run(agent, { runId: runId("approval") });
    const interrupts = first.terminal?.outcome?.interrupts ?? [];
    const resume = interrupts.map((i) => ({
      interruptId: i.id,
      status: "resolved",
      payload: { decision },
    }));
    const second = await run(agent, { runId: runId("approval"), resume });
    return { first, second, interrupts };
  },

  async steer() {
    const agent = newAgent(base, `t-steer-${process.pid}`);
    agent.addMessage(user("slow words"));
    const id = runId("steer");
    let steered = false;
    return run(agent, { runId: id }, {
      onEvent: async (event) => {
        if (event.type === "TEXT_MESSAGE_CONTENT" && !steered) {
          steered = true;
          await post(`/v1/runs/${id}/steer`, { content: "go left" });
        }
        if (event.type === "CUSTOM" && event.name === "loopgate.steer") {
          await post(`/v1/runs/${id}/cancel`, {});
        }
      },
    });
  },

  // Watch a run someone else started (an ingested one included).
  async attach() {
    const agent = newAgent(base, `t-attach-${process.pid}`);
    return run(agent, {
      runId: attach,
      forwardedProps: { loopgate: { attach: true, after } },
    });
  },
};

await main(scenarios, rest);
