// Opens a gateway's /docs page (gateway/apidocs) in headless Chromium and reports what it
// shows: the operations listed, one operation opened, one schema, and every request the page
// made (the Python side checks that none left the gateway's origin).
//
//   node apidocs-drive.mjs '{"chromium": PATH, "artifacts": DIR, "timeoutMs": N, SCENARIO: {...}}'
//
// open:    {gateway}: the page of a gateway without a token.
// secured: {gateway}: the page of a gateway with a token (which the page does not have).
//
// Prints one JSON object; tests/browser/test_api_docs.py asserts.

import { closePage, openPage, runScenarios } from "./browser-kit.mjs";

const config = JSON.parse(process.argv[2]);

async function docs(browser, { gateway }, name) {
  const { page, network, problems } = await openPage(browser, `${gateway}/docs`, name);
  await page.waitForSelector('body[data-loaded="true"]', { timeout: 15000 });
  const report = {
    title: await page.title(),
    // From navigation start to the whole document drawn, measured in the page.
    loadedMs: Number(await page.$eval("body", (node) => node.dataset.loadedMs)),
    operations: await page.$$eval("details.op", (nodes) => nodes.map((n) => n.dataset.operation)),
    tags: await page.$$eval("section.tag > h2", (nodes) => nodes.map((n) => n.textContent)),
    locked: await page.$$eval("details.op .lock", (nodes) => nodes.length),
    intro: await page.$eval("#intro", (node) => node.textContent),
  };
  // An operation opened as a reader opens it, then the schema its answer links to.
  await page.click("#op-startRun > summary");
  report.startRun = await page.$eval("#op-startRun .op-body", (node) => node.textContent);
  await page.click('#op-startRun a[href="#schema-RunView"]');
  await page.waitForFunction(() => location.hash === "#schema-RunView");
  report.runView = await page.$eval("#schema-RunView", (node) => node.textContent);
  await page.click("#op-streamEvents > summary");
  report.streamEvents = await page.$eval("#op-streamEvents .op-body", (node) => node.textContent);
  await page.click("#op-ingestSocket > summary");
  report.ingestSocket = await page.$eval("#op-ingestSocket .op-body", (node) => node.textContent);
  // Everything drawn, every operation open: what a reader can see.
  await page.$$eval("details.op", (nodes) => nodes.forEach((n) => (n.open = true)));
  report.text = await page.$eval("main", (node) => node.textContent);
  report.network = network.map(({ method, url, status, failure }) => ({ method, url, status, failure }));
  report.problems = problems;
  await closePage(name);
  return report;
}

await runScenarios(config, {
  open: (browser, scenario) => docs(browser, scenario, "apidocs-open"),
  secured: (browser, scenario) => docs(browser, scenario, "apidocs-secured"),
});
