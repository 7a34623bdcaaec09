"""The runtime contract file and the code agree; the committed envelope schema is current."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from loopgate.contracts import PAYLOAD_TYPES, load_contract
from loopgate.contracts.contract import contract_dict
from loopgate.contracts.envelope import envelope_schema
from loopgate.contracts.events import CompletionStatus
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.hooks import HOOK_NAMES, LoopHooks, NoHooks

SCHEMA = Path(__file__).resolve().parent.parent / "contracts" / "schema" / "envelope.schema.json"


def _protocol_methods(cls: type) -> list[str]:
    return [
        name
        for name, member in vars(cls).items()
        if inspect.isfunction(member) and not name.startswith("_")
    ]


def test_event_kinds_match_payload_types():
    assert list(load_contract().event_kinds) == list(PAYLOAD_TYPES)


def test_completion_statuses_match():
    assert list(load_contract().completion_statuses) == list(CompletionStatus.__args__)


def test_hooks_match_loop_hooks_protocol():
    hooks = list(load_contract().hooks)
    assert _protocol_methods(LoopHooks) == hooks
    assert _protocol_methods(NoHooks) == hooks
    assert list(HOOK_NAMES) == hooks


def test_loop_config_fields_and_defaults():
    expected = contract_dict()["loopConfig"]
    assert list(LoopConfig.field_names()) == list(expected)
    assert LoopConfig().to_dict() == expected


def test_coreloop_api_version():
    assert load_contract().coreloop_api == 1


def test_envelope_schema_is_not_stale():
    committed = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert committed == envelope_schema(), (
        "contracts/schema/envelope.schema.json is stale; regenerate it from "
        "contracts.envelope.envelope_schema() (pretty JSON, sorted keys)"
    )
    expected_text = json.dumps(envelope_schema(), indent=2, sort_keys=True, ensure_ascii=False)
    assert SCHEMA.read_text(encoding="utf-8") == expected_text + "\n"


def test_parts_shape_is_versioned():
    """The parts' kinds and a media part's fields (``ref`` among them since version 2: the
    journal keeps bytes by reference) are what contracts/parts.py defines."""
    from loopgate.contracts.parts import ImagePart, Part

    parts = contract_dict()["parts"]
    assert parts["version"] == 2
    assert parts["kinds"] == [t.__struct_config__.tag for t in Part.__args__]
    assert parts["mediaFields"] == list(ImagePart.__struct_fields__)
