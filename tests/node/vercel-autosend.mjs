// useChat's automatic resend against a live gateway: the `ai` package's own Chat (AbstractChat)
// and DefaultChatTransport, with `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls`
// as docs/vercel.md recommends, counting the requests the transport makes for one message.
//
//   node vercel-autosend.mjs reference http://127.0.0.1:PORT   the embedded (scripted) model
//   node vercel-autosend.mjs one-round http://127.0.0.1:PORT   tests/vercel/one_round_loop.py
//
// The AI SDK resends the conversation when the last step's tool calls that the client runs
// (those without providerExecuted) all have their output: a loop's own tool call that reads as
// the client's makes every answer a new request, without end (vercel-chat.mjs refuses the
// requests past its bound, so a case that loops ends with that error). Prints one JSON object,
// {name: summary}; tests/vercel/test_autosend.py asserts on the summaries.

import { lastAssistantMessageIsCompleteWithToolCalls } from "ai";
import { chatSummary, newChat, runAll } from "./vercel-chat.mjs";

const CLIENT_TOOL = {
  name: "confirm_booking",
  description: "Confirm the booking with the user's calendar",
  parameters: { type: "object", properties: { topic: { type: "string" } } },
};

// One chat with the recommended resend rule, sent `texts` one after the other; each
// sendMessage returns once the chat has settled, automatic requests included.
async function said(base, id, texts, options = {}) {
  const { chat, seen } = newChat({
    api: `${base}/vercel`,
    id,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    ...options,
  });
  for (const text of texts) await chat.sendMessage({ text });
  return chatSummary(chat, seen);
}

const reference = (base) => ({
  oneTool: () => said(base, "a-one-tool", ["one tool: what is 17 times 23"]),
  twoTools: () => said(base, "a-two-tools", ["What time is it, and what is 25 * 16 + 2?"]),
  // The question, then the user's answer: the next message, sent as any message is.
  askUser: () => said(base, "a-ask-user", ["ask user: plan my trip", "B, please"]),
  forever: () => said(base, "a-forever", ["forever"], { body: { loopgate: { config: { max_rounds: 3 } } } }),
  clientTool: () =>
    said(base, "a-client-tool", ["client tool: confirm the booking for friday"], {
      body: { tools: [CLIENT_TOOL] },
      onToolCall: (chat, toolCall) => {
        if (toolCall.toolName === CLIENT_TOOL.name) {
          // As the AI SDK's docs say: not awaited inside onToolCall.
          chat.addToolOutput({ tool: CLIENT_TOOL.name, toolCallId: toolCall.toolCallId, output: "booked" });
        }
      },
    }),
});

// A tool call and the answer in one step: every call of the step has its output.
const oneRound = (base) => ({ oneRound: () => said(base, "a-one-round", ["look it up"]) });

const [mode, base] = process.argv.slice(2);
const cases = { reference, "one-round": oneRound }[mode];
process.stdout.write(JSON.stringify(await runAll(cases(base))));
