// EventSource in headless Chromium, one principal's key per stream (as `?token=`: a browser
// sets no header on an EventSource), from a page on another loopback port.
//
//   node matrix-browser.mjs '{"chromium": PATH, "artifacts": DIR, "timeoutMs": N,
//                             "streams": {"page": URL, "follow": {NAME: EVENTS_URL, ...}}}'
//
// Prints {"streams": {NAME: {ids, opens, errors, closed, requests}}}: what each EventSource
// got, and the statuses the browser saw for its requests. tests/identity/test_matrix_web.py
// asserts; this script only observes.

import { closePage, openPage, runScenarios } from "./browser-kit.mjs";

// A guard for a stream that never ends: reported as such, never waited out on success.
const CLOSE_WITHIN_MS = 20000;

// In the page: an EventSource until the browser closes it for good (the run's end, then a
// reconnect answered 204; or a first answer that is no stream at all).
async function follow({ url, closeWithinMs }) {
  return await new Promise((resolve) => {
    const report = { ids: [], kinds: [], opens: 0, errors: 0, closed: false };
    const source = new EventSource(url);
    const finish = () => {
      source.close();
      resolve(report);
    };
    const timer = setTimeout(finish, closeWithinMs);
    source.addEventListener("open", () => {
      report.opens += 1;
    });
    source.addEventListener("message", (event) => {
      report.ids.push(Number(event.lastEventId));
      report.kinds.push(JSON.parse(event.data).kind);
    });
    source.addEventListener("error", () => {
      report.errors += 1;
      if (source.readyState === EventSource.CLOSED) {
        report.closed = true;
        clearTimeout(timer);
        finish();
      }
    });
  });
}

async function streamsScenario(browser, { page: pageUrl, follow: urls }) {
  const { page, network } = await openPage(browser, pageUrl, "streams");
  const result = {};
  for (const [name, url] of Object.entries(urls)) {
    const seen = await page.evaluate(follow, { url, closeWithinMs: CLOSE_WITHIN_MS });
    const path = new URL(url).pathname;
    seen.requests = network
      .filter((s) => new URL(s.url).pathname === path && s.url === url)
      .map(({ status, failure }) => ({ status, failure }));
    result[name] = seen;
  }
  await closePage("streams");
  return result;
}

await runScenarios(JSON.parse(process.argv[2]), { streams: streamsScenario });
