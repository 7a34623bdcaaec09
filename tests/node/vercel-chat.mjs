// useChat's core without React, for the Node scripts that drive loopgate with the `ai` package:
// a Chat (AbstractChat over a plain state) whose DefaultChatTransport goes through a fetch that
// records every request and response, and summaries of what the chat ends up holding.

import { AbstractChat, DefaultChatTransport } from "ai";

// More requests than a chat in these scripts ever needs: a chat that resends on its own
// (sendAutomaticallyWhen) without end is stopped here, and the count shows it.
export const MAX_REQUESTS = 6;

class State {
  constructor(onChange) {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
    this.onChange = onChange;
  }
  set(messages) {
    this.messages = messages;
    this.onChange?.(messages);
  }
  pushMessage = (message) => this.set(this.messages.concat(message));
  popMessage = () => this.set(this.messages.slice(0, -1));
  replaceMessage = (index, message) =>
    this.set([...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)]);
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor({ onMessages, ...init }) {
    super({ ...init, state: new State(onMessages) });
  }
}

export function caught(error) {
  return {
    name: error?.constructor?.name ?? null,
    message: String(error?.message ?? error),
    statusCode: error?.statusCode ?? null,
  };
}

const SHOWN = ["state", "text", "toolCallId", "toolName", "input", "output", "errorText", "providerExecuted", "id", "data"];

export function part(p) {
  const shown = { type: p.type };
  for (const key of SHOWN) {
    if (p[key] !== undefined) shown[key] = p[key];
  }
  if (p.type === "steering-message") shown.text = p.parts.map((x) => x.text).join("");
  return shown;
}

export function message(m) {
  return m ? { id: m.id, role: m.role, metadata: m.metadata ?? null, parts: m.parts.map(part) } : null;
}

export function user(text, id = "u1") {
  return { id, role: "user", parts: [{ type: "text", text }] };
}

export function chatSummary(chat, seen) {
  return {
    status: chat.status,
    error: chat.error ? caught(chat.error) : null,
    messages: chat.messages.map(message),
    ...seen,
  };
}

// A Chat whose transport goes through `fetch`; every request body and response it saw is kept,
// and a request past MAX_REQUESTS is refused (the chat's error) instead of sent.
export function newChat({ api, fetch = globalThis.fetch, body, onToolCall, onMessages, sendAutomaticallyWhen, id }) {
  const seen = { requests: [], responses: [], toolCalls: [], data: [], finishes: [], errors: [] };
  const recording = async (url, init) => {
    seen.requests.push(JSON.parse(init.body));
    if (seen.requests.length > MAX_REQUESTS) {
      throw new Error(`request ${seen.requests.length} refused: more than ${MAX_REQUESTS}`);
    }
    const response = await fetch(url, init);
    seen.responses.push({
      status: response.status,
      stream: response.headers.get("x-vercel-ai-ui-message-stream"),
      runId: response.headers.get("x-loopgate-run-id"),
      contentType: response.headers.get("content-type"),
    });
    return response;
  };
  const chat = new Chat({
    id,
    transport: new DefaultChatTransport({ api, fetch: recording, body }),
    onMessages,
    onToolCall: async ({ toolCall }) => {
      seen.toolCalls.push({ toolName: toolCall.toolName, toolCallId: toolCall.toolCallId, input: toolCall.input });
      if (onToolCall) onToolCall(chat, toolCall);
    },
    onData: (dataPart) => seen.data.push({ type: dataPart.type, transient: dataPart.transient ?? false }),
    onFinish: ({ finishReason, isAbort, isError }) => seen.finishes.push({ finishReason: finishReason ?? null, isAbort, isError }),
    onError: (error) => seen.errors.push(caught(error)),
    sendAutomaticallyWhen,
  });
  return { chat, seen };
}

// Each case in turn; one that throws records what it threw ({crashed}).
export async function runAll(cases) {
  const results = {};
  for (const [name, run] of Object.entries(cases)) {
    try {
      results[name] = await run();
    } catch (error) {
      results[name] = { crashed: caught(error), stack: error?.stack };
    }
  }
  return results;
}

// Chunks from a UI message stream's reader until one meets `predicate` (`hit`) or the stream
// ends: their types, and the first `start` chunk (`found`).
export async function readUntil(reader, predicate) {
  const types = [];
  let found = null;
  while (true) {
    const { done, value } = await reader.read();
    if (done) return { types, found };
    types.push(value.type);
    if (value.type === "start") found = found ?? value;
    if (predicate(value)) return { types, found, hit: value };
  }
}
