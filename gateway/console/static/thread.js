// The thread view: the runs of the selected run's thread, in the order they ran
// (GET /v1/runs?thread_id=…), each titled by what it added, with its state. A follow-up (the
// answer to an ask_user, the next prompt) is shown here as the next step of one conversation.

import { byThread, stateClass } from "./runs.js";

export class ThreadView {
  constructor(root, onSelect) {
    this.root = root;
    this.head = root.querySelector(".thread-head");
    this.list = root.querySelector("ol");
    this.signature = "";
    this.rows = [];
    this.list.addEventListener("click", (event) => {
      const item = event.target.closest("li");
      if (item) onSelect(item.dataset.runId);
    });
  }

  // ``runs``: the thread's runs as listed (newest first); ``current``: the run shown.
  show(threadId, runs, current) {
    this.rows = byThread(runs);
    const signature = JSON.stringify([threadId, current, this.rows.map((r) => [r.run.id, r.state, r.title])]);
    if (signature === this.signature) return;
    this.signature = signature;
    this.root.hidden = false;
    this.head.textContent = `thread ${threadId} · ${runs.length} run${runs.length === 1 ? "" : "s"}`;
    this.list.replaceChildren(
      ...this.rows.map(({ run, title, state }) => {
        const item = document.createElement("li");
        item.dataset.runId = run.id;
        item.className = stateClass(state);
        if (run.id === current) item.setAttribute("aria-current", "true");
        const name = document.createElement("span");
        name.className = "title";
        name.textContent = title;
        const sub = document.createElement("span");
        sub.className = "sub";
        sub.textContent = `${state} · ${run.id}`;
        item.append(name, sub);
        return item;
      }),
    );
  }

  // The row of ``runId`` here: {run, follows, title, state, next}, or undefined.
  row(runId) {
    return this.rows.find((r) => r.run.id === runId);
  }

  clear() {
    this.signature = "";
    this.rows = [];
    this.root.hidden = true;
    this.list.replaceChildren();
  }
}
