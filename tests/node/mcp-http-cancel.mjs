// The official MCP TypeScript SDK's client over streamable HTTP cancels a `run` call the way
// its users do: an AbortSignal on callTool, aborted once the run is waiting in its slow tool.
// Usage: node mcp-http-cancel.mjs CALL_URL [CANCEL_URL]
// CANCEL_URL (another gateway of the same fleet) gets every request after the call's own: the
// SDK then POSTs the cancellation there. Prints a JSON summary {ok, runId, errors, clientErrors}
// once the cancellation has been answered, then holds the connection (the SDK keeps the
// aborted call's stream open) until its stdin ends, so that the caller sees what the
// cancellation did, not what a hang-up would; then one more line, {clientErrors}: all the
// client reported by then. Exit code 1 on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [callUrl, cancelUrl] = process.argv.slice(2);
const errors = [];
const clientErrors = [];

// Every request after the call goes to CANCEL_URL when it is given: a load balancer's doing.
// The cancellation's POST is kept, to wait for its answer.
let callStarted = false;
let cancelled;
function routed(input, init) {
  const body = typeof init?.body === "string" ? init.body : "";
  const url = cancelUrl && callStarted ? new URL(cancelUrl) : input;
  if (body.includes('"tools/call"')) callStarted = true;
  const response = fetch(url, init);
  if (body.includes('"notifications/cancelled"')) cancelled = response;
  return response;
}

const client = new Client({ name: "mcp-http-cancel", version: "1.0.0" });
client.onerror = (error) => clientErrors.push(String(error?.message ?? error));
const transport = new StreamableHTTPClientTransport(new URL(callUrl), { fetch: routed });
await client.connect(transport);

const abort = new AbortController();
let runId;
const call = client.callTool(
  { name: "run", arguments: { prompt: "slow tool, then abort the call" } },
  undefined,
  {
    signal: abort.signal,
    onprogress: (progress) => {
      runId ??= progress.message?.match(/^run (\S+) started/)?.[1];
      if (progress.message?.startsWith("calling tool sleep")) abort.abort("the user gave up");
    },
  },
);
let outcome;
try {
  await call;
  outcome = "answered";
} catch (error) {
  outcome = error?.message ?? String(error);
}
if (!abort.signal.aborted) errors.push(`the call ended before it was aborted: ${outcome}`);
if (!runId) errors.push("no progress notification named the run");
if (!transport.sessionId) errors.push("the server gave no Mcp-Session-Id");

// The SDK sends the notification without waiting for its answer; this waits for it.
const status = cancelled ? (await cancelled).status : "not sent";
if (status !== 202) errors.push(`notifications/cancelled was answered ${status}, not 202`);
// The session goes on: the next request is answered as ever.
const { tools } = await client.listTools();
if (!tools.some((tool) => tool.name === "run")) errors.push("tools/list after the cancel");
console.log(JSON.stringify({ ok: errors.length === 0, runId, outcome, errors, clientErrors }));
process.stdin.resume();
await new Promise((resolve) => process.stdin.on("end", resolve));
console.log(JSON.stringify({ clientErrors }));
await client.close();
process.exit(errors.length ? 1 : 0);
