// Drives the web console (gateway/console) in headless Chromium on gateways serving one agent
// and several: the agent picker, runs started on the agent picked, and each run's agent in the
// list and in the run's view.
//
//   node console-agents.mjs '{"chromium": PATH, "artifacts": DIR, "timeoutMs": N, SCENARIO: {...}}'
//
// several: {gateway, runs: [[agent, prompt], …], approve: [agent, prompt]}: each prompt started
//          on its agent, picked in the picker, and an approval given in a run started so.
// one:     {gateway, runId}: the console of a gateway with one agent, holding the run `runId`.
//
// Prints one JSON object: what the console showed. The Python side
// (tests/agents/test_console_agents.py) asserts; this script only acts and observes.

import { closePage, openPage, runScenarios } from "./browser-kit.mjs";
import { startRun, text, waitForCompletion } from "./console-kit.mjs";

const config = JSON.parse(process.argv[2]);

const row = (id) => `#run-list li[data-run-id="${id}"]`;

// What the list and the run's view say of run `id`, once its row is there and the view has it.
async function shown(page, id) {
  await page.waitForSelector(row(id));
  await page.waitForFunction(() => document.getElementById("run-meta").textContent.includes(" run"));
  return {
    agent: await text(page, `${row(id)} .agent`),
    agentHidden: await page.$eval(`${row(id)} .agent`, (node) => node.hidden),
    prompt: await text(page, `${row(id)} .prompt`),
    meta: await text(page, "#run-meta"),
  };
}

const picker = (page) =>
  page.$eval("#agent", (select) => ({
    hidden: select.hidden,
    value: select.value,
    options: [...select.options].map((o) => ({ value: o.value, text: o.textContent, title: o.title })),
  }));

async function several(browser, { gateway, runs, approve }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-agents");
  await page.waitForSelector("#agent:not([hidden])");
  const report = { picker: await picker(page), served: {}, runs: [] };
  report.served[report.picker.value] = await text(page, "#served");

  for (const [agent, prompt] of runs) {
    await page.selectOption("#agent", agent);
    report.served[agent] = await text(page, "#served");
    const runId = await startRun(page, prompt);
    const stream = await waitForCompletion(page);
    report.runs.push({ agent, prompt, runId, stream, ...(await shown(page, runId)) });
  }

  // A tool call's approval in a run started on a picked agent: answered over AG-UI as ever.
  const [agent, prompt] = approve;
  await page.selectOption("#agent", agent);
  const approved = await startRun(page, prompt);
  const allow = '#stream [data-kind="permission_request"] button[data-decision="allow_once"]';
  await page.waitForSelector(allow);
  await page.click(allow);
  report.approval = { agent, runId: approved, stream: await waitForCompletion(page) };

  report.listed = await page.$$eval("#run-list li", (rows) =>
    rows.map((r) => ({ runId: r.dataset.runId, agent: r.querySelector(".agent").innerText })),
  );
  report.problems = problems;
  await closePage("console-agents");
  return report;
}

async function one(browser, { gateway, runId }) {
  const { page, problems } = await openPage(browser, `${gateway}/`, "console-one-agent");
  await page.waitForFunction(() => document.getElementById("served").textContent !== "");
  await page.click(row(runId));
  await waitForCompletion(page);
  const report = { picker: await picker(page), served: await text(page, "#served"), ...(await shown(page, runId)) };
  report.listClasses = await page.$eval("#run-list", (list) => [...list.classList]);
  report.problems = problems;
  await closePage("console-one-agent");
  return report;
}

await runScenarios(config, { several, one });
