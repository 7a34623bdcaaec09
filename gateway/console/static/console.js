// The loopgate console: a live list of runs, one run's stream and timeline, and the controls.
// Runs are started and their questions answered over AG-UI (SocketAgent, @ag-ui/client); every
// run, whoever started it, is watched over native SSE, which carries each LoopEvent as it is
// (unknown kinds included) with the timestamps the timeline is drawn from. On a gateway that
// serves several agents, a run is started on the agent picked (AgentPicker) with POST /v1/runs,
// which names it.

import { SocketAgent } from "./agent.js";
import { AgentPicker } from "./picker.js";
import { RunList, ownerOf, stateClass, stateOf, timeOf, titleOf } from "./runs.js";
import { RunView } from "./stream.js";
import { ThreadView } from "./thread.js";
import { Timeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
const LIST_LIMIT = 1000;
const THREAD_LIMIT = 100;
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

// --- the gateway: who the page is signed in as, and requests with its credential -----------------

// Who signs in decides what the API shows (each caller sees its own runs, an admin every run),
// so the page first asks the gateway who it takes the page to be (GET /v1/me) with no
// credential at all: a trusted proxy, or a loopback gateway with no credential configured,
// already knows the caller. Only a 401 asks the user for an API key or the gateway's token.
class Gateway {
  constructor() {
    const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
    if (fromHash) {
      sessionStorage.setItem(TOKEN_KEY, fromHash);
      history.replaceState(null, "", location.pathname + location.search);
    }
    this.token = sessionStorage.getItem(TOKEN_KEY);
    this.me = null; // GET /v1/me's answer: {subject, tenant, scopes, name, via}
    this.signingIn = null;
    this.onSignIn = () => {};
  }

  headers(extra) {
    const headers = { ...(extra ?? {}) };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    return headers;
  }

  async fetch(path, init = {}) {
    for (let tries = 0; ; tries++) {
      const response = await fetch(path, { ...init, headers: this.headers(init.headers), cache: "no-store" });
      if (response.status !== 401 || tries > 0) return response;
      // The credential stopped working (revoked, or the gateway's keys changed): sign in again.
      await this.signIn();
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

  // EventSource and WebSocket cannot send headers: the credential goes in the query.
  url(path, scheme) {
    const url = new URL(path, location.href);
    if (scheme) url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    if (this.token) url.searchParams.set("token", this.token);
    return url.toString();
  }

  // Resolves with the signed-in principal once the gateway takes the page's credential (or
  // needs none); one sign-in at a time, however many requests were refused meanwhile.
  signIn() {
    this.signingIn ??= this.signInNow().finally(() => {
      this.signingIn = null;
    });
    return this.signingIn;
  }

  async signInNow() {
    let refused = null;
    for (;;) {
      const response = await fetch("/v1/me", { headers: this.headers(), cache: "no-store" });
      const body = await response.json().catch(() => ({}));
      if (response.ok) {
        if (this.token) sessionStorage.setItem(TOKEN_KEY, this.token);
        this.me = body;
        this.onSignIn(body);
        return body;
      }
      if (response.status !== 401 && response.status !== 403) {
        throw new Error(body.detail ?? `${response.status} ${response.statusText}`);
      }
      // A credential was sent and refused: say so (the gateway's words never repeat it).
      refused = this.token ? (body.detail ?? "that API key or token was not accepted") : refused;
      sessionStorage.removeItem(TOKEN_KEY);
      this.token = (await this.askToken(refused)) || null;
    }
  }

  signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    // A fresh page: nothing of the last user's runs, streams or sockets stays behind.
    location.reload();
  }

  askToken(refused) {
    return new Promise((resolve) => {
      const dialog = $("token-dialog");
      $("token").value = "";
      $("token-error").textContent = refused ? `Not signed in: ${refused}` : "";
      $("token-error").hidden = !refused;
      dialog.addEventListener("close", () => resolve($("token").value.trim()), { once: true });
      dialog.showModal();
    });
  }
}

// --- AG-UI messages from a run's input (to answer a question with the conversation) ----------------

// A message's attachments (docs/attachments.md) as AG-UI content parts, so that the answer's
// conversation carries them back as the client sent them.
const AGUI_MEDIA = { image: "image", audio: "audio", file: "document" };

function aguiPart(part) {
  if (part.type === "text") return { type: "text", text: part.text };
  if (part.type === "resource") return { type: "text", text: part.text ?? part.uri };
  const source = part.data !== undefined
    ? { type: "data", value: part.data, mimeType: part.media_type }
    : { type: "url", value: part.url, ...(part.media_type ? { mimeType: part.media_type } : {}) };
  return { type: AGUI_MEDIA[part.type], source };
}

function aguiContent(content) {
  if (!Array.isArray(content)) return content ?? "";
  // Only a user message carries parts in AG-UI; others keep their text.
  return content.map(aguiPart);
}

function aguiMessages(input) {
  return (input ?? []).map((m) => {
    const content = m.role === "user" ? aguiContent(m.content) : textOf(m.content);
    const message = { id: newId(), role: m.role, content };
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

function textOf(content) {
  if (!Array.isArray(content)) return content ?? "";
  return content.map((p) => (p.type === "text" ? p.text : `[${p.type}]`)).join("\n");
}

// --- the console ----------------------------------------------------------------------------------

class Console {
  constructor() {
    this.gateway = new Gateway();
    this.list = new RunList($("run-list"), $("run-count"), (id) => this.select(id));
    this.thread = new ThreadView($("thread"), (id) => this.select(id));
    this.picker = new AgentPicker($("agent"), $("served"));
    this.runId = null;
    this.run = null; // the selected run's description (GET /v1/runs/{id})
    this.source = null;
    this.view = null;
    this.gateway.onSignIn = (me) => this.showWho(me);
    this.wire();
    this.begin();
  }

  async begin() {
    try {
      await this.gateway.signIn();
    } catch (error) {
      status(`cannot sign in: ${error.message}`);
    }
    this.poll();
  }

  // Who is signed in; Sign out only where the page holds a credential to forget (not for the
  // local user of a loopback gateway, nor for one a proxy signed in).
  showWho(me) {
    const before = this.list.viewer;
    if (before && (before.subject !== me.subject || before.tenant !== me.tenant)) {
      // Signed in again as someone else (the last key stopped working): start afresh, as a
      // sign-out does, so that nothing of the last user's stays; the new key is kept.
      location.reload();
      return;
    }
    this.list.viewer = me;
    $("who-name").textContent = `${me.subject} · ${me.tenant}`;
    const how = { key: "an API key", token: "the gateway's token", jwt: "a signed token", proxy: "the proxy" };
    const by = how[me.via]
      ? ` with ${how[me.via]}`
      : me.via === "local"
        ? " (this machine's user: no sign-in needed)"
        : ` (${me.via})`;
    $("who").title = `signed in as ${me.name ?? me.subject} (subject ${me.subject}, tenant ${me.tenant})${by}; may: ${me.scopes.join(", ")}`;
    $("who").hidden = false;
    $("sign-out").hidden = !this.gateway.token;
  }

  // The agents served, and which loop serves them on which model (GET /v1/agents): read with
  // every refresh, since a reload of the gateway may change them.
  async loadAgents() {
    try {
      const { agents } = await this.gateway.json("/v1/agents");
      this.picker.update(agents ?? []);
    } catch (error) {
      $("served").textContent = "";
    }
    this.list.showAgents = this.picker.several;
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
    $("sign-out").addEventListener("click", () => this.gateway.signOut());
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
    // Both at once; the agents are known before the rows are drawn (whether they name them).
    const agents = this.loadAgents();
    try {
      const body = await this.gateway.json(`/v1/runs?limit=${LIST_LIMIT}`);
      await agents;
      this.list.update(body.runs ?? []);
    } catch (error) {
      status(`cannot list runs: ${error.message}`);
    }
    if (this.runId) await this.describe(this.runId);
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
    const chosen = this.picker.chosen;
    if (chosen) {
      this.startOn(chosen, prompt);
      return;
    }
    const agent = this.agent(gatewayId("thread"), [{ id: newId(), role: "user", content: prompt }]);
    this.drive(agent, { runId: gatewayId("run") }, "starting a run");
  }

  // A run on a chosen agent: the native API names it (POST /v1/runs {agent}); the run is
  // detached as ever (no connection holds it), and watched over SSE like any other.
  async startOn(agent, prompt) {
    const what = `starting a run on ${agent}`;
    status(`${what}…`);
    try {
      const run = await this.gateway.post("/v1/runs", { input: prompt, agent, thread_id: gatewayId("thread") });
      if ($("status").textContent === `${what}…`) status("");
      await this.select(run.id);
      this.refresh();
    } catch (error) {
      status(`${what} failed: ${error.message}`);
    }
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
    const listed = this.list.described.get(id);
    $("run-title").textContent = listed?.title ?? "";
    $("run-id").textContent = id;
    $("run-state").textContent = "";
    $("run-meta").textContent = "";
    this.thread.clear();
    $("trace").hidden = true;
    $("stream").replaceChildren();
    this.setLive(true);
    const run = { id, thread_id: id, input: [] };
    this.run = run;
    const actions = {
      approve: (requestId, decision) => this.approve(this.run, requestId, decision),
      answer: (interruptId, text) => this.answer(this.run, interruptId, text),
    };
    const ended = () => {
      this.setLive(false);
      this.refresh();
    };
    const changed = () => {
      this.showMeta();
      // A question for the user: the list says so now, not at its next poll.
      if (view.asking.size) this.refresh();
    };
    const view = new RunView($("stream"), new Timeline($("timeline")), actions, ended, changed);
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

  // The selected run, its thread's runs, and what it shows of them.
  async describe(id) {
    try {
      const path = `/v1/runs/${encodeURIComponent(id)}`;
      const run = await this.gateway.json(path);
      const query = `thread_id=${encodeURIComponent(run.thread_id)}&limit=${THREAD_LIMIT}`;
      const { runs } = await this.gateway.json(`/v1/runs?${query}`);
      if (id !== this.runId) return;
      this.run = run;
      this.thread.show(run.thread_id, runs ?? [run], id);
      const row = this.thread.row(id);
      $("run-title").textContent = row?.title ?? titleOf(run, false);
      if (row?.next && run.status === "waiting_user") this.view.answered(row.next);
      const traceId = run.metadata?.trace_id;
      $("trace").hidden = !traceId;
      if (traceId) $("trace-id").textContent = traceId;
      if (run.state !== "running") this.setLive(false);
      this.showMeta();
    } catch (error) {
      $("run-meta").textContent = error.message;
    }
  }

  // The run's state: what its stream says while it is watched (a question out, its end),
  // else what the gateway says, and "answered" once its thread's next run has answered it.
  stateNow() {
    const { run, view } = this;
    const row = this.thread.row(run.id);
    const described = row?.state ?? stateOf(run, null);
    if (view.ended) return run.state === "running" ? view.status : described;
    if (view.asking.size) return "waiting for approval";
    return described === "waiting for approval" ? "running" : described;
  }

  showMeta() {
    const { run, view } = this;
    if (!run?.created_at) return; // not described yet
    const model = view.model ? ` · model ${view.model}` : "";
    const state = this.stateNow();
    $("run-state").textContent = state;
    $("run-state").className = `state ${stateClass(state)}`;
    const owner = run.owner ? ` · by ${ownerOf(run)}` : "";
    const agent = this.picker.several && run.agent ? ` · agent ${run.agent}` : "";
    $("run-meta").textContent = `${run.source} run${agent} · started ${timeOf(run.created_at)}${model}${owner}`;
  }

  setLive(live) {
    $("cancel").disabled = !live;
    for (const node of $("steer").elements) node.disabled = !live;
  }
}

window.loopgateConsole = new Console();
