// Several principals on one gateway, through the real web clients: @ag-ui/client (over HTTP,
// and over the WebSocket binding as an AbstractAgent, as the console drives it), the `ai`
// package's DefaultChatTransport and Chat, and the `openai` package.
//
//   node matrix-clients.mjs '{"base": URL, "keys": {"alice": KEY, "bob": KEY, ...}}' [SCENARIO…]
//
// alice starts; bob, viewer and root try what a client can try on alice's runs and threads,
// and on ids that never existed. Prints one JSON object {scenario: what each client saw}; the
// Python side (tests/identity/test_matrix_web.py) asserts, this script only observes.

import { HttpAgent } from "@ag-ui/client";
import { DefaultChatTransport } from "ai";
import OpenAI from "openai";

import { SocketAgent, run as runAgui, runId, user as aguiUser } from "./agui-support.mjs";
import { caught, chatSummary, newChat, runAll, user as chatUser } from "./vercel-chat.mjs";

const config = JSON.parse(process.argv[2]);
const wanted = process.argv.slice(3);
const { base, keys } = config;
const bearer = (who) => ({ authorization: `Bearer ${keys[who]}` });
const ghost = (prefix) => `${prefix}-never-${process.pid}-${Math.random().toString(16).slice(2, 10)}`;

// --- AG-UI ---------------------------------------------------------------------------------

function httpAgent(who, threadId) {
  return new HttpAgent({ url: `${base}/agui`, threadId, headers: bearer(who) });
}

// AG-UI over /agui/ws (docs/agui.md): the token as ?token= (a browser can set no header on an
// upgrade).
function socketAgent(who, threadId, frame) {
  const url = `${base.replace("http", "ws")}/agui/ws?token=${encodeURIComponent(keys[who])}`;
  return new SocketAgent({ url, threadId, frame });
}

// What a client learns from one AG-UI request: its events (types, the terminal one, an error
// event's message and code) or the error the client threw.
async function turn(agent, params, text) {
  if (text) agent.addMessage(aguiUser(text));
  const result = await runAgui(agent, params);
  const errors = result.events.filter((e) => e.type === "RUN_ERROR");
  return {
    types: result.types,
    terminal: result.terminal,
    error: errors.length ? { message: errors[0].message, code: errors[0].code } : null,
    failed: result.failed,
    problems: result.problems,
  };
}

const attach = (id) => ({ runId: id, forwardedProps: { loopgate: { attach: true } } });
const approve = (interruptId) => ({
  runId: runId("approve"),
  resume: [{ interruptId, status: "resolved", payload: { decision: "allow_once" } }],
});
const answer = (interruptId) => ({
  runId: runId("answer"),
  resume: [{ interruptId, status: "resolved", payload: "option B" }],
});

function interruptsOf(summary) {
  return (summary.terminal?.outcome?.interrupts ?? []).map((i) => i.id);
}

async function aguiMatrix(agent) {
  // alice: one run waits for a tool approval, another asked her a question.
  const thread = ghost("t-alice");
  const waiting = runId("alice-waits");
  const started = await turn(agent("alice", thread), { runId: waiting }, "write note please");
  const askedThread = ghost("t-alice-ask");
  const asked = await turn(agent("alice", askedThread), { runId: runId("alice-asks") }, "ask user about my trip");
  const approval = interruptsOf(started)[0];
  const question = interruptsOf(asked)[0];
  const nobody = ghost("r");
  const out = { thread, waiting, started, asked, approval, question, nobody };

  for (const who of ["bob", "viewer"]) {
    const tries = {};
    tries.attach = await turn(agent(who, ghost("t")), attach(waiting));
    tries.attachNone = await turn(agent(who, ghost("t")), attach(nobody));
    tries.approve = await turn(agent(who, ghost("t")), approve(approval));
    tries.approveNone = await turn(agent(who, ghost("t")), approve(approval.replace(waiting, nobody)));
    tries.answer = await turn(agent(who, ghost("t")), answer(question), "resume it");
    tries.answerNone = await turn(
      agent(who, ghost("t")),
      answer(question.replace(question.split(":")[0], nobody)),
      "resume it",
    );
    tries.continue = await turn(agent(who, thread), { runId: runId(`${who}-cont`) }, "plain hello");
    out[who] = tries;
  }
  // bob on a thread nobody has: a run of his own, as on any new thread.
  out.bobFresh = await turn(agent("bob", ghost("t-bob")), { runId: runId("bob-fresh") }, "plain hello");
  // root watches alice's waiting run, and answers its approval: it runs to its end.
  out.rootAttach = await turn(agent("root", ghost("t")), attach(waiting));
  out.rootApprove = await turn(agent("root", ghost("t")), approve(approval));
  // alice answers her own question on her thread.
  out.aliceAnswer = await turn(agent("alice", askedThread), answer(question), "resume it");
  return out;
}

