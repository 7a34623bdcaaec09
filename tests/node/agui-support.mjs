// What the AG-UI scripts share: an HttpAgent run that records every event, the terminal one,
// the agent's messages and every error or console warning.

import { HttpAgent } from "@ag-ui/client";

export const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

export function newAgent(base, threadId) {
  return new HttpAgent({ url: `${base}/agui`, threadId });
}

function captureConsole(sink) {
  const original = { warn: console.warn, error: console.error };
  console.warn = (...args) => sink.push(`warn: ${args.map(String).join(" ")}`);
  console.error = (...args) => sink.push(`error: ${args.map(String).join(" ")}`);
  return () => Object.assign(console, original);
}

export async function run(agent, params, { onEvent } = {}) {
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
    events,
    terminal,
    failed,
    problems,
    messages: structuredClone(agent.messages),
  };
}

let counter = 0;
export const runId = (name) => `${name}-${process.pid}-${++counter}`;

export function user(text) {
  return { id: `u-${++counter}`, role: "user", content: text };
}

// Runs the scenarios named on the command line (all when none) and prints {name: result}.
export async function main(scenarios, wanted) {
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
}
