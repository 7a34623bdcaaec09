// The Vercel AI SDK's own client code (the `ai` package) reading loopgate's UI message streams.
//
//   node vercel-client.mjs offline DIR         every DIR/<recording>.sse, as loopgate renders it
//   node vercel-client.mjs live http://127.0.0.1:PORT
//
// Offline, each stream goes through the SDK's own consumers: DefaultChatTransport's parser
// (parseJsonEventStream with uiMessageChunkSchema; it throws on a chunk the schema refuses),
// readUIMessageStream (the message a client builds) and a Chat (useChat's core, AbstractChat)
// whose transport fetches the recording. Live, DefaultChatTransport and a Chat drive runs on a
// real gateway. Prints one JSON object, {name: summary}; a case that throws records what it
// threw ({crashed}). tests/vercel/ asserts on the summaries.

import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithToolCalls,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} from "ai";
import { caught, chatSummary, message, newChat, readUntil, runAll, user } from "./vercel-chat.mjs";

function bytesStream(bytes, size) {
  return new ReadableStream({
    start(controller) {
      for (let i = 0; i < bytes.length; i += size) controller.enqueue(bytes.subarray(i, i + size));
      controller.close();
    },
  });
}

async function collect(stream) {
  const out = [];
  for await (const item of stream) out.push(item);
  return out;
}

// --- offline: every recording, as loopgate renders it -------------------------------------

async function offline(dir) {
  const results = {};
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".sse")).sort()) {
    const name = file.slice(0, -4);
    try {
      results[name] = await checkRecording(readFileSync(join(dir, file)));
    } catch (error) {
      results[name] = { crashed: caught(error), stack: error?.stack };
    }
  }
  return results;
}

async function checkRecording(bytes) {
  const text = new TextDecoder().decode(bytes);
  // Split where no frame ends: the parser must join frames (and UTF-8) across reads.
  const parsed = await collect(
    parseJsonEventStream({ stream: bytesStream(bytes, 97), schema: uiMessageChunkSchema }),
  );
  const invalid = parsed.filter((r) => !r.success).map((r) => caught(r.error));
  const chunks = parsed.filter((r) => r.success).map((r) => r.value);

  // The transport's own reading of the body (it throws on the first chunk the schema refuses).
  const transport = new DefaultChatTransport();
  let transported = null;
  let transportError = null;
  try {
    transported = await collect(transport.processResponseStream(bytesStream(bytes, 4096)));
  } catch (error) {
    transportError = caught(error);
  }

  // The message a client builds; errors are kept, not thrown, to see the whole message.
  const messageErrors = [];
  let last = null;
  for await (const snapshot of readUIMessageStream({
    stream: bytesStream(bytes, 4096).pipeThrough(passThroughChunks(transport)),
    onError: (error) => messageErrors.push(caught(error)),
  })) {
    last = snapshot;
  }

  // useChat's core, its transport fetching the recording.
  const { chat, seen } = newChat({
    api: "http://offline.invalid/vercel",
    fetch: async () =>
      new Response(bytesStream(bytes, 4096), {
        headers: { "content-type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1" },
      }),
  });
  await chat.sendMessage({ text: "replayed" });

  return {
    types: chunks.map((c) => c.type),
    invalid,
    transported: transported?.length ?? null,
    transportError,
    endsWithDone: text.endsWith("data: [DONE]\n\n"),
    dataLines: text.split("\n").filter((l) => l.startsWith("data: ")).length,
    errorTexts: chunks.filter((c) => c.type === "error").map((c) => c.errorText),
    messageErrors,
    message: message(last),
    chat: chatSummary(chat, seen),
  };
}

function passThroughChunks(transport) {
  // The transport's parsing, as a transform from bytes to chunks.
  const { readable, writable } = new TransformStream();
  return { writable, readable: transport.processResponseStream(readable) };
}

// --- live: a real gateway -----------------------------------------------------------------

async function runEnd(base, runId) {
  // The run's native event stream ends with its terminal event: no polling.
  const response = await fetch(`${base}/v1/runs/${runId}/events`);
  const lines = (await response.text()).split("\n").filter((l) => l.startsWith("data: "));
  const completions = lines
    .map((l) => JSON.parse(l.slice(6)))
    .filter((e) => e.kind === "completion" && e.data.status !== "executing");
  return completions.length ? completions[completions.length - 1].data.status : null;
}

