// The agents the gateway serves (GET /v1/agents, the default first): the picker a new run's
// agent is chosen with, shown only when there is more than one, and the loop (and model) of the
// chosen agent, at the top right. With one agent the console is as it has always been: no
// picker, runs name no agent, and the top right names the one loop.

// A loop in words: "the reference loop · model M", or "loop python:pkg.mod:attr".
export function loopWords(loop, model) {
  const words = loop === "reference" ? "the reference loop" : `loop ${loop ?? "(unnamed)"}`;
  return model ? `${words} · model ${model}` : words;
}

export class AgentPicker {
  constructor(select, served) {
    this.select = select;
    this.served = served;
    this.agents = [];
    this.signature = null;
    select.addEventListener("change", () => this.showServed());
  }

  get several() {
    return this.agents.length > 1;
  }

  // The agent a new run goes to; null with one agent (the run names none, as before agents).
  get chosen() {
    return this.several ? this.select.value : null;
  }

  // The agents as listed now (a reload may change them): the choice is kept while its agent is
  // still served, else the default is chosen.
  update(agents) {
    const signature = JSON.stringify(agents);
    if (signature === this.signature) return;
    this.signature = signature;
    const before = this.select.value;
    this.agents = agents;
    this.select.replaceChildren(
      ...agents.map((agent) => {
        const option = document.createElement("option");
        option.value = agent.name;
        option.textContent = agent.description ? `${agent.name} — ${agent.description}` : agent.name;
        option.title = `${agent.name}: ${loopWords(agent.loop, agent.model)}${agent.default ? " (the default)" : ""}`;
        return option;
      }),
    );
    const kept = agents.find((a) => a.name === before) ?? agents.find((a) => a.default) ?? agents[0];
    if (kept) this.select.value = kept.name;
    this.select.hidden = !this.several;
    this.showServed();
  }

  showServed() {
    const agent = this.agents.find((a) => a.name === this.select.value) ?? this.agents[0];
    this.served.textContent = loopWords(agent?.loop, agent?.model);
    this.served.title = this.several
      ? `The loop of ${agent.name}, the agent a new run goes to (GET /v1/agents)`
      : "The loop that serves this gateway's runs (GET /v1/agents)";
  }
}
