// Drives headless Chromium against live loopgate servers from pages on another loopback port:
// what a web UI's fetch and EventSource meet (CORS, the end of a finished stream).
//
//   node browser-cors.mjs '{"chromium": PATH, "artifacts": DIR, "open": {...}, ...}'
//
// open:       {gateway, page}: a gateway without --allowed-origin, a page on another port.
// guarded:    {gateway, token, allowedPage, refusedPage}: a gateway with a token and one
//             --allowed-origin; the same page served under that origin and under another.
// recordings: {gateway, page, names}: every recording replayed as a run and watched with an
//             EventSource that listens to "message" only.
// agui:       {gateway, page, module, prompt}: HttpAgent.runAgent() in the page, @ag-ui/client
//             imported from ``module`` (the console's bundle, served by the page's server).
// broken:     {page, hang}: a step that throws (or never ends): the failure path.
//
// Prints one JSON object: what each page saw, and the requests the browser sent. The Python
// side (tests/browser/test_chromium.py) asserts; this script only observes.
//
// Every page is screenshotted into DIR (NAME.png) before it is closed, and every page still
// open when a step throws or the deadline (timeoutMs) passes: the picture of what a failed
// test's page showed. The script then exits 1 with the error on stderr.

import { closePage, openPage, runScenarios } from "./browser-kit.mjs";

const config = JSON.parse(process.argv[2]);
// A guard for a stream that never ends: reported as such, never waited out on success.
const CLOSE_WITHIN_MS = 20000;

// In the page: the REST, AG-UI and JSON-RPC calls a web UI makes, each reported as what the
// page could read (a status) or the error the browser gave it (a CORS refusal).
async function pageCalls(gateway) {
  const outcome = async (call) => {
    try {
      return await call();
    } catch (error) {
      return { error: error.name, message: error.message };
    }
  };
  const json = { "content-type": "application/json" };
  const results = {};
  results.start = await outcome(async () => {
    const response = await fetch(`${gateway}/v1/runs`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ input: "What time is it, and what is 25 * 16 + 2?" }),
    });
    const body = await response.json();
    return { status: response.status, location: response.headers.get("location"), id: body.id };
  });
  const id = results.start.id;
  results.get = await outcome(async () => {
    const response = await fetch(`${gateway}/v1/runs/${id}`);
    return { status: response.status };
  });
  results.list = await outcome(async () => {
    const response = await fetch(`${gateway}/v1/runs?limit=5`);
    return { status: response.status, runs: (await response.json()).runs.length };
  });
  results.health = await outcome(async () => {
    const response = await fetch(`${gateway}/healthz`);
    return { status: response.status, body: await response.json() };
  });
  results.rpc = await outcome(async () => {
    const response = await fetch(`${gateway}/rpc`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "run.list", params: { limit: 1 } }),
    });
    const body = await response.json();
    return { status: response.status, hasResult: "result" in body };
  });
  results.steerMissing = await outcome(async () => {
    // An error the page must be able to read: a problem body, not an opaque CORS failure.
    const response = await fetch(`${gateway}/v1/runs/run_missing/steer`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ content: "x" }),
    });
    return { status: response.status, type: (await response.json()).status };
  });
  results.agui = await outcome(async () => {
    // What @ag-ui/client's HttpAgent sends: a JSON body, Accept: text/event-stream.
    const response = await fetch(`${gateway}/agui`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({
        threadId: "browser-thread",
        runId: "browser-run",
        state: {},
        messages: [{ id: "m1", role: "user", content: "plain hello" }],
        tools: [],
        context: [],
        forwardedProps: {},
      }),
    });
    const text = await response.text();
    const types = text
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)).type);
    return { status: response.status, first: types[0], last: types.at(-1) };
  });
  return results;
}

