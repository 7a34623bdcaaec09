// Attachments from the real web clients to a live loopgate (tests/attachments/test_node_clients.py):
// @ag-ui/client's HttpAgent with image and document parts, and the `ai` package's Chat with
// sendMessage({ files }). Each sends a PNG and a text file, then a second message on the same
// thread, whose history carries the first one's attachments back.
//
//   node attachments.mjs http://127.0.0.1:PORT PNG_BASE64 TEXT_BASE64
//
// Prints {scenario: summary}; the Python side checks the hashes the loop answered with.

import { main, newAgent, run, runId, user } from "./agui-support.mjs";
import { HttpAgent } from "@ag-ui/client";
import { chatSummary, newChat } from "./vercel-chat.mjs";

const [base, png, notes] = process.argv.slice(2);

function said(summary) {
  return summary.events
    .filter((e) => e.type === "TEXT_MESSAGE_CONTENT")
    .map((e) => e.delta)
    .join("");
}

function aguiMessage(text) {
  return {
    id: `u-${runId("m")}`,
    role: "user",
    content: [
      { type: "text", text },
      { type: "image", source: { type: "data", value: png, mimeType: "image/png" } },
      { type: "document", source: { type: "data", value: notes, mimeType: "text/plain" } },
    ],
  };
}

const files = [
  { type: "file", mediaType: "image/png", filename: "dot.png", url: `data:image/png;base64,${png}` },
  { type: "file", mediaType: "text/plain", filename: "notes.txt", url: `data:text/plain;base64,${notes}` },
];

const scenarios = {
  async agui() {
    const agent = newAgent(base, `t-attach-${process.pid}`);
    agent.addMessage(aguiMessage("what is this?"));
    const first = await run(agent, { runId: runId("attach") });
    agent.addMessage(user("and now?"));
    const second = await run(agent, { runId: runId("attach") });
    return { first: said(first), second: said(second), terminal: second.terminal?.type, failed: first.failed };
  },

  async aguiRefused() {
    const agent = new HttpAgent({ url: `${base}/agents/plain/agui`, threadId: `t-plain-${process.pid}` });
    agent.addMessage(aguiMessage("what is this?"));
    const refused = await run(agent, { runId: runId("plain") });
    return { failed: refused.failed, terminal: refused.terminal };
  },

  async vercel() {
    const { chat, seen } = newChat({ api: `${base}/vercel`, id: `c-attach-${process.pid}` });
    await chat.sendMessage({ text: "what is this?", files });
    await chat.sendMessage({ text: "and now?" });
    const summary = chatSummary(chat, seen);
    const answers = chat.messages
      .filter((m) => m.role === "assistant")
      .map((m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join(""));
    return { answers, error: summary.error, sentParts: seen.requests[0].messages[0].parts.map((p) => p.type) };
  },

  async vercelRefused() {
    const { chat, seen } = newChat({ api: `${base}/agents/plain/vercel`, id: `c-plain-${process.pid}` });
    await chat.sendMessage({ text: "what is this?", files });
    return { error: chatSummary(chat, seen).error, status: seen.responses[0]?.status ?? null };
  },
};

await main(scenarios, []);
