// The loopgate console: a live list of runs, one run's stream and timeline, and the controls.
// Runs are started and their questions answered over AG-UI (SocketAgent, @ag-ui/client); every
// run, whoever started it, is watched over native SSE, which carries each LoopEvent as it is
// (unknown kinds included) with the timestamps the timeline is drawn from.

import { SocketAgent } from "./agent.js";
import { RunView } from "./stream.js";
import { Timeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
const LIST_LIMIT = 1000;
const PROMPT_CHARS = 120;
// Console runs outlive their socket: a dropped connection is resumed, not a cancel.
const DETACHED = { loopgate: { detached: true } };
const TOKEN_KEY = "loopgate.token";

const newId = () =>
  globalThis.crypto?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
// Runs and threads the console starts get ids in the gateway's own format (run_<32 hex>), as
// every run it starts itself does. getRandomValues: there over plain http too, unlike randomUUID.
const gatewayId = (prefix) =>
  `${prefix}_${Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("")}`;

function status(text) {
  $("status").textContent = text;
}

// --- the gateway: requests with the token, when it has one --------------------------------------

class Gateway {
  constructor() {
    const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
    if (fromHash) {
      sessionStorage.setItem(TOKEN_KEY, fromHash);
      history.replaceState(null, "", location.pathname + location.search);
    }
    this.token = sessionStorage.getItem(TOKEN_KEY);
    this.asking = null;
  }

  async fetch(path, init = {}) {
    for (let tries = 0; ; tries++) {
      const headers = { ...(init.headers ?? {}) };
      if (this.token) headers.authorization = `Bearer ${this.token}`;
      const response = await fetch(path, { ...init, headers, cache: "no-store" });
      if (response.status !== 401 || tries > 0) return response;
      await this.askToken();
    }
  }

  async json(path, init) {
    const response = await this.fetch(path, init);
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.detail ?? `${response.status} ${response.statusText}`);
    return body;
  }

  post(path, body) {
    return this.json(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body ?? {}),
    });
  }

  // EventSource and WebSocket cannot send headers: the token goes in the query.
  url(path, scheme) {
    const url = new URL(path, location.href);
    if (scheme) url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    if (this.token) url.searchParams.set("token", this.token);
    return url.toString();
  }

  askToken() {
    this.asking ??= new Promise((resolve) => {
      const dialog = $("token-dialog");
      dialog.addEventListener(
        "close",
        () => {
          this.token = $("token").value;
          sessionStorage.setItem(TOKEN_KEY, this.token);
          this.asking = null;
          resolve();
        },
        { once: true },
      );
      dialog.showModal();
    });
    return this.asking;
  }
}

// --- the run list ---------------------------------------------------------------------------------

function promptOf(run) {
  const first = (run.input ?? []).find((m) => m.role === "user" && m.content);
  const text = first?.content ?? (run.source === "ingest" ? "(pushed by an external loop)" : "(no prompt)");
  return text.length > PROMPT_CHARS ? `${text.slice(0, PROMPT_CHARS)}…` : text;
}

function timeOf(ns) {
  return new Date(ns / 1e6).toLocaleTimeString();
}

class RunList {
  constructor(root, count, onSelect) {
    this.root = root;
    this.count = count;
    this.rows = new Map(); // run id → {node, signature}
    this.selected = null;
    this.stats = { runs: 0, renderMs: 0, renders: 0 };
    root.addEventListener("click", (event) => {
      const row = event.target.closest("li");
      if (row) onSelect(row.dataset.runId);
    });
  }

