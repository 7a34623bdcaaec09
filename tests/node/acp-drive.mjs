// Drive `loopgate acp` with the real TypeScript client (@agentclientprotocol/sdk 2.x).
//
//   node acp-drive.mjs <command> [args…]     e.g. node acp-drive.mjs python -m loopgate acp
//
// initialize → session/new → a prompt with a tool round → a prompt whose tool asks for
// permission (answered allow_once) → a slow prompt cancelled mid-tool (must answer
// "cancelled"). Prints a JSON summary on stdout; exits 1 on any failure.

import * as acp from "@agentclientprotocol/sdk";
import { drive, initialize, spawnAgent } from "./acp-support.mjs";

const agentProcess = spawnAgent("acp-drive.mjs");
const updates = [];
const permissions = [];
let onUpdate = () => {};

const app = acp
  .client({ name: "loopgate-node-test" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    permissions.push(params);
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    updates.push(params.update);
    onUpdate(params.update);
  });

function fail(message) {
  throw new Error(message);
}

await drive(app, agentProcess, async (agent) => {
  const init = await initialize(agent, "node-test");
  if (init.protocolVersion !== acp.PROTOCOL_VERSION) fail(`version ${init.protocolVersion}`);
  const { sessionId } = await agent.request(acp.methods.agent.session.new, {
    cwd: process.cwd(),
    mcpServers: [],
  });

  const tool = await agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "one tool: 3 and 4" }],
  });
  if (tool.stopReason !== "end_turn") fail(`tool round ended with ${tool.stopReason}`);
  const kinds = updates.map((u) => u.sessionUpdate);
  for (const kind of ["agent_thought_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]) {
    if (!kinds.includes(kind)) fail(`no ${kind} update`);
  }

  const asked = await agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "write note from node" }],
  });
  if (asked.stopReason !== "end_turn") fail(`permission prompt ended with ${asked.stopReason}`);
  if (permissions.length !== 1) fail(`${permissions.length} permission requests`);

  const toolStarted = new Promise((resolve) => {
    onUpdate = (u) => {
      if (u.sessionUpdate === "tool_call" && u.title.startsWith("sleep")) resolve();
    };
  });
  const slow = agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "slow tool please" }],
  });
  await toolStarted;
  await agent.notify(acp.methods.agent.session.cancel, { sessionId });
  const cancelled = await slow;
  if (cancelled.stopReason !== "cancelled") fail(`cancel answered ${cancelled.stopReason}`);

  return {
    ok: true,
    updates: updates.length,
    kinds: [...new Set(updates.map((u) => u.sessionUpdate))].sort(),
    stopReasons: [tool.stopReason, asked.stopReason, cancelled.stopReason],
    permissionOptions: permissions[0].options.map((o) => o.optionId),
  };
});
