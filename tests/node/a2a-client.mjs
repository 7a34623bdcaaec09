// Drives loopgate's A2A server with @a2a-js/sdk's client: the card discovered at
// /.well-known/agent-card.json, then a task streamed over each binding (JSON-RPC, HTTP+JSON).
// Usage: node a2a-client.mjs http://127.0.0.1:PORT
// Prints {binding: {cases, states, answer, taskId, fetched, errors}}; exit code 1 on a crash.
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const base = process.argv[2];
const out = {};

async function drive(name, transport) {
  const summary = { cases: [], states: [], answer: "", taskId: null, fetched: null, errors: [] };
  try {
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [transport],
      }),
    );
    const client = await factory.createFromUrl(base);
    const stream = client.sendMessageStream({
      tenant: "",
      message: {
        messageId: `m-${name}`,
        contextId: "",
        taskId: "",
        role: Role.ROLE_USER,
        parts: [{ content: { $case: "text", value: "one tool: what is 17 * 23" }, metadata: undefined }],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
      configuration: undefined,
      metadata: undefined,
    });
    const names = new Map(); // an artifact's name comes with its first chunk
    for await (const item of stream) {
      const payload = item.payload;
      summary.cases.push(payload.$case);
      if (payload.$case === "task") summary.taskId = payload.value.id;
      if (payload.$case === "statusUpdate") summary.states.push(TaskState[payload.value.status.state]);
      if (payload.$case === "artifactUpdate") {
        const { artifactId, name } = payload.value.artifact;
        if (name) names.set(artifactId, name);
        if (names.get(artifactId) !== "answer") continue;
        for (const part of payload.value.artifact.parts) {
          if (part.content?.$case === "text") summary.answer += part.content.value;
        }
      }
    }
    const task = await client.getTask({ tenant: "", id: summary.taskId });
    summary.fetched = TaskState[task.status.state];
  } catch (error) {
    summary.errors.push(String(error?.stack ?? error));
  }
  out[name] = summary;
}

await drive("JSONRPC", new JsonRpcTransportFactory());
await drive("HTTP+JSON", new RestTransportFactory());
process.stdout.write(JSON.stringify(out));