  update(runs) {
    const began = performance.now();
    const seen = new Set();
    let previous = null;
    for (const run of runs) {
      seen.add(run.id);
      let row = this.rows.get(run.id);
      if (!row) {
        row = { node: this.create(run), signature: "" };
        this.rows.set(run.id, row);
      }
      const signature = `${run.state}|${run.status}|${run.last_seq}`;
      if (row.signature !== signature) {
        row.signature = signature;
        row.node.className = run.state === "running" ? "running" : (run.status ?? "");
        row.node.querySelector(".sub").textContent =
          `${run.id} · ${run.state === "running" ? "running" : run.status} · ${run.last_seq} events`;
      }
      // Newest first: move a row only when it is out of place.
      const want = previous ? previous.nextSibling : this.root.firstChild;
      if (want !== row.node) this.root.insertBefore(row.node, want);
      previous = row.node;
    }
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.node.remove();
        this.rows.delete(id);
      }
    }
    this.count.textContent = `${runs.length} run${runs.length === 1 ? "" : "s"}`;
    this.stats.runs = runs.length;
    this.stats.renders += 1;
    this.stats.renderMs = performance.now() - began;
  }

  create(run) {
    const node = document.createElement("li");
    node.dataset.runId = run.id;
    node.setAttribute("aria-selected", String(run.id === this.selected));
    const dot = document.createElement("span");
    dot.className = "dot";
    const prompt = document.createElement("span");
    prompt.className = "prompt";
    prompt.textContent = promptOf(run);
    const when = document.createElement("span");
    when.className = "when";
    when.textContent = timeOf(run.created_at);
    const sub = document.createElement("span");
    sub.className = "sub";
    node.append(dot, prompt, when, sub);
    return node;
  }

  select(id) {
    this.rows.get(this.selected)?.node.setAttribute("aria-selected", "false");
    this.selected = id;
    this.rows.get(id)?.node.setAttribute("aria-selected", "true");
  }
}

// --- AG-UI messages from a run's input (to answer a question with the conversation) ----------------

function aguiMessages(input) {
  return (input ?? []).map((m) => {
    const message = { id: newId(), role: m.role, content: m.content ?? "" };
    if (m.role === "assistant" && m.tool_calls?.length) {
      message.toolCalls = m.tool_calls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: JSON.stringify(c.arguments ?? {}) },
      }));
    }
    if (m.role === "tool") message.toolCallId = m.tool_call_id;
    return message;
  });
}

// --- the console ----------------------------------------------------------------------------------

class Console {
  constructor() {
    this.gateway = new Gateway();
    this.list = new RunList($("run-list"), $("run-count"), (id) => this.select(id));
    this.runId = null;
    this.run = null; // the selected run's description (GET /v1/runs/{id})
    this.source = null;
    this.view = null;
    this.wire();
    this.poll();
  }

