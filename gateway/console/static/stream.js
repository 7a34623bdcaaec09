// A run's envelopes drawn as a transcript. Envelopes are queued as they arrive and drawn once
// per animation frame: a run of 100k deltas costs one text-node append per frame, not one DOM
// change per delta.

import { answerOf } from "./runs.js";

const LOOP_KINDS = new Set([
  "stage_start", "llm_request", "llm_response", "content_delta", "reasoning_delta",
  "tool_call_start", "tool_call_result", "tool_error", "stage_complete", "budget_exhausted",
  "soft_timeout", "steer", "hook_action", "error", "completion",
  "permission_request", "permission_result",
]);
const PREVIEW_CHARS = 4000;

export function isTerminal(envelope) {
  return envelope.kind === "completion" && envelope.data?.status !== "executing";
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function json(value) {
  const text = JSON.stringify(value, null, 2) ?? String(value);
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}\n… (${text.length} characters)` : text;
}

function labelled(kind, className, text) {
  const node = el("div", `ev ${className}`);
  node.dataset.kind = kind;
  node.append(el("span", "k", kind), text ?? "");
  return node;
}

// The question an ask_user-style tool put: its arguments' question/prompt/message.
function questionOf(args) {
  if (args && typeof args === "object") {
    for (const key of ["question", "prompt", "message", "text"]) {
      if (typeof args[key] === "string") return args[key];
    }
  }
  return "The loop is waiting for your answer.";
}

// A kind this console does not know (a newer loop's, a vendor's), or a payload it cannot
// read: shown as it came.
function raw(kind, data) {
  const node = labelled(kind, "raw");
  node.append(el("pre", "", json(data)));
  return node;
}

export class RunView {
  // actions: {approve(requestId, decision), answer(interruptId, text)}; onEnd(envelope);
  // onChange(): what the run waits for, or its model, changed (``asking``, ``model``).
  constructor(root, timeline, actions, onEnd, onChange = () => {}) {
    this.root = root;
    this.timeline = timeline;
    this.actions = actions;
    this.onEnd = onEnd;
    this.onChange = onChange;
    this.queue = [];
    this.frame = 0;
    this.segment = null; // {kind, node: Text}
    this.calls = new Map(); // tool call id → {node, args}
    this.approvals = new Map(); // request id → node
    this.asking = new Set(); // request ids of permission requests not answered yet
    this.asks = []; // the ask_user cards: {node, form}
    this.next = null; // the thread's run that followed this one, once known
    this.model = null; // the latest stage_start's model
    this.ended = false;
    this.status = null; // the terminal completion's
    // Read by the browser tests: when deltas reached the page and when they were drawn.
    this.stats = { events: 0, deltas: 0, firstDeltaDrawn: null, lastDeltaDrawn: null, lastReceived: null };
  }

  push(envelope) {
    const now = performance.now();
    this.stats.events += 1;
    this.stats.lastReceived = now;
    this.timeline.note(envelope, Date.now());
    this.queue.push(envelope);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  close() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.queue = [];
  }

  flush() {
    this.frame = 0;
    const queue = this.queue;
    this.queue = [];
    let text = "";
    let deltas = 0;
    const out = document.createDocumentFragment();
    const spill = () => {
      if (text) this.segment.node.appendData(text);
      text = "";
    };
    for (const envelope of queue) {
      const kind = envelope.kind;
      const data = envelope.data ?? {};
      if ((kind === "content_delta" || kind === "reasoning_delta") && typeof data.delta === "string") {
        deltas += 1;
        if (this.segment?.kind !== kind) {
          if (this.segment) spill();
          const block = labelled(kind, kind === "content_delta" ? "text" : "reasoning");
          block.firstChild.textContent = kind === "content_delta" ? "text" : "reasoning";
          const node = document.createTextNode("");
          block.append(node);
          out.append(block);
          this.segment = { kind, node };
        }
        text += data.delta;
        continue;
      }
      if (this.segment) {
        spill();
        this.segment = null;
      }
      const node = this.draw(envelope, kind, data);
      if (node) out.append(node);
      if (isTerminal(envelope) && !this.ended) {
        this.ended = true;
        this.status = typeof data.status === "string" ? data.status : "failed";
        this.settle();
        this.onEnd(envelope);
      }
    }
    if (this.segment) spill();
    this.root.append(out);
    if (deltas) {
      const now = performance.now();
      this.stats.deltas += deltas;
      this.stats.firstDeltaDrawn ??= now;
      this.stats.lastDeltaDrawn = now;
    }
    this.timeline.draw();
  }

  draw(envelope, kind, data) {
    if (!LOOP_KINDS.has(kind)) return raw(kind, data);
    switch (kind) {
      case "stage_start":
        if (typeof data.model === "string" && data.model !== this.model) {
          this.model = data.model;
          this.onChange();
        }
        return labelled(kind, "round", `round ${data.round ?? "?"} · ${data.model ?? ""}`);
      case "llm_request":
        return null; // drawn in the timeline
      case "llm_response": {
        const tokens = data.totalTokens !== undefined ? ` · ${data.totalTokens} tokens` : "";
        const cost = typeof data.costUsd === "number" ? ` · $${data.costUsd.toFixed(6)}` : "";
        return labelled(kind, "round", `${data.finishReason ?? "done"}${tokens}${cost}`);
      }
      case "stage_complete":
        return null;
      case "tool_call_start": {
        const node = labelled(kind, "tool-call", `${data.name ?? "tool"}`);
        node.firstChild.textContent = "tool";
        node.append(el("pre", "args", json(data.arguments ?? {})));
        const result = el("div", "result", "running…");
        node.append(result);
        if (typeof data.id === "string") this.calls.set(data.id, { node, result, args: data.arguments, open: true });
        return node;
      }
      case "tool_call_result":
      case "tool_error": {
        const failed = kind === "tool_error" || data.success === false;
        const body = failed ? (data.error ?? data.resultPreview ?? data) : (data.resultPreview ?? data.result ?? "");
        const call = this.calls.get(data.id);
        const shown = el("pre", "", typeof body === "string" ? body : json(body));
        const took = typeof data.durationMs === "number" ? ` in ${data.durationMs} ms` : "";
        if (call) {
          call.open = false;
          call.node.classList.toggle("failed", failed);
          call.result.replaceChildren(el("span", "k", failed ? `failed${took}` : `result${took}`), shown);
          return null;
        }
        const node = labelled(kind, failed ? "tool-call failed" : "tool-call", data.name ?? "");
        node.append(shown);
        return node;
      }
      case "error":
        return labelled(kind, "error", `${data.message ?? "error"}${data.phase ? ` (${data.phase})` : ""}`);
      case "budget_exhausted":
      case "soft_timeout":
        return labelled(kind, "notice", json(data));
      case "steer":
        return labelled(kind, "notice", `steered: ${data.content ?? ""}`);
      case "hook_action":
        return labelled(kind, "notice", `${data.hook ?? "hook"} → ${data.action ?? "?"}${data.reason ? `: ${data.reason}` : ""}`);
      case "permission_request":
        return this.approval(data);
      case "permission_result": {
        const node = this.approvals.get(data.requestId);
        if (this.asking.delete(data.requestId)) this.onChange();
        if (node) {
          node.querySelector("form")?.remove();
          node.append(el("div", "", `${data.decision} (by ${data.by ?? "client"})`));
        }
        return labelled(kind, "notice", `${data.decision ?? "?"} by ${data.by ?? "client"}`);
      }
      case "completion":
        return this.completion(envelope, data);
      default:
        // A known kind whose payload is not what the contract says (a delta that is no string).
        return raw(kind, data);
    }
  }

  approval(data) {
    const call = data.toolCall ?? {};
    const node = labelled("permission_request", "ask", `${call.name ?? "a tool"} needs your approval`);
    node.append(el("pre", "", json(call.arguments ?? {})));
    const form = el("form");
    for (const decision of data.options ?? ["allow_once", "reject_once"]) {
      const button = el("button", "", decision.replace("_", " "));
      button.type = "button";
      button.dataset.decision = decision;
      button.addEventListener("click", () => {
        for (const b of form.querySelectorAll("button")) b.disabled = true;
        this.actions.approve(data.requestId, decision);
      });
      form.append(button);
    }
    node.append(form);
    if (typeof data.requestId === "string") {
      this.approvals.set(data.requestId, node);
      this.asking.add(data.requestId);
      this.onChange();
    }
    return node;
  }

  completion(envelope, data) {
    const status = data.status ?? "?";
    if (status === "executing") return null;
    const reason = data.reason ? ` · ${data.reason}` : "";
    const cost = typeof data.costUsd === "number" ? ` · $${data.costUsd.toFixed(6)}` : "";
    // Stopped (by a cancel, or to ask) is not failed.
    const halted = ["cancelled", "waiting_user"].includes(status);
    const tone = status === "completed" ? "" : halted ? " halted" : " failed";
    const node = labelled("completion", `completion${tone}`, `${status}${reason}${cost}`);
    if (status !== "waiting_user" || data.reason === "client_tool") return node;
    const listed = Array.isArray(data.interrupts) ? data.interrupts.filter((i) => i && typeof i === "object") : [];
    const asks = listed.length
      ? listed.map((item, i) => ({ id: `${envelope.run_id}:interrupt:${envelope.seq}:${i}`, question: questionOf(item) }))
      : [{ id: `${envelope.run_id}:interrupt:${envelope.seq}`, question: questionOf(this.calls.get(data.toolCallId)?.args) }];
    const wrapper = document.createDocumentFragment();
    wrapper.append(node);
    for (const ask of asks) {
      const card = el("div", "ev ask", ask.question);
      card.dataset.kind = "ask_user";
      const form = el("form");
      const input = el("input");
      input.placeholder = "Your answer";
      input.required = true;
      const button = el("button", "", "Answer");
      button.type = "submit";
      form.append(input, button);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        button.disabled = true;
        this.actions.answer(ask.id, input.value);
      });
      card.append(form);
      wrapper.append(card);
      this.asks.push({ node: card, form });
    }
    if (this.next) this.answered(this.next);
    return wrapper;
  }

  // The run is over: what it left open ends with it. A tool call with no result was cut short
  // (by a cancel, a limit, a failure) and an approval nobody gave can no longer be given.
  settle() {
    const why = this.status === "cancelled" ? "cancelled" : `ended (${this.status}) without a result`;
    for (const call of this.calls.values()) {
      if (!call.open) continue;
      call.open = false;
      call.node.classList.add("ended");
      call.result.replaceChildren(el("span", "k", why));
    }
    for (const id of this.asking) {
      const node = this.approvals.get(id);
      node?.querySelector("form")?.remove();
      node?.append(el("div", "", `not answered: the run ${this.status}`));
    }
    if (this.asking.size) {
      this.asking.clear();
      this.onChange();
    }
  }

  // ``next``: the thread's run that followed this one; its questions were answered there (or
  // passed over), so they are no longer asked here.
  answered(next) {
    this.next = next;
    const answer = answerOf(next);
    const said = answer === null ? "not answered" : `answered: ${answer}`;
    for (const ask of this.asks) {
      if (ask.done) continue;
      ask.done = true;
      ask.form.replaceWith(el("div", "said", `${said} → the next run, ${next.id}`));
    }
  }
}
