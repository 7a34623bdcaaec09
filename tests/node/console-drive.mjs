// Drives the web console (gateway/console) in headless Chromium, as a person would: typing a
// prompt, clicking Cancel, an approval's button, answering a question; and measures it on a
// 100,000-delta run and a list of 1,000 runs.
//
//   node console-drive.mjs '{"chromium": PATH, "artifacts": DIR, "timeoutMs": N, SCENARIO: {...}}'
//
// flows:    {gateway}: answer, cancel, approval, ask_user, each in the console of `gateway`.
// states:   {gateway}: what the console says of a run waiting for approval, a run cancelled
//           in a tool call, an answered ask_user and its follow-up (rows, titles, thread view).
// served:   {gateways, prompt}: the loop and model each gateway's console names; a run of
//           `prompt` started on the first, and the model its run view names.
// bigRun:   {gateway, deltas}: an ingest run of `deltas` text deltas pushed while the console
//           watches it.
// manyRuns: {gateway, runs}: the console opened on a gateway holding `runs` finished runs.
// watch:    {gateway, runs}: each of the finished runs `runs` (ids) opened from the list; what
//           the console drew of it.
// answerAttached: {gateway, runId}: the question of run `runId` (asked of a prompt with an
//           attachment) answered in the console; the run the answer started.
// csp:      {gateway, framer}: an inline script injected into the console, and the console
//           framed by the page at `framer`: what the browser refused.
//
// Prints one JSON object: what the console showed and the times measured in the page. The
// Python side (tests/browser/test_console.py) asserts; this script only acts and observes.

import { closePage, openPage, runScenarios } from "./browser-kit.mjs";
import { startRun, text, waitForCompletion } from "./console-kit.mjs";

const config = JSON.parse(process.argv[2]);

async function flows(browser, { gateway }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-flows");
  const report = {};

  const answered = await startRun(page, "What time is it?");
  report.answer = { runId: answered, stream: await waitForCompletion(page) };
  // The run's trace id, shown to be copied once the run's description arrives.
  await page.waitForSelector("#trace:not([hidden])");
  report.answer.traceId = await text(page, "#trace-id");

  const cancelled = await startRun(page, "What time is it?");
  await page.waitForSelector("#stream .ev.text");
  await page.click("#cancel");
  report.cancel = { runId: cancelled, stream: await waitForCompletion(page) };

  const approved = await startRun(page, "write note groceries");
  const allow = '#stream [data-kind="permission_request"] button[data-decision="allow_once"]';
  await page.waitForSelector(allow);
  await page.click(allow);
  report.approval = { runId: approved, stream: await waitForCompletion(page) };

  const asked = await startRun(page, "ask user what their name is");
  const answer = '#stream [data-kind="ask_user"] input';
  await page.waitForSelector(answer);
  report.question = await text(page, '#stream [data-kind="ask_user"]');
  await page.fill(answer, "Ada Lovelace");
  await page.press(answer, "Enter");
  // The answer starts the thread's next run; the console follows it.
  await page.waitForFunction((id) => window.loopgateConsole.runId !== id, asked);
  const next = await page.evaluate(() => window.loopgateConsole.runId);
  report.askUser = { runId: asked, nextRunId: next, stream: await waitForCompletion(page) };

  report.listed = await page.$$eval("#run-list li", (rows) => rows.map((row) => row.dataset.runId));
  report.problems = problems;
  await closePage("console-flows");
  return report;
}

const row = (id) => `#run-list li[data-run-id="${id}"]`;

// Waits until the row of run `id` is in state `state` (its class: the state's words, dashed).
async function rowInState(page, id, state) {
  await page.waitForFunction(
    ([selector, want]) => document.querySelector(selector)?.classList.contains(want),
    [row(id), state.replace(/ /g, "-")],
  );
  const shown = (part) => text(page, `${row(id)} ${part}`);
  const classes = await page.$eval(row(id), (node) => [...node.classList]);
  return { title: await shown(".prompt"), sub: await shown(".sub"), classes };
}

async function runState(page, state) {
  await page.waitForFunction((want) => document.getElementById("run-state").textContent === want, state);
  const shown = (id) => text(page, `#run-${id}`);
  return { state, title: await shown("title"), id: await shown("id"), meta: await shown("meta") };
}

