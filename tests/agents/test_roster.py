"""Several agents on one hub: which agent a run goes to, what it records, and how a roster is
declared (the config file's [agents.NAME] tables and the flags' agent named default)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopgate.contracts.agents import AgentInfo, UnknownAgent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.agents.build import build_agents
from loopgate.gateway.agents.spec import AgentSpec
from loopgate.gateway.app import build_hub
from loopgate.gateway.config_file import ConfigError, parse_config, settings_from, settings_toml
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry
from tests.agents.roster import PREFIX, TWO_AGENTS_TOML, two_agent_settings

pytestmark = pytest.mark.anyio


async def answer(hub: Hub, request: StartRun) -> tuple[str | None, str]:
    """The agent a run went to, and the text it answered."""
    info = await hub.start(request)
    text = ""
    with anyio.fail_after(10):
        async with hub.subscribe(info.id) as sub:
            while not sub.done:
                for env in await sub.next_batch():
                    if env.kind == "content_delta":
                        text += env.data["delta"]
    return info.agent, text


async def test_each_run_goes_to_the_agent_it_names_else_the_default() -> None:
    async with build_hub(two_agent_settings()) as hub:
        assert await hub.agents() == [
            AgentInfo(
                name="coder",
                description="Writes and explains code",
                loop="reference",
                model="loopgate-scripted",
                default=True,
            ),
            AgentInfo(
                name="parrot",
                description="Repeats what you say",
                loop="python:tests.agents.parrot:loop",
                accepts=[],
            ),
        ]
        agent, text = await answer(hub, StartRun(input="hello", agent="parrot"))
        assert (agent, text) == ("parrot", PREFIX + "hello")
        agent, text = await answer(hub, StartRun(input="hello"))
        assert agent == "coder" and not text.startswith(PREFIX)
        agent, _ = await answer(hub, StartRun(input="hello", agent="coder"))
        assert agent == "coder"
        listed = {info.agent for info in await hub.list_runs()}
        assert listed == {"coder", "parrot"}


async def test_a_thread_stays_with_its_agent_until_a_run_names_another() -> None:
    async with build_hub(two_agent_settings()) as hub:
        await answer(hub, StartRun(input="first", agent="parrot", thread_id="t1"))
        agent, text = await answer(hub, StartRun(input="second", thread_id="t1"))
        assert (agent, text) == ("parrot", PREFIX + "second")
        # A client may move a thread on to another agent (an ACP session's config option).
        agent, _ = await answer(hub, StartRun(input="third", thread_id="t1", agent="coder"))
        assert agent == "coder"
        agent, _ = await answer(hub, StartRun(input="fourth", thread_id="t1"))
        assert agent == "coder"
        # A thread's first run takes the default.
        agent, _ = await answer(hub, StartRun(input="new", thread_id="t2"))
        assert agent == "coder"


async def test_an_unknown_agent_is_refused_naming_the_ones_served_and_costs_no_quota() -> None:
    async with build_hub(two_agent_settings(quota_concurrent_runs=1)) as hub:
        with pytest.raises(UnknownAgent) as refused:
            await hub.start(StartRun(input="x", agent="nobody"))
        assert (
            refused.value.message == "no agent named 'nobody'; this gateway serves: coder, parrot"
        )
        assert refused.value.known == ["coder", "parrot"] and refused.value.field == "agent"
        # Refused before any admission: the one-run quota is still free.
        agent, _ = await answer(hub, StartRun(input="x", agent="parrot"))
        assert agent == "parrot"
        # Ingested runs belong to no agent.
        ingest = await hub.start(StartRun(source="ingest"))
        assert ingest.agent is None


async def test_a_threads_agent_that_is_no_longer_served_is_said_so() -> None:
    settings = two_agent_settings(journal="memory")
    async with build_hub(settings) as hub:
        await answer(hub, StartRun(input="first", agent="parrot", thread_id="t1"))
        # As a reload that drops it would leave the roster.
        hub.roster = build_agents(Settings(scripted_delay_s=0.0, agents={"coder": AgentSpec()}))
        with pytest.raises(UnknownAgent) as refused:
            await hub.start(StartRun(input="again", thread_id="t1"))
        assert "thread 't1' was with agent 'parrot', which this gateway no longer serves" in (
            refused.value.message
        )


async def test_the_journal_keeps_each_runs_agent(tmp_path: Path) -> None:
    settings = two_agent_settings(journal=f"sqlite:{tmp_path / 'runs.db'}")
    async with build_hub(settings) as hub:
        await answer(hub, StartRun(input="x", agent="parrot", thread_id="t1"))
    async with build_hub(settings) as hub:
        runs = await hub.list_runs()
        assert [r.agent for r in runs] == ["parrot"]
        # ... and a thread continued after a restart stays with it.
        agent, _ = await answer(hub, StartRun(input="y", thread_id="t1"))
        assert agent == "parrot"


def test_the_flags_define_an_agent_named_default_beside_declared_ones() -> None:
    alone = build_agents(Settings())
    assert alone.names() == ["default"] and not alone.several
    declared = {"coder": AgentSpec()}
    # Declared agents alone: the scripted defaults of the top level define no agent.
    assert build_agents(Settings(agents=declared)).names() == ["coder"]
    beside = build_agents(Settings(agents=declared, loop="tests.agents.parrot:loop"))
    assert beside.names() == ["default", "coder"]
    # ... unless one of the declared says it is the default.
    chosen = {"coder": AgentSpec(default=True)}
    assert build_agents(Settings(agents=chosen, loop="tests.agents.parrot:loop")).names() == [
        "coder",
        "default",
    ]
    with pytest.raises(ValueError, match=r"agent 'default' is declared twice"):
        build_agents(Settings(agents={"default": AgentSpec()}, loop="tests.agents.parrot:loop"))


def test_an_agent_shares_the_model_server_and_limits_of_the_top_level_unless_it_says() -> None:
    settings = Settings(
        provider="openai",
        openai_base_url="http://127.0.0.1:9/v1",
        openai_model="top",
        openai_api_key="sk-top",
        loop_config={"max_rounds": 3, "tool_timeout_ms": 500},
        agents={
            "small": AgentSpec(openai_model="small", loop_config={"max_rounds": 2}),
            "other": AgentSpec(
                openai_model="o", openai_base_url="http://127.0.0.1:8/v1", openai_api_key="sk-o"
            ),
            "demo": AgentSpec(),
        },
    )
    roster = build_agents(settings)
    assert roster.names() == ["default", "small", "other", "demo"]
    small = roster.resolve("small")
    assert small.model == "small" and small.provider_name == "openai"
    assert small.source.loop_config == {"max_rounds": 2, "tool_timeout_ms": 500}
    assert roster.resolve("demo").model == "loopgate-scripted"
    provider = roster.resolve("other").loop.provider  # type: ignore[attr-defined]
    assert (provider.model, provider.base_url) == ("o", "http://127.0.0.1:8/v1")
    assert roster.resolve("small").loop.provider.base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]


def test_an_agent_on_a_model_needs_its_server() -> None:
    with pytest.raises(ValueError, match="needs openai_base_url"):
        build_agents(Settings(agents={"a": AgentSpec(openai_model="m")}))


def test_two_defaults_are_one_too_many() -> None:
    text = "[agents.a]\ndefault = true\n[agents.b]\ndefault = true\n"
    with pytest.raises(ConfigError) as refused:
        parse_config(text, "loopgate.toml")
    assert refused.value.problems == ["loopgate.toml:4: agents.b.default: a is the default already"]


def test_config_show_prints_each_agent_with_its_secrets_masked() -> None:
    remote = (
        '[agents.remote]\nloop_url = "http://u:pw@127.0.0.1:9/run"\nloop_token = "secret-token"\n'
    )
    text = TWO_AGENTS_TOML + "\n" + remote
    settings = settings_from({}, None, parse_config(text, "loopgate.toml"))
    shown = settings_toml(settings)
    assert shown.endswith(
        "[agents.coder]\n"
        'description = "Writes and explains code"\n'
        "default = true\n"
        "\n"
        "[agents.parrot]\n"
        'description = "Repeats what you say"\n'
        'loop = "tests.agents.parrot:loop"\n'
        "\n"
        "[agents.remote]\n"
        'loop_url = "http://u:***@127.0.0.1:9/run"\n'
        'loop_token = "***"\n'
    )
    assert "secret-token" not in shown and "pw" not in shown
    # What it prints reads back as the same agents.
    again = settings_from({}, None, parse_config(shown.replace('"***"', '"x"'), "shown.toml"))
    assert list(again.agents) == ["coder", "parrot", "remote"]


async def test_traces_name_the_runs_agent() -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(SimpleSpanProcessor(exporter))
    async with build_hub(two_agent_settings(), telemetry=telemetry) as hub:
        await answer(hub, StartRun(input="x", agent="parrot"))
        await answer(hub, StartRun(input="y"))
    roots = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    names = sorted((s.name, (s.attributes or {}).get("gen_ai.agent.name")) for s in roots)
    assert names == [("invoke_agent coder", "coder"), ("invoke_agent parrot", "parrot")]
    telemetry.shutdown()


def test_agent_specs_are_plain_toml_tables() -> None:
    # The config's tables convert as msgspec converts them (no hand parsing).
    spec = msgspec.convert({"loop": "a:b", "description": "d"}, AgentSpec)
    assert spec.settings_values()["loop"] == "a:b" and "description" not in spec.settings_values()
