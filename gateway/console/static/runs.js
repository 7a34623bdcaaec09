// What a run is called and what state it is in, as the list and the run's own view show it,
// and the run list itself.
//
// A thread's runs are one conversation: an ask_user run ends `waiting_user` and the answer
// starts the thread's next run (docs/api.md, "Continuing a thread"). So a run is titled by what
// it added to its thread (its first user input if it is the thread's first run, its new input
// if it follows one), and a `waiting_user` run that a later run of its thread followed no
// longer waits: it says whether that run answered it.

const TITLE_CHARS = 120;

function shorten(text) {
  const line = String(text).replace(/\s+/g, " ").trim();
  return line.length > TITLE_CHARS ? `${line.slice(0, TITLE_CHARS)}…` : line;
}

function contentOf(message) {
  const { content } = message;
  if (typeof content === "string") return content;
  // A list of parts (OpenAI/Vercel style): their text.
  if (Array.isArray(content)) return content.map((part) => part?.text ?? "").join(" ");
  return "";
}

function untitled(run) {
  return run.source === "ingest" ? "(pushed by an external loop)" : "(no prompt)";
}

// What a run that follows an ask_user answered (its input ends with the asked call's result),
// shortened; null if it answers nothing.
export function answerOf(run) {
  const last = run.input?.[run.input.length - 1];
  return last?.role === "tool" ? shorten(contentOf(last)) : null;
}

// ``follows``: the run continues its thread (an earlier run of the thread is known).
export function titleOf(run, follows) {
  const input = run.input ?? [];
  if (follows && input.length) {
    const answer = answerOf(run);
    if (answer) return `answer: ${answer}`;
    const last = input[input.length - 1];
    if (last.role === "user" && contentOf(last)) return shorten(contentOf(last));
  }
  const first = input.find((m) => m.role === "user" && contentOf(m));
  return first ? shorten(contentOf(first)) : untitled(run);
}

// The words for a run's state; ``next``: the run of its thread that followed it, if any.
export function stateOf(run, next) {
  if (run.state === "running") return run.awaiting === "approval" ? "waiting for approval" : "running";
  if (run.status === "waiting_user" && next) return answerOf(next) === null ? "not answered" : "answered";
  return run.status ?? "finished";
}

// A class for the state's colour: one word, as the stylesheet knows them.
export function stateClass(state) {
  return state.replace(/\s+/g, "-");
}

// Whose a run is (RunInfo.owner): "subject · tenant"; a run recorded before owners were kept
// has none (only an admin sees it).
export function ownerOf(run) {
  return run.owner ? `${run.owner.subject} · ${run.owner.tenant}` : "no owner";
}

function isViewers(run, viewer) {
  return Boolean(viewer && run.owner?.subject === viewer.subject && run.owner?.tenant === viewer.tenant);
}

export function timeOf(ns) {
  return new Date(ns / 1e6).toLocaleTimeString();
}

// Newest first (as listed) → threads, the one with the newest run first, each thread's runs in
// the order they ran; every run with its title, its state and the run that followed it.
export function byThread(runs) {
  const threads = new Map();
  for (const run of runs) {
    let thread = threads.get(run.thread_id);
    if (!thread) threads.set(run.thread_id, (thread = []));
    thread.push(run);
  }
  const rows = [];
  for (const thread of threads.values()) {
    thread.reverse();
    thread.forEach((run, i) => {
      const follows = i > 0;
      const state = stateOf(run, thread[i + 1]);
      rows.push({ run, follows, title: titleOf(run, follows), state, next: thread[i + 1] ?? null });
    });
  }
  return rows;
}

export class RunList {
  constructor(root, count, onSelect) {
    this.root = root;
    this.count = count;
    this.rows = new Map(); // run id → {node, signature}
    this.described = new Map(); // run id → its row: {run, follows, title, state, next}
    this.selected = null;
    this.viewer = null; // who is signed in (GET /v1/me): their own runs' owner is dimmed
    this.showAgents = false; // the gateway serves several agents: each row names its run's
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
    this.described = new Map();
    this.root.classList.toggle("agents", this.showAgents);
    for (const described of byThread(runs)) {
      const { run, follows, title, state } = described;
      this.described.set(run.id, described);
      seen.add(run.id);
      let row = this.rows.get(run.id);
      if (!row) {
        row = { node: this.create(run), signature: "" };
        this.rows.set(run.id, row);
      }
      const signature = `${state}|${run.last_seq}|${follows}|${title}|${this.showAgents}`;
      if (row.signature !== signature) {
        row.signature = signature;
        row.node.className = `${stateClass(state)}${follows ? " follows" : ""}`;
        row.node.querySelector(".prompt").textContent = title;
        // Hidden, not left out, with one agent; shown empty for a run of no agent (an ingest
        // or replay run), so that every row's columns line up.
        row.node.querySelector(".agent").hidden = !this.showAgents;
        row.node.querySelector(".sub").textContent = `${run.id} · ${state} · ${run.last_seq} events`;
      }
      // In order: move a row only when it is out of place.
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
    const part = (className) => {
      const span = document.createElement("span");
      span.className = className;
      return span;
    };
    const when = part("when");
    when.textContent = timeOf(run.created_at);
    // An admin sees every caller's runs: whose each is matters most there.
    const owner = part(isViewers(run, this.viewer) ? "owner mine" : "owner");
    owner.textContent = ownerOf(run);
    owner.title = run.owner ? `owner: ${run.owner.subject} (tenant ${run.owner.tenant})` : "recorded without an owner";
    // A run's agent never changes: written once.
    const agent = part("agent");
    agent.textContent = run.agent ?? "";
    agent.title = run.agent ? `agent: ${run.agent}` : "run by no agent (pushed in or replayed)";
    agent.hidden = true;
    node.append(part("dot"), part("prompt"), agent, owner, when, part("sub"));
    return node;
  }

  select(id) {
    this.rows.get(this.selected)?.node.setAttribute("aria-selected", "false");
    this.selected = id;
    this.rows.get(id)?.node.setAttribute("aria-selected", "true");
  }
}
