// Several agents on one gateway through the real web clients, each addressing an agent by its
// path as they address any agent by URL: @ag-ui/client's HttpAgent on /agents/NAME/agui, the
// WebSocket binding (a SocketAgent) on /agents/NAME/agui/ws, and the `ai` package's Chat
// (useChat's core) and DefaultChatTransport on /agents/NAME/vercel.
//
//   node agents-web.mjs http://127.0.0.1:PORT [SCENARIO…]
//
// Prints one JSON object {scenario: what the client saw}; tests/agents/test_web_clients.py
// asserts (and asks the gateway which agent ran each run), this script only observes.

import { HttpAgent } from "@ag-ui/client";
import { DefaultChatTransport } from "ai";

import { SocketAgent, main, run, runId, user } from "./agui-support.mjs";
import { caught, chatSummary, newChat, readUntil, user as chatUser } from "./vercel-chat.mjs";

const base = process.argv[2];
const thread = (name) => `${name}-${process.pid}`;

function httpAgent(path, threadId) {
  return new HttpAgent({ url: `${base}${path}`, threadId });
}

function socketAgent(path, threadId) {
  return new SocketAgent({ url: `${base.replace("http", "ws")}${path}`, threadId });
}

// One turn: the prompt added to the agent's messages, a run with an id of ours.
async function turn(agent, text) {
  agent.addMessage(user(text));
  const id = runId("agents");
  return { runId: id, ...(await run(agent, { runId: id })) };
}

function chatAt(path, id) {
  return newChat({ api: `${base}${path}`, id: thread(id) });
}

async function chatTurn(path, id, text) {
  const { chat, seen } = chatAt(path, id);
  await chat.sendMessage({ text });
  return chatSummary(chat, seen);
}

const scenarios = {
  aguiCoder: () => turn(httpAgent("/agents/coder/agui", thread("t-coder")), "plain hello coder"),

  aguiParrot: () => turn(httpAgent("/agents/parrot/agui", thread("t-parrot")), "hello parrot"),

  async aguiThread() {
    // A thread begun on parrot's path: /agui (no agent named) goes on with the thread's
    // agent; coder's path takes the thread over.
    const id = thread("t-handover");
    const first = await turn(httpAgent("/agents/parrot/agui", id), "first words");
    const plain = httpAgent("/agui", id);
    plain.setMessages(first.messages);
    const second = await turn(plain, "second words");
    const coder = httpAgent("/agents/coder/agui", id);
    coder.setMessages(second.messages);
    const third = await turn(coder, "plain third words");
    return { first, second, third };
  },

  aguiSocket: () => turn(socketAgent("/agents/parrot/agui/ws", thread("t-socket")), "hello socket"),

  aguiUnknown: () => turn(httpAgent("/agents/nobody/agui", thread("t-nobody")), "anyone there?"),

  aguiSocketUnknown: () =>
    turn(socketAgent("/agents/nobody/agui/ws", thread("t-nobody-ws")), "anyone there?"),

  vercelCoder: () => chatTurn("/agents/coder/vercel", "v-coder", "plain hello coder"),

  vercelParrot: () => chatTurn("/agents/parrot/vercel", "v-parrot", "hello parrot"),

  vercelUnknown: () => chatTurn("/agents/nobody/vercel", "v-nobody", "anyone there?"),

  async vercelReconnect() {
    // The transport reconnects at `${api}/${chatId}/stream`: under the agent's path.
    const transport = new DefaultChatTransport({ api: `${base}/agents/coder/vercel` });
    const chatId = thread("v-reconnect");
    const controller = new AbortController();
    const first = await transport.sendMessages({
      chatId,
      trigger: "submit-message",
      messageId: undefined,
      messages: [chatUser("slow tool: reconnect to me")],
      abortSignal: controller.signal,
    });
    const reader = first.getReader();
    const original = await readUntil(reader, (c) => c.type === "tool-input-available");
    const again = (await transport.reconnectToStream({ chatId })).getReader();
    const replayed = await readUntil(again, (c) => c.type === "tool-input-available");
    controller.abort(); // the first client leaves: its run is cancelled
    await again.cancel();
    // A chat whose run has ended: nothing to resume (null, from a 204).
    const parrot = chatAt("/agents/parrot/vercel", "v-parrot-done");
    await parrot.chat.sendMessage({ text: "hello" });
    const done = await new DefaultChatTransport({ api: `${base}/agents/parrot/vercel` })
      .reconnectToStream({ chatId: thread("v-parrot-done") });
    let unknown = null;
    try {
      await new DefaultChatTransport({ api: `${base}/agents/nobody/vercel` }).reconnectToStream({ chatId });
    } catch (error) {
      unknown = caught(error);
    }
    return {
      original: { types: original.types, start: original.found },
      replayed: { types: replayed.types, start: replayed.found },
      finished: { chat: chatSummary(parrot.chat, parrot.seen), reconnect: done },
      unknown,
    };
  },
};

await main(scenarios, process.argv.slice(3));
