// AG-UI over loopgate's WebSocket binding (/agui/ws, docs/agui.md), as an @ag-ui/client agent:
// the client's own pipeline (event verification, message state, interrupts) runs on what the
// socket carries. One socket per run; the runs the console starts are detached, so a dropped
// socket does not cancel them, and the stream is resumed from the journal where it broke off.

import { AbstractAgent, Observable } from "./vendor/agui-client.js";

const RETRIES = [250, 1000, 3000]; // ms before each reconnect of a dropped stream

export class SocketAgent extends AbstractAgent {
  constructor({ url, ...config }) {
    super(config);
    this.url = url;
  }

  run(input) {
    return new Observable((subscriber) => {
      let received = 0;
      let ended = false;
      let socket = null;
      let attempt = 0;
      const open = (frame) => {
        socket = new WebSocket(this.url);
        socket.onopen = () => socket.send(JSON.stringify(frame));
        socket.onmessage = (message) => {
          const event = JSON.parse(message.data);
          if (event.type === "CUSTOM" && event.name === "loopgate.error") {
            ended = true;
            subscriber.error(new Error(event.value?.message ?? "the gateway refused the frame"));
            return;
          }
          received += 1;
          attempt = 0;
          subscriber.next(event);
          if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") {
            ended = true;
            subscriber.complete();
            socket.close(1000);
          }
        };
        socket.onclose = (close) => {
          if (ended) return;
          if (attempt >= RETRIES.length) {
            ended = true;
            subscriber.error(new Error(`the connection closed (${close.code}) and could not be resumed`));
            return;
          }
          setTimeout(() => open(resumeFrame(input, received)), RETRIES[attempt++]);
        };
      };
      open(input);
      return () => {
        ended = true;
        if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000);
      };
    });
  }
}

// What continues a broken stream: a request for the same stream, told how many events arrived.
function resumeFrame(input, received) {
  const ours = input.forwardedProps?.loopgate ?? {};
  // Answers to tool approvals go on with the same run: sent again, they are no-ops.
  const approvals = input.resume?.length && input.resume.every((r) => r.interruptId.includes(":permission:"));
  if (ours.attach || approvals) {
    return { ...input, forwardedProps: { ...input.forwardedProps, loopgate: { ...ours, received } } };
  }
  // The request started the run: it exists now, so watch it from its start instead.
  return {
    threadId: input.threadId, runId: input.runId, protocolVersion: input.protocolVersion,
    messages: [], tools: [], context: [], state: {},
    forwardedProps: { loopgate: { attach: true, after: 0, received } },
  };
}