function live(base) {
  const api = `${base}/vercel`;
  const transport = new DefaultChatTransport({ api });
  return {
    async transport() {
      const stream = await transport.sendMessages({
        chatId: "v-transport",
        trigger: "submit-message",
        messageId: undefined,
        messages: [user("What time is it?")],
        abortSignal: undefined,
      });
      const [forChunks, forMessage] = stream.tee();
      const [chunks, snapshots] = await Promise.all([
        collect(forChunks),
        collect(readUIMessageStream({ stream: forMessage, terminateOnError: true })),
      ]);
      return {
        types: chunks.map((c) => c.type),
        start: chunks[0],
        finish: chunks.find((c) => c.type === "finish") ?? null,
        message: message(snapshots[snapshots.length - 1]),
      };
    },

    async chat() {
      const { chat, seen } = newChat({ api, id: "v-chat" });
      await chat.sendMessage({ text: "What time is it?" });
      await chat.sendMessage({ text: "What did I say?" });
      return chatSummary(chat, seen);
    },

    async clientTool() {
      const { chat, seen } = newChat({
        api,
        id: "v-client-tool",
        body: {
          tools: [
            {
              name: "confirm_booking",
              description: "Confirm the booking with the user's calendar",
              parameters: { type: "object", properties: { topic: { type: "string" } } },
            },
          ],
        },
        onToolCall: (chat, toolCall) => {
          if (toolCall.toolName === "confirm_booking") {
            // As the AI SDK's docs say: not awaited inside onToolCall.
            chat.addToolOutput({
              tool: "confirm_booking",
              toolCallId: toolCall.toolCallId,
              output: "booked: friday 10:00",
            });
          }
        },
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
      });
      await chat.sendMessage({ text: "client tool: confirm the booking for friday" });
      return chatSummary(chat, seen);
    },

    async failedRun() {
      const { chat, seen } = newChat({ api, id: "v-failed" });
      await chat.sendMessage({ text: "provider error, please" });
      return chatSummary(chat, seen);
    },

    async abortSignal() {
      const controller = new AbortController();
      const stream = await transport.sendMessages({
        chatId: "v-abort",
        trigger: "submit-message",
        messageId: undefined,
        messages: [user("slow tool: wait for it")],
        abortSignal: controller.signal,
      });
      const reader = stream.getReader();
      const { types, found } = await readUntil(reader, (c) => c.type === "tool-input-available");
      controller.abort();
      let afterAbort = null;
      try {
        await reader.read();
      } catch (error) {
        afterAbort = caught(error);
      }
      const runId = found?.messageMetadata?.loopgate?.runId;
      return { types, runId, afterAbort, serverStatus: await runEnd(base, runId) };
    },

    async stop() {
      // useChat's stop(), once the slow tool shows in the message (the loop runs it: the
      // chat's onToolCall is not called for it).
      let stopping = null;
      const { chat, seen } = newChat({
        api,
        id: "v-stop",
        onMessages: (messages) => {
          const last = messages[messages.length - 1];
          const slow = last?.parts.some((p) => p.type === "tool-sleep" && p.state === "input-available");
          if (slow && stopping === null) stopping = chat.stop();
        },
      });
      await chat.sendMessage({ text: "slow tool: then stop" });
      await stopping;
      const runId = seen.responses[0]?.runId;
      return { ...chatSummary(chat, seen), runId, serverStatus: await runEnd(base, runId) };
    },

    async reconnect() {
      const none = await transport.reconnectToStream({ chatId: "v-no-such-chat" });
      const controller = new AbortController();
      const first = await transport.sendMessages({
        chatId: "v-reconnect",
        trigger: "submit-message",
        messageId: undefined,
        messages: [user("slow tool: reconnect to me")],
        abortSignal: controller.signal,
      });
      const reader = first.getReader();
      const original = await readUntil(reader, (c) => c.type === "tool-input-available");
      const again = await transport.reconnectToStream({ chatId: "v-reconnect" });
      const replayReader = again.getReader();
      const replayed = await readUntil(replayReader, (c) => c.type === "tool-input-available");
      // The first client leaves: the run is cancelled, and the replay sees it end.
      controller.abort();
      const rest = await readUntil(replayReader, () => false);
      return {
        none,
        original: { types: original.types, start: original.found },
        replayed: { types: replayed.types, start: replayed.found },
        rest: rest.types,
      };
    },

    async multitask() {
      // One run per chat: the transport's `body` option carries loopgate.multitask_strategy.
      // A slow run holds the chat; reject is refused (409), interrupt cancels it and runs.
      const chatId = "v-multitask";
      const controller = new AbortController();
      const first = await new DefaultChatTransport({ api, body: { loopgate: { detached: true } } })
        .sendMessages({
          chatId,
          trigger: "submit-message",
          messageId: undefined,
          messages: [user("slow tool: hold the chat")],
          abortSignal: controller.signal,
        });
      const reader = first.getReader();
      const { found } = await readUntil(reader, (c) => c.type === "tool-input-available");
      const slowRunId = found?.messageMetadata?.loopgate?.runId ?? null;
      const send = (strategy) =>
        new DefaultChatTransport({ api, body: { loopgate: { multitask_strategy: strategy } } })
          .sendMessages({
            chatId,
            trigger: "submit-message",
            messageId: undefined,
            messages: [user("plain after the slow one")],
            abortSignal: undefined,
          });
      let rejected = null;
      try {
        await send("reject");
      } catch (error) {
        rejected = caught(error);
      }
      const interrupting = await collect(await send("interrupt"));
      const rest = await readUntil(reader, () => false);
      controller.abort();
      return {
        slowRunId,
        rejected,
        interrupted: interrupting.map((c) => c.type),
        slowEnd: rest.types.slice(-2),
        slowStatus: await runEnd(base, slowRunId),
      };
    },

    async badRequest() {
      try {
        await transport.sendMessages({
          chatId: "v-bad",
          trigger: "submit-message",
          messageId: undefined,
          messages: [],
          abortSignal: undefined,
        });
        return { thrown: null };
      } catch (error) {
        return { thrown: caught(error) };
      }
    },
  };
}

const [mode, target] = process.argv.slice(2);
const results = mode === "offline" ? await offline(target) : await runAll(live(target));
process.stdout.write(JSON.stringify(results));
