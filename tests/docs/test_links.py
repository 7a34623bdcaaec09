"""Every relative link of README.md and the docs resolves: the file exists, and its ``#anchor``
is a heading of that file as GitHub names it (lower case, punctuation dropped, each space a
``-``, ``-1``, ``-2`` … after a repeated heading)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.gateway.harness import REPO

DOCS = sorted({REPO / "README.md", *(REPO / "docs").glob("*.md")})
FENCED = re.compile(r"^ *```.*?^ *```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", re.M)
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for heading in HEADING.findall(FENCED.sub("", markdown)):
        name = slug(heading)
        found.add(f"{name}-{seen[name]}" if seen[name] else name)
        seen[name] += 1
    found.update(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", markdown))
    return found


def links(markdown: str) -> list[str]:
    prose = INLINE_CODE.sub("", FENCED.sub("", markdown))
    return [target for target in LINK.findall(prose) if not EXTERNAL.match(target)]


def broken(doc: Path) -> list[str]:
    problems = []
    for target in links(doc.read_text()):
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            problems.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            problems.append(f"{target}: no heading #{anchor} in {file.name}")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(doc: Path) -> None:
    assert broken(doc) == []


def test_the_slugs_are_githubs() -> None:
    markdown = "# Loop plugs — `benchmarks.loop_plugs`\n## Run it\n## Run it\n```\n# not one\n```\n"
    assert anchors(markdown) == {"loop-plugs--benchmarksloop_plugs", "run-it", "run-it-1"}


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# Top\nSee [b](b.md), [top](#top), [gone](#gone), `[code](x.md)`.\n")
    assert broken(doc) == ["b.md: no such file", "#gone: no heading #gone in a.md"]
