// Signs in to the web console (gateway/console) in headless Chromium as people with API keys
// would, and reads who it says is signed in and whose runs it lists.
//
//   node console-signin.mjs '{"chromium": PATH, "artifacts": DIR, "timeoutMs": N, SCENARIO: {...}}'
//
// keys:  {gateway, wrong, alice, root, runs}: a wrong key is typed first, then alice's; alice
//        opens one of her runs and starts another (AG-UI WebSocket and EventSource, both with
//        ?token=), signs out; root (an admin) signs in. `runs`: ids the gateway holds that
//        alice's list and root's are awaited for.
// token: {gateway, token, runs}: the gateway's single token typed in; who that is.
// local: {gateway, runs}: a gateway with no credential configured; the console asks nothing.
//
// Prints one JSON object: what the console showed. The Python side
// (tests/browser/test_console.py) asserts; this script only acts and observes.

import { closePage, openPage, runScenarios } from "./browser-kit.mjs";

const config = JSON.parse(process.argv[2]);

const text = (page, selector) => page.$eval(selector, (node) => node.innerText);
const isOpen = (page) => page.$eval("#token-dialog", (dialog) => dialog.open);

// The rows of the run list once every run of `ids` is listed: [{id, owner, mine}].
async function listed(page, ids) {
  await page.waitForFunction(
    (want) => want.every((id) => document.querySelector(`#run-list li[data-run-id="${id}"]`)),
    ids,
  );
  return await page.$$eval("#run-list li", (rows) =>
    rows.map((row) => {
      const owner = row.querySelector(".owner");
      return { id: row.dataset.runId, owner: owner.innerText, mine: owner.classList.contains("mine") };
    }),
  );
}

// Types `key` into the sign-in dialog; resolves once the dialog has answered (open again with
// an error, or closed and someone signed in).
async function typeKey(page, key) {
  await page.waitForSelector("#token-dialog[open]");
  await page.fill("#token", key);
  await page.press("#token", "Enter");
  await page.waitForFunction(
    () =>
      (document.getElementById("token-dialog").open && !document.getElementById("token-error").hidden) ||
      !document.getElementById("who").hidden,
  );
}

async function who(page) {
  await page.waitForSelector("#who:not([hidden])");
  return {
    name: await text(page, "#who-name"),
    title: await page.$eval("#who", (node) => node.title),
    signOut: await page.$eval("#sign-out", (button) => !button.hidden),
  };
}

async function waitForCompletion(page) {
  await page.waitForSelector("#stream .ev.completion", { timeout: 30000 });
  return await text(page, "#stream");
}

async function keys(browser, { gateway, wrong, alice, root, runs }) {
  const { page, problems, network } = await openPage(browser, `${gateway}/`, "console-keys");
  // Playwright tells of WebSockets apart from other requests (the AG-UI socket opens later).
  const sockets = [];
  page.on("websocket", (socket) => sockets.push({ url: socket.url(), type: "websocket" }));
  const report = {};

  // Nobody signed in: the console asks, and says so when the key is wrong.
  await page.waitForSelector("#token-dialog[open]");
  report.asked = await text(page, "#token-ask");
  report.placeholder = await page.$eval("#token", (input) => input.placeholder);
  await typeKey(page, wrong);
  report.wrong = { open: await isOpen(page), error: await text(page, "#token-error") };

  // alice: her own runs, and a run she opens and one she starts.
  await typeKey(page, alice);
  report.alice = { who: await who(page), dialogOpen: await isOpen(page) };
  report.alice.rows = await listed(page, [runs.alice]);
  await page.click(`#run-list li[data-run-id="${runs.alice}"]`);
  report.alice.opened = { stream: await waitForCompletion(page) };
  await page.waitForFunction(() => document.getElementById("run-meta").textContent.includes(" · by "));
  report.alice.opened.meta = await text(page, "#run-meta");

  await page.fill("#prompt", "What time is it?");
  await page.press("#prompt", "Enter");
  await page.waitForFunction((id) => window.loopgateConsole.runId && window.loopgateConsole.runId !== id, runs.alice);
  const started = await page.evaluate(() => window.loopgateConsole.runId);
  const stream = await waitForCompletion(page);
  await page.waitForSelector("#thread:not([hidden])");
  await page.waitForFunction(() => document.getElementById("run-meta").textContent.includes(" · by "));
  report.alice.started = {
    runId: started,
    stream,
    meta: await text(page, "#run-meta"),
    thread: await text(page, "#thread .thread-head"),
  };
  report.alice.rowsAfter = await listed(page, [runs.alice, started]);

  // Signing out forgets the key: the page asks again, and root signs in.
  await page.click("#sign-out");
  await page.waitForSelector("#token-dialog[open]");
  report.signedOut = { stored: await page.evaluate(() => sessionStorage.length) };
  await typeKey(page, root);
  report.root = { who: await who(page) };
  report.root.rows = await listed(page, [runs.alice, runs.bob, started]);

  // Every request with a credential sent it as a header, or as ?token= where no header can go.
  report.queryTokens = [...network, ...sockets]
    .filter((request) => new URL(request.url).searchParams.has("token"))
    .map((request) => ({ path: new URL(request.url).pathname, type: request.type }));
  report.refused = network.filter((r) => r.status === 401).map((r) => new URL(r.url).pathname);
  report.problems = problems;
  await closePage("console-keys");
  return report;
}

async function token(browser, { gateway, token, runs }) {
  const { page, problems, network } = await openPage(browser, `${gateway}/`, "console-token");
  await typeKey(page, token);
  const report = { who: await who(page), rows: await listed(page, runs) };
  report.refused = network.filter((r) => r.status === 401).map((r) => new URL(r.url).pathname);
  report.problems = problems;
  await closePage("console-token");
  return report;
}

async function local(browser, { gateway, runs }) {
  const { page, problems, network } = await openPage(browser, `${gateway}/`, "console-local");
  const report = { who: await who(page) };
  report.rows = await listed(page, runs);
  report.dialogOpen = await isOpen(page);
  report.refused = network.filter((r) => r.status === 401).map((r) => new URL(r.url).pathname);
  report.problems = problems;
  await closePage("console-local");
  return report;
}

await runScenarios(config, { keys, token, local });
