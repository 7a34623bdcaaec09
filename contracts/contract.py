"""The frozen runtime contract, read from ``runtime-contract.json``.

The JSON file is the single source of truth; the typed payloads, the hook protocol and
``LoopConfig`` are checked against it by the test suite.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

import msgspec


class RuntimeContract(msgspec.Struct, frozen=True, rename="camel"):
    coreloop_api: int
    event_kinds: tuple[str, ...]
    completion_statuses: tuple[str, ...]
    hooks: tuple[str, ...]
    loop_config: dict[str, Any]


@cache
def contract_bytes() -> bytes:
    return files("loopgate.contracts").joinpath("runtime-contract.json").read_bytes()


@cache
def load_contract() -> RuntimeContract:
    return msgspec.json.decode(contract_bytes(), type=RuntimeContract)


def contract_dict() -> dict[str, Any]:
    contract: dict[str, Any] = json.loads(contract_bytes())
    return contract


TERMINAL_EXCLUDED = "executing"


def is_terminal_completion(kind: str, data: dict[str, Any]) -> bool:
    """A turn ends only at a ``completion`` whose status is not ``executing``."""
    return kind == "completion" and data.get("status") != TERMINAL_EXCLUDED