// In the page: an EventSource on a run's events until the browser closes it for good, with a
// "message" listener only: native SSE events are unnamed, so it gets every kind. ``push``
// ({url, body}), if given, is POSTed (NDJSON) once the stream is open: an ingest run that ends
// while the page watches it live. ``errorMessages`` counts MessageEvents that reached
// ``onerror`` (an ``event: error`` frame would): never one. ``events`` holds what each
// MessageEvent handed over (type, lastEventId, the data string). With a ``label``, the page
// shows the tally at the end (what a screenshot shows).
async function followRun({ url, closeWithinMs, push, label }) {
  return await new Promise((resolve) => {
    const report = { ids: [], events: [], opens: 0, errors: 0, errorMessages: 0, closed: false };
    const source = new EventSource(url);
    const finish = () => {
      source.close();
      if (label) {
        const line = document.createElement("p");
        const end = report.closed ? "closed" : "never closed";
        line.textContent = `${label}: ${report.events.length} events, onerror ${report.errors}, ${end}`;
        document.body.append(line);
      }
      resolve(report);
    };
    const timer = setTimeout(finish, closeWithinMs);
    source.addEventListener("open", async () => {
      report.opens += 1;
      if (push && report.opens === 1) {
        try {
          const response = await fetch(push.url, {
            method: "POST",
            headers: { "content-type": "application/x-ndjson" },
            body: push.body,
          });
          report.pushed = response.status;
        } catch (error) {
          report.pushed = error.name;
        }
      }
    });
    source.addEventListener("message", (event) => {
      report.ids.push(Number(event.lastEventId));
      report.events.push({ type: event.type, id: event.lastEventId, data: event.data });
    });
    source.addEventListener("error", (event) => {
      if (event instanceof MessageEvent) {
        report.errorMessages += 1;
        return;
      }
      report.errors += 1;
      // CLOSED is final: a source in it never connects again.
      if (source.readyState === EventSource.CLOSED) {
        report.closed = true;
        clearTimeout(timer);
        finish();
      }
    });
  });
}

function streamRequests(network, runId) {
  return network
    .filter((s) => s.url.includes(`/v1/runs/${runId}/events`))
    .map(({ method, status, type, failure }) => ({ method, status, type, failure }));
}

async function openScenario(browser, { gateway, page: pageUrl }) {
  const { page, network, console: logs } = await openPage(browser, pageUrl, "open");
  const calls = await page.evaluate(pageCalls, gateway);
  const runId = calls.start.id;
  if (!runId) {
    // The page could not even start a run: what it saw is the report.
    await closePage("open");
    return { origin: new URL(pageUrl).origin, calls, console: logs };
  }
  const follow = await page.evaluate(followRun, {
    url: `${gateway}/v1/runs/${runId}/events`,
    closeWithinMs: CLOSE_WITHIN_MS,
  });
  // A run that is still going when the page starts watching, and ends while it watches.
  const live = await page.evaluate(
    async (base) => {
      const response = await fetch(`${base}/v1/runs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ source: "ingest" }),
      });
      return (await response.json()).id;
    },
    gateway,
  );
  const lines = [
    { kind: "content_delta", data: { delta: "hello from the page" } },
    { kind: "completion", data: { status: "completed" } },
  ];
  const followLive = await page.evaluate(followRun, {
    url: `${gateway}/v1/runs/${live}/events`,
    closeWithinMs: CLOSE_WITHIN_MS,
    push: {
      url: `${gateway}/v1/runs/${live}/events`,
      body: lines.map((line) => JSON.stringify(line) + "\n").join(""),
    },
  });
  const info = await page.evaluate(
    async ([base, id]) => (await (await fetch(`${base}/v1/runs/${id}`)).json()),
    [gateway, runId],
  );
  // A resume from an older cursor: the missing events, then the end (and no reconnect loop).
  const resumeFrom = info.last_seq - 2;
  const resume = await page.evaluate(followRun, {
    url: `${gateway}/v1/runs/${runId}/events?after=${resumeFrom}`,
    closeWithinMs: CLOSE_WITHIN_MS,
  });
  const result = {
    origin: await page.evaluate(() => location.origin),
    calls,
    runId,
    lastSeq: info.last_seq,
    state: info.state,
    follow,
    resumeFrom,
    resume,
    streamRequests: streamRequests(network, runId),
    liveRunId: live,
    followLive,
    liveRequests: streamRequests(network, live),
    console: logs,
  };
  await closePage("open");
  return result;
}

// In the page: a POST /v1/runs with or without the token, as the page sees it.
async function pageStart({ gateway, token }) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  try {
    const response = await fetch(`${gateway}/v1/runs`, {
      method: "POST",
      headers,
      body: JSON.stringify({ input: "plain hello" }),
    });
    return { status: response.status, location: response.headers.get("location") };
  } catch (error) {
    return { error: error.name, message: error.message };
  }
}

// In the page: a plain GET (no preflight), as the page sees it.
async function pageRead({ gateway }) {
  try {
    return { status: (await fetch(`${gateway}/healthz`)).status };
  } catch (error) {
    return { error: error.name, message: error.message };
  }
}

async function guardedScenario(browser, { gateway, token, allowedPage, refusedPage }) {
  const result = {};
  for (const [name, url] of [
    ["allowed", allowedPage],
    ["refused", refusedPage],
  ]) {
    const { page, network, console: logs } = await openPage(browser, url, `guarded-${name}`);
    result[name] = {
      origin: await page.evaluate(() => location.origin),
      withToken: await page.evaluate(pageStart, { gateway, token }),
      withoutToken: await page.evaluate(pageStart, { gateway, token: null }),
      read: await page.evaluate(pageRead, { gateway }),
      requests: network
        .filter((s) => s.url.startsWith(gateway))
        .map(({ method, url: u, status, failure }) => ({
          method,
          path: new URL(u).pathname,
          status,
          failure,
        })),
      console: logs,
    };
    await closePage(`guarded-${name}`);
  }
  return result;
}

// In the page: a recording replayed as a run (paced as recorded), as a web UI starts one.
async function startReplay({ gateway, name }) {
  const response = await fetch(`${gateway}/v1/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ replay: name, pace: "recorded" }),
  });
  return { name, status: response.status, id: (await response.json()).id };
}