async function states(browser, { gateway }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-states");
  const report = {};

  const approved = await startRun(page, "write note groceries");
  const allow = '#stream [data-kind="permission_request"] button[data-decision="allow_once"]';
  await page.waitForSelector(allow);
  report.approval = {
    runId: approved,
    waiting: await runState(page, "waiting for approval"),
    row: await rowInState(page, approved, "waiting for approval"),
  };
  await page.click(allow);
  await waitForCompletion(page);
  report.approval.after = await runState(page, "completed");
  report.approval.rowAfter = await rowInState(page, approved, "completed");

  const cancelled = await startRun(page, "slow tool");
  const card = "#stream .tool-call";
  await page.waitForSelector(card);
  report.cancel = { runId: cancelled, before: await text(page, card) };
  await page.click("#cancel");
  await waitForCompletion(page);
  report.cancel.state = await runState(page, "cancelled");
  report.cancel.cards = await page.$$eval(card, (nodes) => nodes.map((node) => node.innerText));

  const asked = await startRun(page, "ask user what their name is");
  const answer = '#stream [data-kind="ask_user"] input';
  await page.waitForSelector(answer);
  report.ask = { runId: asked, waiting: await runState(page, "waiting_user") };
  await page.fill(answer, "Ada Lovelace");
  await page.press(answer, "Enter");
  await page.waitForFunction((id) => window.loopgateConsole.runId !== id, asked);
  const next = await page.evaluate(() => window.loopgateConsole.runId);
  await waitForCompletion(page);
  report.ask.nextRunId = next;
  report.ask.next = await runState(page, "completed");
  report.ask.askedRow = await rowInState(page, asked, "answered");
  report.ask.nextRow = await rowInState(page, next, "completed");
  report.ask.thread = await page.$$eval("#thread li", (items) =>
    items.map((item) => ({ runId: item.dataset.runId, current: item.getAttribute("aria-current") })),
  );
  report.ask.threadHead = await text(page, "#thread .thread-head");
  // Back to the question's run, from the thread view: it no longer waits.
  await page.click(`#thread li[data-run-id="${asked}"]`);
  report.ask.askedView = await runState(page, "answered");
  await page.waitForSelector("#stream .ask .said");
  report.ask.askedView.said = await text(page, "#stream .ask .said");
  report.ask.askedView.inputs = await page.$$eval("#stream .ask input", (nodes) => nodes.length);

  // A question passed over: the thread's next run sends a whole conversation that ends with
  // a new user message, not the answer (as clients that keep their own history may).
  const thread = `passed-over-${Date.now()}`;
  const start = async (input) => {
    const body = JSON.stringify({ input, thread_id: thread });
    const created = await (await post(`${gateway}/v1/runs`, body)).json();
    await (await fetch(`${gateway}/v1/runs/${created.id}/events`)).text(); // to the run's end
    return created.id;
  };
  const question = await start("ask user tea or coffee?");
  const moved = await start([{ role: "user", content: "never mind, plain hi" }]);
  report.passedOver = {
    questionRow: await rowInState(page, question, "not answered"),
    nextRow: await rowInState(page, moved, "completed"),
  };

  report.listed = await page.$$eval("#run-list li", (rows) => rows.map((r) => r.dataset.runId));
  report.served = await text(page, "#served");
  report.problems = problems;
  await closePage("console-states");
  return report;
}

async function served(browser, { gateways, prompt }) {
  const report = { served: [] };
  for (const [i, gateway] of gateways.entries()) {
    const name = `console-served-${i}`;
    const { page, problems } = await openPage(browser, `${gateway}/`, name);
    await page.waitForFunction(() => document.getElementById("served").textContent !== "");
    report.served.push(await text(page, "#served"));
    if (i === 0) {
      await startRun(page, prompt);
      await waitForCompletion(page);
      await page.waitForFunction(() => document.getElementById("run-meta").textContent.includes("model"));
      report.runMeta = await text(page, "#run-meta");
    }
    report.problems = [...(report.problems ?? []), ...problems];
    await closePage(name);
  }
  return report;
}

async function post(url, body, type = "application/json") {
  const response = await fetch(url, { method: "POST", headers: { "content-type": type }, body });
  if (!response.ok) throw new Error(`POST ${url}: ${response.status} ${await response.text()}`);
  return response;
}

// Pushed as NDJSON in bodies under the gateway's 1 MiB limit.
async function pushDeltas(gateway, runId, deltas) {
  const url = `${gateway}/v1/runs/${runId}/events`;
  const line = (i) => JSON.stringify({ kind: "content_delta", data: { delta: `w${i % 10} ` } });
  const batch = 10000;
  for (let start = 0; start < deltas; start += batch) {
    const lines = [];
    for (let i = start; i < Math.min(start + batch, deltas); i++) lines.push(line(i));
    await post(url, `${lines.join("\n")}\n`, "application/x-ndjson");
  }
  const done = { kind: "completion", data: { status: "completed", reason: "stop" } };
  await post(url, `${JSON.stringify(done)}\n`, "application/x-ndjson");
}

async function bigRun(browser, { gateway, deltas }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-big-run");
  const created = await (await post(`${gateway}/v1/runs`, JSON.stringify({ source: "ingest" }))).json();
  await page.click(`#run-list li[data-run-id="${created.id}"]`);
  // Watching live: the EventSource is open before the first event is pushed.
  await page.waitForFunction(() => window.loopgateConsole.source?.readyState === EventSource.OPEN);
  const pushedAt = Date.now();
  await pushDeltas(gateway, created.id, deltas);
  const pushMs = Date.now() - pushedAt;
  await page.waitForFunction(
    (n) => window.loopgateConsole.view.stats.deltas === n && window.loopgateConsole.view.ended,
    deltas,
    { timeout: 120000, polling: 100 },
  );
  const measured = await page.evaluate(() => {
    const { view } = window.loopgateConsole;
    const drawn = [...document.querySelectorAll("#stream .ev.text")].map((node) => node.lastChild.data ?? "");
    return { stats: view.stats, textBlocks: drawn.length, textLength: drawn.join("").length };
  });
  await closePage("console-big-run");
  return { runId: created.id, pushMs, ...measured, problems };
}

