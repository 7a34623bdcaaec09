// What the ACP drivers share: the agent process on stdio, and the initialize handshake.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

// The agent command from the driver's arguments, started with its stdio as an ACP stream.
export function spawnAgent(script) {
  const [command, ...args] = process.argv.slice(2);
  if (!command) {
    console.error(`usage: node ${script} <agent command> [args…]`);
    process.exit(2);
  }
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"], env: process.env });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { child, stream };
}

export function initialize(agent, name) {
  return agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name, version: "1.0.0" },
  });
}

// Drive the agent with `body` and print its summary (or the error) as one JSON line on stdout;
// the exit code is 1 unless the summary says ok.
export async function drive(app, { child, stream }, body) {
  let summary;
  try {
    summary = await app.connectWith(stream, body);
  } catch (error) {
    summary = { ok: false, error: error instanceof Error ? error.message : String(error) };
  } finally {
    child.stdin.end();
    setTimeout(() => child.kill(), 3000).unref();
  }
  console.log(JSON.stringify(summary));
  process.exitCode = summary.ok ? 0 : 1;
}