  wire() {
    $("start").addEventListener("submit", (event) => {
      event.preventDefault();
      const prompt = $("prompt").value.trim();
      if (!prompt) return;
      $("prompt").value = "";
      this.start(prompt);
    });
    $("cancel").addEventListener("click", () => this.command("cancel"));
    $("steer").addEventListener("submit", (event) => {
      event.preventDefault();
      const content = $("steer-text").value.trim();
      if (!content) return;
      $("steer-text").value = "";
      this.command("steer", { content });
    });
    $("copy-trace").addEventListener("click", () => {
      navigator.clipboard?.writeText($("trace-id").textContent).then(
        () => status("trace id copied"),
        () => getSelection().selectAllChildren($("trace-id")),
      );
    });
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) this.refresh();
    });
  }

  async poll() {
    if (!document.hidden) await this.refresh();
    setTimeout(() => this.poll(), POLL_MS);
  }

  async refresh() {
    try {
      const body = await this.gateway.json(`/v1/runs?limit=${LIST_LIMIT}`);
      this.list.update(body.runs ?? []);
    } catch (error) {
      status(`cannot list runs: ${error.message}`);
    }
  }

  agent(threadId, messages) {
    return new SocketAgent({ url: this.gateway.url("/agui/ws", "ws"), threadId, initialMessages: messages });
  }

  // One AG-UI run on its own socket; the console shows the run it streams.
  drive(agent, parameters, what) {
    status(`${what}…`);
    const watch = {
      onRunStartedEvent: ({ event }) => {
        if (event.runId !== this.runId) this.select(event.runId);
        this.refresh();
      },
      onRunErrorEvent: ({ event }) => status(`${what}: ${event.message}`),
    };
    agent
      .runAgent({ ...parameters, forwardedProps: DETACHED }, watch)
      .then(() => {
        if ($("status").textContent === `${what}…`) status("");
        this.refresh();
      })
      .catch((error) => status(`${what} failed: ${error.message}`));
  }

  start(prompt) {
    const agent = this.agent(gatewayId("thread"), [{ id: newId(), role: "user", content: prompt }]);
    this.drive(agent, { runId: gatewayId("run") }, "starting a run");
  }

  approve(run, requestId, decision) {
    const interruptId = `${run.id}:permission:${requestId}`;
    const resume = [{ interruptId, status: "resolved", payload: { decision } }];
    this.drive(this.agent(run.thread_id, []), { runId: gatewayId("run"), resume }, "answering the approval");
  }

  answer(run, interruptId, text) {
    // The answer starts the thread's next run, which carries the conversation on.
    const resume = [{ interruptId, status: "resolved", payload: text }];
    const agent = this.agent(run.thread_id, aguiMessages(run.input));
    this.drive(agent, { runId: gatewayId("run"), resume }, "answering");
  }

  async command(name, body) {
    if (!this.runId) return;
    try {
      const result = await this.gateway.post(`/v1/runs/${encodeURIComponent(this.runId)}/${name}`, body);
      status(result.accepted === false ? `${name}: the run has already finished` : `${name} sent`);
    } catch (error) {
      status(`${name} failed: ${error.message}`);
    }
  }

  async select(id) {
    if (id === this.runId) return;
    this.source?.close();
    this.view?.close();
    this.runId = id;
    this.list.select(id);
    $("run").hidden = false;
    $("run-title").textContent = id;
    $("run-meta").textContent = "";
    $("trace").hidden = true;
    $("stream").replaceChildren();
    this.setLive(true);
    const run = { id, thread_id: id, input: [] };
    this.run = run;
    const actions = {
      approve: (requestId, decision) => this.approve(this.run, requestId, decision),
      answer: (interruptId, text) => this.answer(this.run, interruptId, text),
    };
    const view = new RunView($("stream"), new Timeline($("timeline")), actions, () => {
      this.setLive(false);
      this.describe(id);
      this.refresh();
    });
    this.view = view;
    const source = new EventSource(this.gateway.url(`/v1/runs/${encodeURIComponent(id)}/events`));
    // Unnamed events: every LoopEvent is a "message", whatever its kind.
    source.onmessage = (message) => view.push(JSON.parse(message.data));
    source.onerror = () => {
      // CLOSED is final: the run ended (204) or the gateway refused the stream.
      if (source.readyState === EventSource.CLOSED && this.source === source) this.setLive(false);
    };
    this.source = source;
    await this.describe(id);
  }

  async describe(id) {
    try {
      const run = await this.gateway.json(`/v1/runs/${encodeURIComponent(id)}`);
      if (id !== this.runId) return;
      this.run = run;
      const state = run.state === "running" ? "running" : run.status;
      $("run-meta").textContent =
        `${state} · thread ${run.thread_id} · ${run.source} · started ${timeOf(run.created_at)} · ${promptOf(run)}`;
      const traceId = run.metadata?.trace_id;
      $("trace").hidden = !traceId;
      if (traceId) $("trace-id").textContent = traceId;
      if (run.state !== "running") this.setLive(false);
    } catch (error) {
      $("run-meta").textContent = error.message;
    }
  }

  setLive(live) {
    $("cancel").disabled = !live;
    for (const node of $("steer").elements) node.disabled = !live;
  }
}

window.loopgateConsole = new Console();