async function manyRuns(browser, { gateway, runs }) {
  const done = `${JSON.stringify({ kind: "completion", data: { status: "completed", reason: "stop" } })}\n`;
  const ids = [];
  for (let start = 0; start < runs; start += 25) {
    const batch = Array.from({ length: Math.min(25, runs - start) }, async () => {
      const created = await (await post(`${gateway}/v1/runs`, JSON.stringify({ source: "ingest" }))).json();
      await post(`${gateway}/v1/runs/${created.id}/events`, done, "application/x-ndjson");
      return created.id;
    });
    ids.push(...(await Promise.all(batch)));
  }
  const openedAt = Date.now();
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-many-runs");
  await page.waitForFunction((n) => document.querySelectorAll("#run-list li").length === n, runs, { timeout: 60000 });
  const listedMs = Date.now() - openedAt;
  const first = await page.evaluate(() => ({ ...window.loopgateConsole.list.stats }));
  // The next poll re-renders the same 1,000 runs: nothing changed, nothing moves.
  await page.waitForFunction(() => window.loopgateConsole.list.stats.renders >= 2, null, { timeout: 10000 });
  const refresh = await page.evaluate(() => ({ ...window.loopgateConsole.list.stats }));
  const oldest = ids[0];
  const clickedAt = Date.now();
  await page.click(`#run-list li[data-run-id="${oldest}"]`);
  await page.waitForSelector("#stream .ev.completion");
  const selectMs = Date.now() - clickedAt;
  const shownId = await text(page, "#run-id");
  const title = await text(page, "#run-title");
  const order = await page.$$eval("#run-list li", (rows) => rows.map((row) => row.dataset.runId));
  await closePage("console-many-runs");
  return { created: ids.length, listedMs, first, refresh, selectMs, shownId, title, oldest, orderReversed: order.join() === [...ids].reverse().join(), problems };
}

// What the console drew of each run: the kind of every drawn block, and its text.
async function watch(browser, { gateway, runs }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-watch");
  const drawn = {};
  for (const id of runs) {
    await page.click(`#run-list li[data-run-id="${id}"]`);
    await page.waitForFunction((runId) => {
      const c = window.loopgateConsole;
      return c.runId === runId && c.view.ended && c.view.queue.length === 0;
    }, id);
    drawn[id] = await page.$$eval("#stream [data-kind]", (nodes) =>
      nodes.map((node) => ({ kind: node.dataset.kind, raw: node.classList.contains("raw"), text: node.innerText })),
    );
  }
  await closePage("console-watch");
  return { drawn, problems };
}

async function answerAttached(browser, { gateway, runId }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-attached");
  await page.click(`#run-list li[data-run-id="${runId}"]`);
  const answer = '#stream [data-kind="ask_user"] input';
  await page.waitForSelector(answer);
  await page.fill(answer, "Ada Lovelace");
  await page.press(answer, "Enter");
  await page.waitForFunction((id) => window.loopgateConsole.runId !== id, runId);
  const next = await page.evaluate(() => window.loopgateConsole.runId);
  const stream = await waitForCompletion(page);
  await closePage("console-attached");
  return { nextRunId: next, stream, problems };
}

// The console's Content-Security-Policy at work: an inline script put into the page is refused
// (what an injected one would be), and a page of another origin that frames the console gets
// nothing. Both refusals are reported as the browser states them.
async function csp(browser, { gateway, framer }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-csp");
  await page.waitForFunction(() => window.loopgateConsole);
  const loaded = [...problems];
  const inline = await page.evaluate(
    () =>
      new Promise((resolve) => {
        const done = (directive) => resolve({ directive, ran: window.inlineRan === true });
        document.addEventListener("securitypolicyviolation", (e) => done(e.effectiveDirective));
        const script = document.createElement("script");
        script.textContent = "window.inlineRan = true";
        document.body.append(script);
        // No policy: the script has run, and no violation will come.
        if (window.inlineRan) done(null);
      }),
  );
  await closePage("console-csp");

  const framing = await openPage(browser, framer, "console-framed");
  const refusal = framing.page.waitForEvent("console", {
    predicate: (message) => message.text().includes("frame-ancestors"),
    timeout: 15000,
  });
  await framing.page.evaluate((url) => {
    const frame = document.createElement("iframe");
    frame.src = url;
    document.body.append(frame);
  }, `${gateway}/`);
  const framed = (await refusal).text();
  await closePage("console-framed");
  return { loaded, inline, framed };
}

await runScenarios(config, { flows, states, served, bigRun, manyRuns, watch, answerAttached, csp });
