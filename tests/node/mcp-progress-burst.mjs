// The official MCP TypeScript SDK's client calls `run` with an onprogress callback, several
// times; each run (the scripted model, no pacing) emits its events in one burst right before
// its result. On stdio it starts `loopgate mcp` itself; over streamable HTTP it connects to a
// gateway's URL. Usage: node mcp-progress-burst.mjs CONFIG_JSON where CONFIG_JSON is
// {command, args, env, cwd, calls, prompt} or {url, calls, prompt}. Prints a JSON summary
// {ok, runs: [{runId, progress: [...], messages: [...], log}], errors, clientErrors}; `log` is
// the run's event log (resources/read), for the caller to project. Exit code 1 on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const config = JSON.parse(process.argv[2]);
const errors = [];
const clientErrors = [];

const transport = config.url
  ? new StreamableHTTPClientTransport(new URL(config.url))
  : new StdioClientTransport({
      command: config.command,
      args: config.args,
      env: config.env,
      cwd: config.cwd,
      stderr: "inherit",
    });
const client = new Client({ name: "mcp-progress-burst", version: "1.0.0" });
client.onerror = (error) => clientErrors.push(String(error?.message ?? error));
await client.connect(transport);

const runs = [];
for (let i = 0; i < config.calls; i++) {
  const seen = [];
  const result = await client.callTool(
    { name: "run", arguments: { prompt: config.prompt } },
    undefined,
    { onprogress: (p) => seen.push(p) },
  );
  const runId = result._meta?.loopgate?.runId;
  if (!runId) {
    errors.push(`call ${i}: no runId in the result: ${JSON.stringify(result)}`);
    continue;
  }
  const read = await client.readResource({ uri: `loopgate://runs/${runId}/events` });
  runs.push({
    runId,
    progress: seen.map((p) => p.progress),
    messages: seen.map((p) => p.message ?? ""),
    text: result.content?.[0]?.text,
    log: read.contents[0].text,
  });
}
if (clientErrors.length) errors.push(`the client reported ${clientErrors.length} errors`);
console.log(JSON.stringify({ ok: errors.length === 0, runs, errors, clientErrors }));
await client.close();
process.exit(errors.length ? 1 : 0);
