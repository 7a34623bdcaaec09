"""The hook actions in the contract file match the code, and docs/reference-loop.md lists every
LoopConfig field (with its default) and every hook and action."""

from __future__ import annotations

import json
import re
from pathlib import Path

from loopgate.contracts.contract import contract_dict
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.hooks import ALLOWED_ACTIONS, COMPOSITION, HOOK_NAMES

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference-loop.md"


def _tag(cls: type) -> str:
    return str(cls.__struct_config__.tag)  # type: ignore[attr-defined]


def test_contract_hook_actions_match_the_code():
    expected = {hook: [_tag(cls) for cls in ALLOWED_ACTIONS[hook]] for hook in HOOK_NAMES}
    assert contract_dict()["hookActions"] == expected


def test_every_hook_has_a_composition_rule():
    assert list(COMPOSITION) == list(HOOK_NAMES)


def test_the_doc_lists_every_field_with_its_default():
    rows: dict[str, str] = {}
    for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", DOC.read_text("utf-8"), re.M):
        # The settings table comes first; the bounds table after it repeats the names.
        rows.setdefault(m.group(1), m.group(2))
    for name, default in LoopConfig().to_dict().items():
        assert name in rows, f"docs/reference-loop.md does not list {name}"
        shown = rows[name].strip().strip("`")
        assert json.loads(shown) == default, f"{name}: the doc says {shown}, the code {default}"


def test_the_doc_names_every_hook_and_action():
    text = DOC.read_text("utf-8")
    for hook, actions in ALLOWED_ACTIONS.items():
        assert f"`{hook}(ctx" in text, hook
        for cls in actions:
            assert f"`{cls.__name__}(" in text, f"{hook}: {cls.__name__}"
