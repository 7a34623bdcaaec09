"""The MCP tools loopgate offers: their definitions (``tools/list``) and their arguments.

Arguments are checked against a msgspec Struct per tool, so a bad call gets a tool error that
names the argument (``invalid arguments for run: Expected `str`, got `int` - at `prompt```): an
MCP client shows a tool error to its model, which can correct the call. The JSON Schemas
below say the same for clients that check before calling.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ...contracts.client_errors import describe_input_error

MAX_LIST = 100
DEFAULT_LIST = 20
RUN = "run"
GET_RUN = "get_run"
LIST_RUNS = "list_runs"
CANCEL_RUN = "cancel_run"

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]


class RunArgs(msgspec.Struct, forbid_unknown_fields=True):
    prompt: Annotated[str, msgspec.Meta(min_length=1)]
    thread_id: Id | None = None


class RunIdArgs(msgspec.Struct, forbid_unknown_fields=True):
    run_id: Id


class ListArgs(msgspec.Struct, forbid_unknown_fields=True):
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIST)] = DEFAULT_LIST
    thread_id: Id | None = None


class ArgumentError(Exception):
    """A tool's arguments do not fit it; ``message`` says how, for the caller's model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


ARGUMENTS: dict[str, type[msgspec.Struct]] = {
    RUN: RunArgs,
    GET_RUN: RunIdArgs,
    LIST_RUNS: ListArgs,
    CANCEL_RUN: RunIdArgs,
}


def parse_arguments(
    tool: str, arguments: dict[str, Any] | None, struct: type[msgspec.Struct] | None = None
) -> Any:
    """The tool's arguments as its Struct (``struct``, else the one of that name);
    :class:`ArgumentError` when they do not fit."""
    try:
        return msgspec.convert(arguments or {}, struct or ARGUMENTS[tool])
    except msgspec.ValidationError as exc:
        detail = describe_input_error(exc, root="arguments")
        raise ArgumentError(f"invalid arguments for {tool}: {detail}") from None


_THREAD_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "description": "A thread: its runs form one conversation. Give the thread_id of an "
    "earlier run to continue it (the new run sees what was said before); leave it out "
    "to start a new thread.",
}
_RUN_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "description": "The run's id, as run's result (_meta.loopgate.runId) or list_runs gives it.",
}

# A run as get_run and list_runs describe it (the gateway's own run record).
RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "thread_id": {"type": "string"},
        "source": {"type": "string", "description": "loop, ingest or replay"},
        "state": {"type": "string", "description": "running or finished"},
        "status": {
            # anyOf, not a list of types: clients that map schemas onto one type per field
            # (Gemini's function declarations) take it.
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "how it ended (completed, failed, cancelled, waiting_user, …); "
            "null while it runs",
        },
        "created_at": {"type": "integer", "description": "unix time in nanoseconds"},
        "last_seq": {"type": "integer", "description": "the number of its events so far"},
        "subscribers": {"type": "integer"},
        "metadata": {"type": "object"},
        "input": {"type": "array", "description": "the messages it started from"},
        "events": {
            "type": "string",
            "description": "the resource holding its event log (resources/read)",
        },
    },
    "required": ["id", "thread_id", "state", "status", "events"],
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": RUN,
        "title": "Run the agent",
        "description": "Run the agent loop on a prompt and return its answer. Progress "
        "notifications report each step while it runs (the answer so far, the tools it "
        "calls). A run that asks the user a question returns the question: answer it with "
        "another run on the same thread_id.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "prompt": {
                    "type": "string",
                    "minLength": 1,
                    "description": "What to ask the agent (or the answer to its question).",
                },
                "thread_id": _THREAD_ID,
            },
            "required": ["prompt"],
            "additionalProperties": False,
        },
        "annotations": {
            "title": "Run the agent",
            "readOnlyHint": False,
            "destructiveHint": False,
            "openWorldHint": True,
        },
    },
    {
        "name": GET_RUN,
        "title": "Describe a run",
        "description": "Describe one run: its thread, state, status, input and event count.",
        "inputSchema": {
            "type": "object",
            "properties": {"run_id": _RUN_ID},
            "required": ["run_id"],
            "additionalProperties": False,
        },
        "outputSchema": RUN_SCHEMA,
        "annotations": {"title": "Describe a run", "readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": LIST_RUNS,
        "title": "List runs",
        "description": "List the gateway's runs, newest first (those of one thread with "
        "thread_id).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIST,
                    "default": DEFAULT_LIST,
                    "description": "At most this many runs.",
                },
                "thread_id": {**_THREAD_ID, "description": "Only this thread's runs."},
            },
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"runs": {"type": "array", "items": RUN_SCHEMA}},
            "required": ["runs"],
        },
        "annotations": {"title": "List runs", "readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": CANCEL_RUN,
        "title": "Cancel a run",
        "description": "Cancel a run that is still going. A finished run is left as it is "
        "(accepted: false).",
        "inputSchema": {
            "type": "object",
            "properties": {"run_id": _RUN_ID},
            "required": ["run_id"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "run_id": {"type": "string"},
                "accepted": {"type": "boolean"},
                "detail": {"type": "string"},
            },
            "required": ["run_id", "accepted", "detail"],
        },
        "annotations": {
            "title": "Cancel a run",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    },
]
