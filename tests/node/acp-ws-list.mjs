// The TypeScript ACP SDK (@agentclientprotocol/sdk 2.x) on the gateway's `/acp` WebSocket, with an
// API key in the upgrade's Authorization header (its experimental ws-client over `ws`).
//
//   node acp-ws-list.mjs <ws url> <key> new <cwd>         → {"ok":true,"sessionId":…}
//   node acp-ws-list.mjs <ws url> <key> list <cwd>        → {"ok":true,"sessions":[ids…]}
//   node acp-ws-list.mjs <ws url> <key> load <sessionId>  → {"ok":true,"error":{code,message}}
//
// Prints one JSON line on stdout; exits 1 on any failure.

import * as acp from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";
import { initialize } from "./acp-support.mjs";

const [url, key, command, arg] = process.argv.slice(2);
if (!url || !key || !command || !arg) {
  console.error("usage: node acp-ws-list.mjs <ws url> <key> new|list|load <arg>");
  process.exit(2);
}

const app = acp
  .client({ name: "loopgate-node-identity" })
  .onNotification(acp.methods.client.session.update, async () => {});
const stream = createWebSocketStream(url, {
  WebSocket,
  headers: { authorization: `Bearer ${key}` },
});

let summary;
try {
  summary = await app.connectWith(stream, async (agent) => {
    await initialize(agent, "node-identity");
    if (command === "new") {
      const made = await agent.request(acp.methods.agent.session.new, { cwd: arg, mcpServers: [] });
      return { ok: true, sessionId: made.sessionId };
    }
    if (command === "list") {
      const listed = await agent.request(acp.methods.agent.session.list, { cwd: arg });
      return { ok: true, sessions: listed.sessions.map((s) => s.sessionId) };
    }
    if (command === "load") {
      try {
        await agent.request(acp.methods.agent.session.load, {
          sessionId: arg,
          cwd: "/",
          mcpServers: [],
        });
        return { ok: false, error: "session/load was answered" };
      } catch (error) {
        return { ok: true, error: { code: error.code, message: error.message } };
      }
    }
    return { ok: false, error: `unknown command ${command}` };
  });
} catch (error) {
  summary = { ok: false, error: error instanceof Error ? error.message : String(error) };
}
console.log(JSON.stringify(summary));
process.exitCode = summary.ok ? 0 : 1;
process.exit();
