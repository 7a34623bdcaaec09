// Drives a live loopgate server's /v1/chat/completions with the official `openai` npm client.
//
//   node openai-client.mjs http://127.0.0.1:PORT [TOKEN]
//
// Runs every scenario and prints one JSON object: {scenario: summary}. A scenario that throws
// records what it threw ({crashed}); the Python side (tests/openai/test_node_client.py)
// asserts on the summaries.

import OpenAI from "openai";

const base = process.argv[2];
// The gateway's token, when it has one: the SDK sends its API key as the bearer token.
const apiKey = process.argv[3] ?? "unused";
// No retries: a request that fails must fail once, where the test can see it.
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 });
const MODEL = "loopgate-scripted";
const BOOKING = {
  type: "function",
  function: {
    name: "confirm_booking",
    description: "Confirm the booking with the user's calendar",
    parameters: { type: "object", properties: { topic: { type: "string" } } },
  },
};

function caught(error) {
  return {
    class: error?.constructor?.name,
    isAPIError: error instanceof OpenAI.APIError,
    status: error?.status ?? null,
    message: error?.message,
    error: error?.error ?? null,
  };
}

const scenarios = {
  async models() {
    const page = await client.models.list();
    return { ids: page.data.map((m) => m.id), objects: page.data.map((m) => m.object) };
  },

  async nonStream() {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "What time is it?" }],
    });
    const choice = completion.choices[0];
    return {
      object: completion.object,
      id: completion.id,
      content: choice.message.content,
      reasoning: choice.message.reasoning_content ?? null,
      finish: choice.finish_reason,
      usage: completion.usage,
      events: (completion.loopgate?.events ?? []).map((e) => e.kind),
    };
  },

  async stream() {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "What time is it?" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const withChoice = chunks.filter((c) => c.choices.length > 0);
    const last = chunks[chunks.length - 1];
    return {
      count: chunks.length,
      objects: [...new Set(chunks.map((c) => c.object))],
      firstRole: withChoice[0]?.choices[0].delta.role ?? null,
      content: withChoice.map((c) => c.choices[0].delta.content ?? "").join(""),
      reasoning: withChoice.map((c) => c.choices[0].delta.reasoning_content ?? "").join(""),
      finish: withChoice.map((c) => c.choices[0].finish_reason).filter((f) => f !== null),
      lastChoices: last.choices.length,
      usage: last.usage ?? null,
      serverTools: chunks
        .filter((c) => c.loopgate?.kind === "tool_call_start")
        .map((c) => c.loopgate.data.name),
    };
  },

  async streamHelper() {
    // The SDK's own accumulator of chunks into a completion.
    const stream = client.chat.completions.stream({
      model: MODEL,
      messages: [{ role: "user", content: "think about the sky" }],
      stream_options: { include_usage: true },
    });
    const final = await stream.finalChatCompletion();
    return {
      content: final.choices[0].message.content,
      finish: final.choices[0].finish_reason,
      usage: final.usage ?? null,
    };
  },

  async clientTool() {
    const messages = [{ role: "user", content: "client tool: confirm the booking for friday" }];
    const first = await client.chat.completions.create({
      model: MODEL,
      messages,
      tools: [BOOKING],
    });
    const asked = first.choices[0].message;
    messages.push(asked);
    for (const call of asked.tool_calls ?? []) {
      messages.push({ role: "tool", tool_call_id: call.id, content: "booked: friday 10:00" });
    }
    const second = await client.chat.completions.create({ model: MODEL, messages, tools: [BOOKING] });
    return {
      firstFinish: first.choices[0].finish_reason,
      calls: (asked.tool_calls ?? []).map((c) => ({
        id: c.id,
        type: c.type,
        name: c.function.name,
        arguments: JSON.parse(c.function.arguments),
      })),
      secondFinish: second.choices[0].finish_reason,
      answer: second.choices[0].message.content,
    };
  },

  async clientToolStreamed() {
    // The SDK runs the tool itself: a streamed tool call, its result sent back, the answer.
    const ran = [];
    const runner = client.chat.completions.runTools({
      model: MODEL,
      messages: [{ role: "user", content: "client tool: confirm the booking for monday" }],
      stream: true,
      tools: [
        {
          type: "function",
          function: {
            ...BOOKING.function,
            parse: JSON.parse,
            function: (args) => {
              ran.push(args);
              return "booked: monday 09:30";
            },
          },
        },
      ],
    });
    const answer = await runner.finalContent();
    return { ran, answer, messages: runner.messages.map((m) => m.role) };
  },

  async badModel() {
    try {
      await client.chat.completions.create({
        model: "gpt-none",
        messages: [{ role: "user", content: "hi" }],
      });
      return { threw: false };
    } catch (error) {
      return caught(error);
    }
  },

  async badBody() {
    try {
      await client.chat.completions.create({ model: MODEL, messages: [{ role: "wizard", content: "hi" }] });
      return { threw: false };
    } catch (error) {
      return caught(error);
    }
  },

  async wrongKey() {
    const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong-key", maxRetries: 0 });
    try {
      await wrong.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
      return { threw: false };
    } catch (error) {
      return caught(error);
    }
  },

  async unknownRoute() {
    try {
      await client.embeddings.create({ model: MODEL, input: "hi" });
      return { threw: false };
    } catch (error) {
      return caught(error);
    }
  },

  async failedStream() {
    const seen = [];
    try {
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "provider error, please" }],
        stream: true,
      });
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? "");
      return { threw: false };
    } catch (error) {
      return { ...caught(error), text: seen.join("") };
    }
  },
};

const results = {};
for (const [name, scenario] of Object.entries(scenarios)) {
  try {
    results[name] = await scenario();
  } catch (error) {
    results[name] = { crashed: String(error?.stack ?? error) };
  }
}
process.stdout.write(JSON.stringify(results));
