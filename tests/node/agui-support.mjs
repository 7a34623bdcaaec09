// What the AG-UI scripts share: an HttpAgent, a SocketAgent (the WebSocket binding), and a run
// of either that records every event, the terminal one, the agent's messages and every error or
// console warning.

import { AbstractAgent, HttpAgent } from "@ag-ui/client";
import { Observable } from "rxjs";
import WebSocket from "ws";

export const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

export function newAgent(base, threadId) {
  return new HttpAgent({ url: `${base}/agui`, threadId });
}

// AG-UI over a WebSocket (/agui/ws, docs/agui.md) as an AbstractAgent, as the console drives
// it: one socket per run, the input as its first frame (or `frame` instead: a {"type":
// "resume"} frame). The client's own pipeline verifies and applies what comes.
export class SocketAgent extends AbstractAgent {
  constructor({ url, frame, ...rest }) {
    super(rest);
    this.url = url;
    this.frame = frame;
  }

  run(input) {
    return new Observable((subscriber) => {
      const socket = new WebSocket(this.url);
      let ended = false;
      socket.on("open", () => socket.send(JSON.stringify(this.frame ?? input)));
      socket.on("message", (data) => {
        const event = JSON.parse(String(data));
        subscriber.next(event);
        if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") {
          ended = true;
          subscriber.complete();
          socket.close(1000);
        }
      });
      socket.on("unexpected-response", (_request, response) => {
        ended = true;
        subscriber.error(new Error(`upgrade refused: HTTP ${response.statusCode}`));
      });
      socket.on("error", (error) => {
        if (!ended) subscriber.error(error);
      });
      socket.on("close", (code) => {
        if (!ended) subscriber.error(new Error(`the socket closed (${code}) before the run's end`));
      });
      return () => {
        ended = true;
        if (socket.readyState <= WebSocket.OPEN) socket.close(1000);
      };
    });
  }
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