async function recordingsScenario(browser, { gateway, page: pageUrl, names }) {
  const { page, network, problems } = await openPage(browser, pageUrl, "recordings");
  const started = Date.now();
  // Every recording at once, each watched by its own EventSource.
  const runs = await Promise.all(
    names.map(async (name) => {
      const run = await page.evaluate(startReplay, { gateway, name });
      if (!run.id) return run;
      const url = `${gateway}/v1/runs/${run.id}/events`;
      const closeWithinMs = CLOSE_WITHIN_MS;
      return { ...run, ...(await page.evaluate(followRun, { url, closeWithinMs, label: name })) };
    }),
  );
  const result = {
    origin: await page.evaluate(() => location.origin),
    ms: Date.now() - started,
    runs,
    streamRequests: Object.fromEntries(runs.map((r) => [r.id, streamRequests(network, r.id)])),
    problems,
  };
  await closePage("recordings");
  return result;
}

// In the page: one turn of @ag-ui/client's HttpAgent.runAgent() against the gateway's /agui,
// the client imported from the bundle the console ships, which the page's own server serves
// (so the module is the page's origin and the gateway another).
async function pageAgent({ gateway, module, prompt }) {
  const { HttpAgent } = await import(module);
  const agent = new HttpAgent({
    url: `${gateway}/agui`,
    threadId: "browser-agent-thread",
    initialMessages: [{ id: "u-1", role: "user", content: prompt }],
  });
  const types = [];
  let failed = null;
  let result = null;
  try {
    result = await agent.runAgent(
      { runId: "browser-agent-run" },
      {
        onEvent: ({ event }) => {
          types.push(event.type);
        },
        onRunFailed: ({ error }) => {
          failed = String(error?.message ?? error);
        },
      },
    );
  } catch (error) {
    failed = String(error?.message ?? error);
  }
  const text = (result?.newMessages ?? [])
    .filter((m) => m.role === "assistant" && m.content)
    .map((m) => m.content)
    .join("");
  const line = document.createElement("pre");
  line.style.whiteSpace = "pre-wrap";
  line.textContent = `${types.join(" ")}\n\n${text || failed}`;
  document.body.append(line);
  return { types, failed, newMessages: result?.newMessages ?? null, messages: agent.messages };
}

async function aguiScenario(browser, { gateway, page: pageUrl, module, prompt }) {
  const { page, network, problems } = await openPage(browser, pageUrl, "agui");
  const run = await page.evaluate(pageAgent, { gateway, module, prompt });
  const result = {
    origin: await page.evaluate(() => location.origin),
    run,
    requests: network.map(({ method, url, status }) => ({ method, url, status })),
    problems,
  };
  await closePage("agui");
  return result;
}

// The failure path itself (tests/browser/test_chromium.py checks that it leaves a screenshot):
// a step that throws, or one that never ends and meets the deadline.
async function brokenScenario(browser, { page: pageUrl, hang }) {
  const { page } = await openPage(browser, pageUrl, "broken");
  await page.evaluate(() => {
    document.body.textContent = "this page's step failed";
  });
  if (hang) await new Promise(() => {});
  await page.evaluate(() => {
    throw new Error("a step that fails on purpose");
  });
}

await runScenarios(config, {
  open: openScenario,
  guarded: guardedScenario,
  recordings: recordingsScenario,
  agui: aguiScenario,
  broken: brokenScenario,
});
