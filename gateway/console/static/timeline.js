// A run's phases from its envelopes' timestamps (ns since the epoch, stamped by the gateway):
// model requests (llm_request → llm_response), tool calls (start → result), and delivery
// (stamped → arrived in this page, for events that arrived live), for people without a trace
// dashboard.

const MAX_BARS = 400; // per row: a long run's bars beyond this are merged into the last one

export class Timeline {
  constructor(root) {
    this.root = root;
    this.openedAt = Date.now();
    this.first = null;
    this.last = null;
    this.model = [];
    this.tools = [];
    this.openModel = null;
    this.openTools = new Map();
    this.lags = [];
    this.liveFrom = null;
    this.liveTo = null;
    this.dirty = false;
  }

  note(envelope, arrivedAt) {
    const at = envelope.ts / 1e6;
    if (!Number.isFinite(at)) return;
    this.first ??= at;
    this.last = Math.max(this.last ?? at, at);
    const data = envelope.data ?? {};
    const closeModel = () => {
      if (this.openModel) this.openModel.end = at;
      this.openModel = null;
    };
    switch (envelope.kind) {
      case "llm_request":
        closeModel();
        this.openModel = { start: at, end: null, label: data.model ?? "model" };
        push(this.model, this.openModel);
        break;
      case "llm_response":
      case "tool_call_start":
      case "completion":
      case "stage_complete":
        closeModel();
        break;
      case "error":
        if (String(data.phase ?? "").startsWith("llm")) closeModel();
        break;
    }
    if (envelope.kind === "tool_call_start" && typeof data.id === "string") {
      const bar = { start: at, end: null, label: data.name ?? "tool" };
      this.openTools.set(data.id, bar);
      push(this.tools, bar);
    } else if ((envelope.kind === "tool_call_result" || envelope.kind === "tool_error") && this.openTools.has(data.id)) {
      const bar = this.openTools.get(data.id);
      bar.end = at;
      bar.failed = envelope.kind === "tool_error" || data.success === false;
      this.openTools.delete(data.id);
    }
    // Stamped after this page opened the stream: it arrived live, so its lag is delivery.
    if (at >= this.openedAt - 1000) {
      this.lags.push(arrivedAt - at);
      this.liveFrom ??= at;
      this.liveTo = Math.max(this.liveTo ?? arrivedAt, arrivedAt);
    }
    this.dirty = true;
  }

  draw() {
    if (!this.dirty || this.first === null) return;
    this.dirty = false;
    const start = this.first;
    const end = Math.max(this.last, this.liveTo ?? this.last, start + 1);
    const span = end - start;
    const place = (bar, className, title) => {
      const node = document.createElement("div");
      node.className = `bar ${className}`;
      const stop = bar.end ?? this.last;
      node.style.left = `${((bar.start - start) / span) * 100}%`;
      node.style.width = `${(Math.max(stop - bar.start, 0) / span) * 100}%`;
      node.title = `${title}: ${(stop - bar.start).toFixed(1)} ms${bar.end === null ? " (open)" : ""}`;
      return node;
    };
    const row = (label, bars) => {
      const node = document.createElement("div");
      node.className = "row";
      const name = document.createElement("span");
      name.className = "label";
      name.textContent = label;
      node.append(name, ...bars);
      return node;
    };
    const rows = [
      row(`model requests (${this.model.length})`, this.model.map((b) => place(b, "model", b.label))),
      row(`tools (${this.tools.length})`, this.tools.map((b) => place(b, b.failed ? "tool failed" : "tool", b.label))),
    ];
    if (this.lags.length) {
      const sorted = [...this.lags].sort((a, b) => a - b);
      const p50 = sorted[Math.floor(sorted.length / 2)];
      const max = sorted[sorted.length - 1];
      const label = `delivery: p50 ${p50.toFixed(0)} ms, max ${max.toFixed(0)} ms`;
      rows.push(row(label, [place({ start: this.liveFrom, end: this.liveTo }, "delivery", "delivered live")]));
    }
    const scale = document.createElement("div");
    scale.className = "scale";
    scale.append(spanText("0"), spanText(`${span.toFixed(0)} ms`));
    this.root.replaceChildren(...rows, scale);
  }
}

function push(bars, bar) {
  if (bars.length < MAX_BARS) {
    bars.push(bar);
    return;
  }
  // The new bar takes over the last one's start: its close ends the merged span.
  bar.start = bars[bars.length - 1].start;
  bar.label = "(merged)";
  bars[bars.length - 1] = bar;
}

function spanText(text) {
  const node = document.createElement("span");
  node.textContent = text;
  return node;
}
