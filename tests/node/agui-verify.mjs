// Offline check of recorded AG-UI events with the real client (@ag-ui/client 1.0.0).
//
//   node agui-verify.mjs run1.jsonl [run2.jsonl …]     (no file or "-": read stdin)
//
// Each file holds one run: one AG-UI event JSON per line. Per file, three checks:
//   schema:   every event through @ag-ui/core's zod EventSchemas (safeParse)
//   pipeline: from(events) through the client's own operators, in the order HttpAgent uses them:
//             enforceEvents() → transformChunks() → verifyEvents()
//   agent:    a full AbstractAgent.runAgent() replaying the events (middleware, compatibility
//             boundary, enforcement, verification, and the default apply reducers)
// Errors AND console.warn/console.error output (stripped fields, dropped events, reducer
// complaints) are collected. runAgent() resolves even without a terminal event, so the terminal
// event is asserted here. Prints a JSON summary; exits 1 on any error or warning.

import { readFileSync } from "node:fs";
import { from, lastValueFrom, toArray } from "rxjs";
import { AbstractAgent, enforceEvents, transformChunks, verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

class ReplayAgent extends AbstractAgent {
  constructor(events) {
    super({ threadId: events.find((e) => e.threadId)?.threadId });
    this.events = events;
  }
  run() {
    return from(this.events.map((event) => structuredClone(event)));
  }
}

function describe(error) {
  return error instanceof Error ? error.message : String(error);
}

function captureConsole(sink) {
  const original = { warn: console.warn, error: console.error };
  const record =
    (level) =>
    (...args) =>
      sink.push(`${level}: ${args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ")}`);
  console.warn = record("warn");
  console.error = record("error");
  return () => Object.assign(console, original);
}

function parseLines(text, errors) {
  const events = [];
  text.split("\n").forEach((line, index) => {
    if (!line.trim()) return;
    try {
      events.push(JSON.parse(line));
    } catch (error) {
      errors.push(`line ${index + 1}: not JSON (${describe(error)})`);
    }
  });
  return events;
}

async function verify(name, text) {
  const errors = [];
  const warnings = [];
  const restore = captureConsole(warnings);
  const result = { file: name, events: 0, passed: 0, terminal: null, outcome: null };
  try {
    const events = parseLines(text, errors);
    result.events = events.length;

    events.forEach((event, index) => {
      const parsed = EventSchemas.safeParse(event);
      if (!parsed.success) {
        const issues = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
        errors.push(`schema: event ${index + 1} (${event?.type}): ${issues.join("; ")}`);
      }
    });

    try {
      const passed = await lastValueFrom(
        from(events.map((event) => structuredClone(event))).pipe(
          enforceEvents(),
          transformChunks(),
          verifyEvents(),
          toArray(),
        ),
      );
      result.passed = passed.length;
      if (passed.length !== events.length) {
        errors.push(`pipeline: ${events.length - passed.length} event(s) dropped`);
      }
    } catch (error) {
      errors.push(`pipeline: ${describe(error)}`);
    }

    const last = events.at(-1);
    result.terminal = last && TERMINAL.has(last.type) ? last.type : null;
    if (!result.terminal) errors.push("no terminal event (RUN_FINISHED or RUN_ERROR) at the end");
    const terminals = events.filter((e) => TERMINAL.has(e.type)).length;
    if (terminals > 1) errors.push(`${terminals} terminal events in one run`);

    const agent = new ReplayAgent(events);
    let seenFinished = false;
    const subscriber = {
      onRunFailed: ({ error }) => {
        errors.push(`agent: run failed: ${describe(error)}`);
      },
      onRunFinishedEvent: (params) => {
        seenFinished = true;
        result.outcome = params.outcome;
        if (params.outcome === "success" && params.pendingToolCallIds.length) {
          result.pendingToolCallIds = params.pendingToolCallIds;
        }
        if (params.outcome === "interrupt") result.interrupts = params.interrupts.length;
      },
      onRunErrorEvent: ({ event }) => {
        result.outcome = "error";
        result.error = { message: event.message, code: event.code };
      },
    };
    try {
      await agent.runAgent({ runId: events.find((e) => e.runId)?.runId }, subscriber);
    } catch (error) {
      // runAgent() rejects after onRunFailed when the pipeline throws; the cause is recorded.
      errors.push(`agent: runAgent() rejected: ${describe(error).split("\n")[0]}`);
    }
    if (result.terminal === "RUN_FINISHED" && !seenFinished) {
      errors.push("agent: RUN_FINISHED never reached the subscriber");
    }
    result.messages = agent.messages.map((m) => m.role);
  } catch (error) {
    errors.push(`verifier: ${describe(error)}`);
  } finally {
    restore();
  }
  return { ...result, ok: errors.length === 0 && warnings.length === 0, errors, warnings };
}

async function main() {
  const args = process.argv.slice(2);
  const inputs =
    args.length === 0 || (args.length === 1 && args[0] === "-")
      ? [["<stdin>", readFileSync(0, "utf8")]]
      : args.map((file) => [file, readFileSync(file, "utf8")]);
  const results = [];
  for (const [name, text] of inputs) results.push(await verify(name, text));
  const ok = results.every((r) => r.ok);
  process.stdout.write(JSON.stringify({ ok, results }, null, 1) + "\n");
  process.exitCode = ok ? 0 : 1;
}

await main();