async function aguiSocketExtras() {
  // The binding's own {"type": "resume"} frame on alice's run, and on one nobody has.
  const thread = ghost("t-alice-ws");
  const waiting = runId("alice-ws-waits");
  const started = await turn(socketAgent("alice", thread), { runId: waiting }, "write note please");
  const nobody = ghost("r");
  // A 1.0 stream: one that ends at an approval, as the request it resumes did.
  const frame = (id) => ({ type: "resume", runId: id, received: 0, protocolVersion: "1.0" });
  const resume = await turn(socketAgent("bob", ghost("t"), frame(waiting)), {});
  const resumeNone = await turn(socketAgent("bob", ghost("t"), frame(nobody)), {});
  const rootResume = await turn(socketAgent("root", ghost("t"), frame(waiting)), {});
  const approval = interruptsOf(started)[0];
  const aliceApprove = await turn(socketAgent("alice", thread), approve(approval));
  return { waiting, nobody, started, resume, resumeNone, rootResume, aliceApprove };
}

// --- Vercel AI UI streams ------------------------------------------------------------------

function transport(who) {
  return new DefaultChatTransport({ api: `${base}/vercel`, headers: bearer(who) });
}

async function readUntil(reader, stop) {
  const types = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { types, found: null };
    types.push(value.type);
    if (stop(value)) return { types, found: value };
  }
}

async function reconnect(who, chatId) {
  try {
    const stream = await transport(who).reconnectToStream({ chatId });
    if (stream === null) return { stream: null };
    const reader = stream.getReader();
    const seen = await readUntil(reader, (c) => c.type === "tool-input-available");
    await reader.cancel();
    return { stream: seen.types };
  } catch (error) {
    return { thrown: caught(error) };
  }
}

async function send(who, chatId, text) {
  // The key on every request the chat's transport makes.
  const fetchAs = (url, init) =>
    fetch(url, { ...init, headers: { ...Object.fromEntries(new Headers(init.headers)), ...bearer(who) } });
  const { chat, seen } = newChat({ api: `${base}/vercel`, id: chatId, fetch: fetchAs });
  await chat.sendMessage({ text });
  return chatSummary(chat, { errors: seen.errors });
}

async function vercelMatrix() {
  // alice's chat has a run still going (a slow tool): the stream a reconnect would resume.
  const chatId = ghost("c-alice");
  const controller = new AbortController();
  const first = await transport("alice").sendMessages({
    chatId,
    trigger: "submit-message",
    messageId: undefined,
    messages: [chatUser("slow tool: take your time")],
    abortSignal: controller.signal,
  });
  const reader = first.getReader();
  const opened = await readUntil(reader, (c) => c.type === "tool-input-available");
  const nobody = ghost("c");
  const out = { chatId, nobody, opened: opened.types };
  for (const who of ["bob", "viewer"]) {
    out[who] = {
      reconnect: await reconnect(who, chatId),
      reconnectNone: await reconnect(who, nobody),
      send: await send(who, chatId, "plain hello"),
    };
  }
  out.bobFresh = await send("bob", ghost("c-bob"), "plain hello");
  out.rootReconnect = await reconnect("root", chatId);
  out.aliceReconnect = await reconnect("alice", chatId);
  // alice leaves: her run is cancelled, and her stream ends.
  controller.abort();
  await reader.cancel().catch(() => {});
  return out;
}

// --- OpenAI --------------------------------------------------------------------------------

function openai(who) {
  return new OpenAI({ baseURL: `${base}/v1`, apiKey: keys[who], maxRetries: 0 });
}

async function complete(who, extra = {}) {
  try {
    const { data, response } = await openai(who)
      .chat.completions.create({
        model: "loopgate-scripted",
        messages: [{ role: "user", content: "plain hello" }],
        ...extra,
      })
      .withResponse();
    return { content: data.choices[0].message.content, runId: response.headers.get("x-request-id") };
  } catch (error) {
    return {
      thrown: {
        class: error?.constructor?.name,
        status: error?.status ?? null,
        error: error?.error ?? null,
      },
    };
  }
}

async function openaiMatrix() {
  const alice = await complete("alice");
  // A completion's run is its own thread: continued by naming it (loopgate.thread_id).
  const thread = { loopgate: { thread_id: alice.runId } };
  return {
    alice,
    aliceContinues: await complete("alice", thread),
    bobContinues: await complete("bob", thread),
    bobFresh: await complete("bob", { loopgate: { thread_id: ghost("th") } }),
    viewer: await complete("viewer"),
    rootContinues: await complete("root", thread),
    viewerModels: (await openai("viewer").models.list()).data.map((m) => m.id),
  };
}

const scenarios = {
  aguiHttp: () => aguiMatrix(httpAgent),
  aguiSocket: () => aguiMatrix(socketAgent),
  aguiSocketFrames: aguiSocketExtras,
  vercel: vercelMatrix,
  openai: openaiMatrix,
};

const chosen = Object.fromEntries(
  Object.entries(scenarios).filter(([name]) => !wanted.length || wanted.includes(name)),
);
process.stdout.write(JSON.stringify(await runAll(chosen)));
