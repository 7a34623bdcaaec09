// Choose the agent of an ACP session with the real TypeScript client (@agentclientprotocol/sdk 2.x).
//
//   node agents-acp.mjs <command> [args…]   e.g. node agents-acp.mjs python -m loopgate acp -c FILE
//
// On a gateway serving two agents (coder, the default, and parrot): initialize → session/new
// (its configOptions) → a prompt → session/set_config_option agent=parrot → a prompt → an
// unknown agent (its error). Prints a JSON summary on stdout; exits 1 on any failure.

import * as acp from "@agentclientprotocol/sdk";
import { drive, initialize, spawnAgent } from "./acp-support.mjs";

const agentProcess = spawnAgent("agents-acp.mjs");
let chunks = [];

const app = acp
  .client({ name: "loopgate-node-agents" })
  .onRequest(acp.methods.client.session.requestPermission, async () => ({
    outcome: { outcome: "cancelled" },
  }))
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    const update = params.update;
    if (update.sessionUpdate === "agent_message_chunk") chunks.push(update.content.text);
  });

function agentOption(configOptions) {
  return configOptions.find((o) => o.id === "agent") ?? null;
}

await drive(app, agentProcess, async (agent) => {
  await initialize(agent, "node-test");
  const created = await agent.request(acp.methods.agent.session.new, {
    cwd: process.cwd(),
    mcpServers: [],
  });
  const { sessionId } = created;

  async function say(text) {
    chunks = [];
    const answer = await agent.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    return { stopReason: answer.stopReason, text: chunks.join("") };
  }

  const first = await say("plain hello");
  const switched = await agent.request(acp.methods.agent.session.setConfigOption, {
    sessionId,
    configId: "agent",
    value: "parrot",
  });
  const second = await say("hi from node");
  let refused = null;
  try {
    await agent.request(acp.methods.agent.session.setConfigOption, {
      sessionId,
      configId: "agent",
      value: "nobody",
    });
  } catch (error) {
    refused = { code: error.code, message: error.message, data: error.data };
  }
  return {
    ok: true,
    created: agentOption(created.configOptions),
    optionIds: created.configOptions.map((o) => o.id),
    first,
    switched: agentOption(switched.configOptions)?.currentValue ?? null,
    second,
    refused,
  };
});
