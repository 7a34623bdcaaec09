"""The one JSON-RPC validator and error table, as ACP and the JSON-RPC API apply them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from loopgate.adapters.acp.rpc import classify as acp_classify
from loopgate.adapters.jsonrpc.errors import MESSAGES
from loopgate.adapters.shared.jsonrpc import ACP, SPEC, Call, Invalid, Reply, batch_items, classify
from loopgate.adapters.shared.rpc_errors import AUTH_REQUIRED, codes

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("item", "spec", "acp"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "m"}, Call, Call),
        ({"jsonrpc": "2.0", "method": "m", "params": None}, -32600, Call),  # ACP: null = none
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1]}, Call, -32602),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": "x"}, -32600, -32602),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, Call, -32600),  # ACP ids are integers
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, -32600, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, Call, -32600),  # the spec's -32601 later
        ({"jsonrpc": "1.0", "id": 1, "method": "m"}, -32600, -32600),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, Reply, Reply),
        ({"jsonrpc": "2.0", "id": 1}, -32600, -32600),
        ("text", -32600, -32600),
    ],
)
def test_each_protocol_judges_an_item_by_its_rules(item: Any, spec: Any, acp: Any) -> None:
    for rules, expected in ((SPEC, spec), (ACP, acp)):
        judged = classify(item, rules)
        if isinstance(expected, int):
            assert isinstance(judged, Invalid) and judged.code == expected, (rules, judged)
        else:
            assert isinstance(judged, expected), (rules, judged)


def test_batches_are_the_json_rpc_apis_alone() -> None:
    assert batch_items([1, 2]) == [1, 2]
    assert batch_items([]) == Invalid(None, "empty batch")
    assert isinstance(batch_items([1], ACP), Invalid)
    _, error = acp_classify(b"[]")
    assert error is not None and error["error"]["code"] == -32600


def test_acp_words_errors_as_code_message_then_detail() -> None:
    _, error = acp_classify(b'{"jsonrpc": "2.0", "id": 3, "method": 7}')
    assert error == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32600,
            "message": 'Invalid Request: member "method" must be a non-empty string, got a number',
        },
    }


def test_acp_never_sends_its_authentication_code() -> None:
    # -32000 is "authentication required" to an ACP client: loopgate asks for none.
    source = "".join(p.read_text() for p in (DOCS.parent / "adapters" / "acp").glob("*.py"))
    assert "AUTH_REQUIRED" not in source
    assert not re.search(r"[(=,]\s*-32000\b", source)  # as a value: docs may name it
    assert codes("acp")[AUTH_REQUIRED].message == "Authentication required"


def test_the_docs_list_the_json_rpc_table() -> None:
    rows = re.findall(r"^\| (-32\d{3}) \| ([^|]+) \|", (DOCS / "jsonrpc.md").read_text(), re.M)
    assert {int(code): message.strip() for code, message in rows} == MESSAGES
