// What every browser driver here shares: headless Chromium, pages that are screenshotted
// before they close (and at a failure), and the run of a driver's scenarios.
//
// A driver is called as `node DRIVER.mjs CONFIG_JSON`; CONFIG has `chromium` (the executable),
// `artifacts` (where screenshots go), `timeoutMs` (the deadline) and one key per scenario to
// run, whose value is that scenario's own config. It prints one JSON object, the report of each
// scenario by name; on any failure it screenshots every open page and exits 1.

import { mkdir } from "node:fs/promises";

import { chromium } from "playwright-core";

let artifacts = ".";

// Requests the browser sent from a page (preflights are not page requests: Chromium makes
// them in its network service) and the statuses that came back.
export function watchNetwork(page) {
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

// The pages not yet screenshotted and closed, by name: what a failure leaves to screenshot.
const openPages = new Map();
const screenshots = [];

async function screenshot(name, page) {
  const path = `${artifacts}/${name}.png`;
  try {
    await page.screenshot({ path, fullPage: true });
    screenshots.push(path);
  } catch (error) {
    process.stderr.write(`no screenshot of page ${name}: ${error.message}\n`);
  }
}

export async function openPage(browser, url, name) {
  const page = await browser.newPage();
  openPages.set(name, page);
  const network = watchNetwork(page);
  const console_ = [];
  // Errors and warnings the page logged, and exceptions nothing caught.
  const problems = [];
  page.on("console", (message) => {
    console_.push(message.text());
    if (["error", "warning"].includes(message.type())) {
      problems.push(`${message.type()}: ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => problems.push(`uncaught: ${error.message}`));
  await page.goto(url);
  return { page, network, console: console_, problems };
}

// Screenshotted, then closed: each page's last picture is kept, pass or fail.
export async function closePage(name) {
  const page = openPages.get(name);
  if (!page) return;
  openPages.delete(name);
  await screenshot(name, page);
  await page.close();
}

async function screenshotOpenPages() {
  const pages = [...openPages.entries()];
  openPages.clear();
  await Promise.all(pages.map(([name, page]) => screenshot(`${name}-at-failure`, page)));
}


// Runs the scenarios `config` names (at once, each on its own pages) and prints the report.
// `scenarios` maps a name to `async (browser, itsConfig) => report`.
export async function runScenarios(config, scenarios) {
  artifacts = config.artifacts;
  await mkdir(artifacts, { recursive: true });
  const browser = await chromium.launch({ executablePath: config.chromium, headless: true });

  const fail = async (errors) => {
    await screenshotOpenPages();
    for (const error of errors) process.stderr.write(`${error?.stack ?? error}\n`);
    process.stderr.write(`screenshots: ${screenshots.join(" ") || "none"}\n`);
    process.exitCode = 1;
  };

  // Before the Python side's own timeout would kill this process with no picture of the page.
  const deadline = setTimeout(async () => {
    await fail([new Error(`the browser steps took longer than ${config.timeoutMs} ms`)]);
    await browser.close().catch(() => {});
    process.exit(1);
  }, config.timeoutMs);

  try {
    const report = {};
    const outcomes = await Promise.allSettled(
      Object.entries(scenarios)
        .filter(([name]) => config[name])
        .map(async ([name, scenario]) => {
          report[name] = await scenario(browser, config[name]);
        }),
    );
    const errors = outcomes.filter((o) => o.status === "rejected").map((o) => o.reason);
    if (errors.length) {
      await fail(errors);
    } else {
      report.screenshots = screenshots;
      console.log(JSON.stringify(report));
    }
  } finally {
    clearTimeout(deadline);
    await browser.close();
  }
}
