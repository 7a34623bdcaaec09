// Drives loopgate's JSON-RPC API with the json-rpc-2.0 client library (npm), over POST /rpc
// (fetch) and over the WebSocket /rpc/ws (ws + JSONRPCServerAndClient, which also answers the
// server's run.permission requests). Usage: node jsonrpc-client.mjs http://127.0.0.1:PORT
// Prints a JSON summary {ok, checks, errors}; exit code 1 on any failure.
import {
  JSONRPCClient,
  JSONRPCErrorException,
  JSONRPCServer,
  JSONRPCServerAndClient,
} from "json-rpc-2.0";
import WebSocket from "ws";

const base = process.argv[2];
const checks = [];
const errors = [];

function check(name, condition, detail) {
  checks.push(name);
  if (!condition) errors.push(`${name}: ${JSON.stringify(detail)}`);
}

function httpClient() {
  const client = new JSONRPCClient((request) =>
    fetch(`${base}/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
    }).then((response) => {
      if (response.status === 200) {
        return response.json().then((body) => client.receive(body));
      } else if (response.status === 204) {
        return undefined;
      } else if (request.id !== undefined || Array.isArray(request)) {
        // A batch refused whole: each of its calls fails with the status.
        return Promise.reject(new Error(`HTTP ${response.status}`));
      }
    }),
  );
  return client;
}

async function overHttp() {
  const client = httpClient();
  const { runId } = await client.request("run.start", { input: "plain" });
  check("http: run.start returns a run id", typeof runId === "string", runId);
  let after = 0;
  let done = false;
  const seqs = [];
  for (let i = 0; !done && i < 500; i++) {
    const page = await client.request("run.events", { runId, after, limit: 5 });
    seqs.push(...page.events.map((e) => e.seq));
    after = page.cursor;
    done = page.done;
    if (!page.events.length) await new Promise((r) => setTimeout(r, 10));
  }
  check("http: run.events pages to done", done, { after });
  check(
    "http: events are gapless",
    seqs.every((s, i) => s === i + 1),
    seqs,
  );
  const run = await client.request("run.get", [runId]);
  check("http: run.get positional", run.state === "finished" && run.lastSeq === seqs.length, run);
  try {
    await client.request("run.get", { runId: 5 });
    check("http: -32602 rejects", false, "resolved");
  } catch (error) {
    check(
      "http: -32602 names the parameter",
      error instanceof JSONRPCErrorException && error.code === -32602 && error.data.param === "runId",
      { code: error.code, data: error.data },
    );
  }
  try {
    await client.request("run.get", ["no-such-run"]);
    check("http: unknown run rejects", false, "resolved");
  } catch (error) {
    check("http: unknown run is -32000", error.code === -32000, error.code);
  }
  const batch = await client.requestAdvanced([
    { jsonrpc: "2.0", id: 101, method: "run.get", params: { runId } },
    { jsonrpc: "2.0", method: "run.list" },
    { jsonrpc: "2.0", id: 102, method: "no.such.method" },
  ]);
  check(
    "http: batch answers per item",
    batch.length === 2 &&
      batch[0].id === 101 &&
      batch[0].result.id === runId &&
      batch[1].id === 102 &&
      batch[1].error.code === -32601,
    batch,
  );
  // One item past max_batch (100): 413 with -32006 (id null, which matches no call), so the
  // client fails every call of the batch at once; a 200 would leave them all waiting.
  const tooMany = Array.from({ length: 101 }, (_, i) => ({
    jsonrpc: "2.0",
    id: 1000 + i,
    method: "run.list",
  }));
  const refused = await client.timeout(20000).requestAdvanced(tooMany);
  check(
    "http: a batch over max_batch fails each call with 413",
    refused.length === 101 && refused.every((r) => r.error && r.error.message === "HTTP 413"),
    refused.slice(0, 2),
  );
  await client.notify("run.list", {}); // 204, nothing to receive
  const discover = await client.request("rpc.discover");
  check("http: rpc.discover", discover.openrpc === "1.2.6", discover.openrpc);
}

async function overWebSocket() {
  const socket = new WebSocket(`${base.replace("http", "ws")}/rpc/ws`);
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  const peer = new JSONRPCServerAndClient(
    new JSONRPCServer(),
    new JSONRPCClient((request) => {
      socket.send(JSON.stringify(request));
      return Promise.resolve();
    }),
  );
  socket.on("message", (data) => peer.receiveAndSend(JSON.parse(data.toString())));
  socket.on("close", () => peer.rejectAllPendingRequests("connection closed"));

  const events = [];
  const asked = [];
  let finish;
  const ended = new Promise((resolve) => (finish = resolve));
  peer.addMethod("run.event", ({ event }) => {
    events.push(event);
  });
  peer.addMethod("run.end", (params) => finish(params));
  peer.addMethod("run.permission", (params, _serverParams) => {
    asked.push(params);
    return { decision: "allow_once" };
  });

  const started = await peer.request("run.start", {
    input: "what time is it and what is 6*7?",
    approval: "always",
    subscribe: true,
  });
  check("ws: run.start subscribes", typeof started.subscription === "string", started);
  const end = await Promise.race([
    ended,
    new Promise((_, reject) => setTimeout(() => reject(new Error("no run.end in 20 s")), 20000)),
  ]);
  check("ws: run.end completed", end.status === "completed" && end.lastSeq === events.length, end);
  check(
    "ws: events gapless and in order",
    events.every((e, i) => e.seq === i + 1),
    events.map((e) => e.seq),
  );
  check("ws: two permission requests asked", asked.length === 2, asked);
  const results = events.filter((e) => e.kind === "permission_result").map((e) => e.data.by);
  check("ws: answered by this client", results.join() === "client,client", results);
  const run = await peer.request("run.get", { runId: started.runId });
  check("ws: run.get", run.status === "completed", run);
  socket.close();
}

try {
  await overHttp();
  await overWebSocket();
} catch (error) {
  errors.push(`unexpected: ${error && error.stack ? error.stack : error}`);
}
const ok = errors.length === 0;
process.stdout.write(JSON.stringify({ ok, checks, errors }) + "\n");
process.exit(ok ? 0 : 1);
