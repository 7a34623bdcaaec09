"""examples/adapter_text, the worked example of docs/architecture.md ("Adding a protocol"):
its goldens for every recording, its endpoint on a real server, and the doc's excerpts of it.

After reviewing a change to the example's output, regenerate its goldens with
``.venv/bin/python -m tests.examples.test_adapter_example``.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conformance.runner import load_stream, stream_paths
from examples.adapter_text import ADAPTER
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.projector import ProjectorContext, as_served, project_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "adapter_text"
EXPECTED = EXAMPLE / "expected"
DOC = ROOT / "docs" / "architecture.md"
STREAMS = stream_paths()
REGENERATE = "regenerate with: .venv/bin/python -m tests.examples.test_adapter_example"
# A code block the doc takes from the example: `<!-- from examples/adapter_text/FILE -->` on the
# line before its fence.
EXCERPT = re.compile(r"<!-- from (examples/adapter_text/[\w./]+) -->\n```python\n(.*?)```", re.S)


def transcript(stream: Path) -> bytes:
    """What a client of ``GET /text/runs/{id}`` receives for the recorded run."""
    return ADAPTER.render(project_run(ADAPTER, as_served(load_stream(stream))))


def golden(stream: Path) -> Path:
    return EXPECTED / f"{stream.stem}.txt"


# --- goldens -------------------------------------------------------------------------------------


def test_every_recording_has_a_golden_and_every_golden_a_recording() -> None:
    assert STREAMS, "conformance/streams is empty"
    assert {p.stem for p in EXPECTED.glob("*.txt")} == {s.stem for s in STREAMS}, REGENERATE


@pytest.mark.parametrize("stream", STREAMS, ids=lambda p: p.stem)
def test_transcript_is_its_golden(stream: Path) -> None:
    actual = transcript(stream)
    # Every run's transcript opens with the run and ends with its terminal line.
    assert actual.startswith(f"run {stream.stem}\n".encode())
    assert actual.splitlines()[-1].startswith(b"[end ")
    assert actual == golden(stream).read_bytes(), f"{stream.name}: {REGENERATE}"


def test_a_changed_run_no_longer_matches_its_golden() -> None:
    """The comparison above sees a one-character change in one delta."""
    stream = next(s for s in STREAMS if s.stem == "plain-answer")
    envelopes = load_stream(stream)
    i = next(i for i, e in enumerate(envelopes) if e.kind == "content_delta")
    e = envelopes[i]
    envelopes[i] = Envelope(e.run_id, e.seq, e.ts, e.kind, {"delta": e.data["delta"] + "!"})
    assert ADAPTER.render(project_run(ADAPTER, envelopes)) != golden(stream).read_bytes()


def _feed(*events: tuple[str, dict[str, object]]) -> str:
    projector = ADAPTER.projector(ProjectorContext(run_id="r", thread_id="r"))
    out = projector.start()
    for seq, (kind, data) in enumerate(events, 1):
        out += projector.feed(Envelope("r", seq, seq, kind, dict(data)))
    return ADAPTER.render(out + projector.close()).decode()


def test_the_cases_no_recording_has() -> None:
    """An orphan result is announced first; a stream cut short closes its text, then says so."""
    assert _feed(
        ("content_delta", {"delta": "a\nb"}),
        ("x_note", {}),
        ("content_delta", {"delta": "c"}),
        ("tool_call_result", {"id": "c1", "name": "ls", "success": True, "resultPreview": "ok"}),
    ) == (
        "run r\ntext: a\n  b\n· x_note\n  c\n"
        "[tool ls(?)]\n[result ls: ok]\n[end failed: truncated]\n"
    )


def test_the_example_depends_on_contracts_and_adapters_only() -> None:
    """The layering of tests/test_layers.py: an adapter never imports the gateway."""
    allowed = {"contracts", "adapters", "examples", "msgspec", "starlette"}
    for path in EXAMPLE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                parts = node.module.split(".")
                top = parts[1] if parts[0] == "loopgate" else parts[0]
                assert top in allowed | set(sys.stdlib_module_names), (path.name, top)


# --- the endpoint on a real server --------------------------------------------------------------


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example installed as a third-party package would be: a distribution on sys.path
    whose entry point names the adapter (what pip writes for the pyproject.toml of the doc)."""
    dist = tmp_path / "loopgate_text_example-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: loopgate-text-example\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[loopgate.adapters]\ntext = examples.adapter_text:ADAPTER\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.fixture
