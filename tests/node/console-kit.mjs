// What the console drivers (console-drive.mjs, console-agents.mjs) do alike: start a run from
// the prompt box, as a person does, and wait for its stream's end.

export const text = (page, selector) => page.$eval(selector, (node) => node.innerText);

export async function waitForCompletion(page, timeout = 30000) {
  await page.waitForSelector("#stream .ev.completion", { timeout });
  return await text(page, "#stream");
}

// Types the prompt and presses Enter; returns the id of the run the console switched to.
export async function startRun(page, prompt) {
  const before = await page.evaluate(() => window.loopgateConsole.runId);
  await page.fill("#prompt", prompt);
  await page.press("#prompt", "Enter");
  // The console switches to the run once it has started (AG-UI's RUN_STARTED, or POST /v1/runs).
  await page.waitForFunction((id) => window.loopgateConsole.runId && window.loopgateConsole.runId !== id, before);
  return await page.evaluate(() => window.loopgateConsole.runId);
}
