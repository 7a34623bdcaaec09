"""Structured output: the final answer checked against the run's ``response_format``.

``json_object`` asks for one JSON object; ``json_schema`` for JSON valid under the schema (JSON
Schema 2020-12). An answer that is not gets one repair round — the model is told what was wrong
— and a second miss ends the turn as ``failed{schema_mismatch}``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...contracts import json_input

MAX_DETAIL_CHARS = 300
SCHEMA_MISMATCH = "schema_mismatch"
REPAIR = (
    "Your answer is not what was asked for: {problem}. Reply again with only the JSON value, "
    "no other text and no code fence."
)
_decoder = msgspec.json.Decoder()


def answer_problem(response_format: dict[str, Any], text: str) -> str | None:
    """What is wrong with ``text`` as an answer in ``response_format``; ``None`` if nothing."""
    kind = response_format.get("type")
    if kind not in ("json_object", "json_schema"):
        return None
    body = _unfenced(text)
    try:
        value = json_input.decode(body, decoder=_decoder)
    except msgspec.DecodeError:
        return "it is not valid JSON"
    if kind == "json_object" or not isinstance(response_format.get("json_schema"), dict):
        return None if isinstance(value, dict) else "it is JSON, but not a JSON object"
    schema = response_format["json_schema"].get("schema") or {}
    return _schema_problem(schema, value)


def _schema_problem(schema: dict[str, Any], value: Any) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    found = best_match(Draft202012Validator(schema).iter_errors(value))
    if found is None:
        return None
    where = "/".join(str(p) for p in found.absolute_path) or "(root)"
    detail = found.message
    if len(detail) > MAX_DETAIL_CHARS:
        detail = detail[:MAX_DETAIL_CHARS] + "…"
    return f"it does not match the JSON schema at {where}: {detail}"


def _unfenced(text: str) -> str:
    """A model may wrap JSON in a Markdown code fence; the JSON inside is the answer."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and len(body) >= 6:
        body = body[3:-3]
        first_line, _, rest = body.partition("\n")
        body = rest if first_line.strip().isalpha() or not first_line.strip() else body
    return body.strip()