def gateway(installed: None) -> Iterator[str]:
    from tests.gateway.harness import running_gateway

    with running_gateway() as (base, _):
        yield base


def test_the_gateway_finds_the_installed_adapter(installed: None) -> None:
    from loopgate.gateway.registry import load_adapters

    assert load_adapters()["text"] is ADAPTER


def test_replay_prints_the_goldens(
    installed: None, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    from loopgate.gateway.cli import main

    for stream in STREAMS:
        assert main(["replay", str(stream), "--adapter", "text"]) == 0
        assert capsysbinary.readouterr().out == golden(stream).read_bytes(), stream.name


def test_a_live_run_streams_as_it_goes(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=10) as client:
        assert "text" in client.get("/healthz").json()["adapters"]
        run_id = client.post("/v1/runs", json={"source": "ingest"}).json()["id"]
        with client.stream("GET", f"/text/runs/{run_id}") as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/plain; charset=utf-8"
            chunks = response.iter_bytes()
            # Sent before the run has any event: the client sees the stream open at once.
            assert next(chunks) == f"run {run_id}\n".encode()
            events = [
                {"kind": "content_delta", "data": {"delta": "Hello"}},
                {"kind": "content_delta", "data": {"delta": ", world"}},
                {"kind": "completion", "data": {"status": "completed", "reason": "stop"}},
            ]
            body = "".join(json.dumps(e) + "\n" for e in events)
            pushed = client.post(f"/v1/runs/{run_id}/events", content=body)
            assert pushed.status_code == 200, pushed.text
            rest = b"".join(chunks)
    assert rest == b"text: Hello, world\n[end completed: stop; tokens 0 in, 0 out]\n"


def test_replayed_runs_stream_their_goldens(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as client:
        for stream in STREAMS:
            started = client.post("/v1/runs", json={"replay": stream.stem, "run_id": stream.stem})
            assert started.status_code == 201, started.text
            served = client.get(f"/text/runs/{stream.stem}")
            assert served.content == golden(stream).read_bytes(), stream.name


def test_a_missing_run_is_a_problem(gateway: str) -> None:
    response = httpx.get(f"{gateway}/text/runs/nope", timeout=10)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


# --- the doc -------------------------------------------------------------------------------------


def test_the_doc_shows_the_example_verbatim() -> None:
    excerpts = EXCERPT.findall(DOC.read_text(encoding="utf-8"))
    assert {path for path, _ in excerpts} == {
        "examples/adapter_text/projector.py",
        "examples/adapter_text/adapter.py",
    }
    for path, code in excerpts:
        assert code in (ROOT / path).read_text(encoding="utf-8"), f"{path}: the doc has drifted"


def test_the_doc_shows_a_golden_verbatim() -> None:
    doc = DOC.read_text(encoding="utf-8")
    shown = re.search(
        r"<!-- from (examples/adapter_text/expected/[\w.-]+) -->\n```\n(.*?)```", doc, re.S
    )
    assert shown is not None
    assert shown[2] == (ROOT / shown[1]).read_text(encoding="utf-8")


def write_goldens() -> None:
    EXPECTED.mkdir(exist_ok=True)
    for stale in EXPECTED.glob("*.txt"):
        stale.unlink()
    for stream in STREAMS:
        golden(stream).write_bytes(transcript(stream))
    print(f"wrote {len(STREAMS)} goldens to {EXPECTED.relative_to(ROOT)}")


if __name__ == "__main__":
    write_goldens()
