// Drives headless Chromium against live loopgate servers from pages on another loopback port:
// what a web UI's fetch and EventSource meet (CORS, the end of a finished stream).
//
//   node browser-cors.mjs '{"chromium": PATH, "open": {...}, "guarded": {...}}'
//
// open:    {gateway, page}: a gateway without --allowed-origin, a page on another port.
// guarded: {gateway, token, allowedPage, refusedPage}: a gateway with a token and one
//          --allowed-origin; the same page served under that origin and under another.
//
// Prints one JSON object: what each page saw, and the requests the browser sent. The Python
// side (tests/browser/test_chromium.py) asserts; this script only observes.

import { chromium } from "playwright-core";

const config = JSON.parse(process.argv[2]);
// A guard for a stream that never ends: reported as such, never waited out on success.
const CLOSE_WITHIN_MS = 20000;

// Requests the browser sent from a page (preflights are not page requests: Chromium makes
// them in its network service) and the statuses that came back.
function watchNetwork(page) {
  const seen = [];
  page.on("request", (request) => {
    seen.push({ method: request.method(), url: request.url(), type: request.resourceType() });
  });
  page.on("response", (response) => {
    const entry = seen.findLast((s) => s.url === response.url() && s.status === undefined);
    if (entry) entry.status = response.status();
  });
  page.on("requestfailed", (request) => {
    const entry = seen.findLast((s) => s.url === request.url() && s.status === undefined);
    if (entry) entry.failure = request.failure()?.errorText ?? "failed";
  });
  return seen;
}

async function openPage(browser, url) {
  const page = await browser.newPage();
  const network = watchNetwork(page);
  const console_ = [];
  page.on("console", (message) => console_.push(message.text()));
  await page.goto(url);
  return { page, network, console: console_ };
}

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

// In the page: an EventSource on a run's events until the browser closes it for good.
// ``push`` ({url, body}), if given, is POSTed (NDJSON) once the stream is open: an ingest run
// that ends while the page watches it live.
async function followRun({ url, kinds, closeWithinMs, push }) {
  return await new Promise((resolve) => {
    const report = { ids: [], opens: 0, errors: 0, closed: false };
    const source = new EventSource(url);
    const finish = () => {
      source.close();
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
    const onEvent = (event) => {
      report.ids.push(Number(event.lastEventId));
    };
    for (const kind of kinds) {
      // "error" is also one of ours; the browser's own error event is not a MessageEvent.
      if (kind !== "error") source.addEventListener(kind, onEvent);
    }
    source.addEventListener("error", (event) => {
      if (event instanceof MessageEvent) {
        onEvent(event);
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

async function kindsFrom(page, gateway) {
  return await page.evaluate(
    async (base) => (await (await fetch(`${base}/v1/contract`)).json()).eventKinds,
    gateway,
  );
}

function streamRequests(network, runId) {
  return network
    .filter((s) => s.url.includes(`/v1/runs/${runId}/events`))
    .map(({ method, status, type, failure }) => ({ method, status, type, failure }));
}

async function openScenario(browser, { gateway, page: pageUrl }) {
  const { page, network, console: logs } = await openPage(browser, pageUrl);
  const calls = await page.evaluate(pageCalls, gateway);
  const runId = calls.start.id;
  if (!runId) {
    // The page could not even start a run: what it saw is the report.
    await page.close();
    return { origin: new URL(pageUrl).origin, calls, console: logs };
  }
  const kinds = await kindsFrom(page, gateway);
  const follow = await page.evaluate(followRun, {
    url: `${gateway}/v1/runs/${runId}/events`,
    kinds,
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
    kinds,
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
    kinds,
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
  await page.close();
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
    const { page, network, console: logs } = await openPage(browser, url);
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
    await page.close();
  }
  return result;
}

const browser = await chromium.launch({ executablePath: config.chromium, headless: true });
try {
  const report = {};
  const jobs = [];
  if (config.open) jobs.push(openScenario(browser, config.open).then((r) => (report.open = r)));
  if (config.guarded) {
    jobs.push(guardedScenario(browser, config.guarded).then((r) => (report.guarded = r)));
  }
  await Promise.all(jobs);
  console.log(JSON.stringify(report));
} finally {
  await browser.close();
}
