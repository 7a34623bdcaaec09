"""The MCP tools loopgate offers: their definitions (``tools/list``) and their arguments.

Arguments are checked against a msgspec Struct per tool, so a bad call gets a tool error that
names the argument (``invalid arguments for run: Expected `str`, got `int` - at `prompt```): an
MCP client shows a tool error to its model, which can correct the call. The JSON Schemas
below say the same for clients that check before calling.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ...contracts import parts
from ...contracts.client_errors import describe_input_error
from ...contracts.ports import MULTITASK_STRATEGIES, MultitaskStrategy

MAX_LIST = 100
DEFAULT_LIST = 20
RUN = "run"
GET_RUN = "get_run"
LIST_RUNS = "list_runs"
CANCEL_RUN = "cancel_run"

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]


class Resource(msgspec.Struct, rename="camel"):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


class Attachment(msgspec.Struct, rename="camel", kw_only=True):
    """An MCP content block sent with a prompt: ``image`` or ``audio`` (``data``, base64, and
    ``mimeType``), or an embedded ``resource`` (its ``text`` or ``blob``)."""

    type: Literal["image", "audio", "resource"]
    data: str | None = None
    mime_type: str | None = None
    resource: Resource | None = None


class RunArgs(msgspec.Struct, forbid_unknown_fields=True):
    prompt: Annotated[str, msgspec.Meta(min_length=1)]
    thread_id: Id | None = None
    attachments: list[Attachment] | None = None
    # One run per thread at a time (adapters/shared/multitask.py): what to do when it has one.
    multitask_strategy: MultitaskStrategy | None = None


def prompt_content(args: RunArgs) -> parts.Content:
    """The prompt with its attachments as the loop's content (the prompt alone: a string)."""
    if not args.attachments:
        return args.prompt
    out: list[parts.Part] = [parts.TextPart(text=args.prompt)]
    for index, block in enumerate(args.attachments):
        if block.type == "resource":
            res = block.resource
            if res is None or (res.text is None) == (res.blob is None):
                raise ArgumentError(
                    f"invalid arguments for run: attachments[{index}]: a resource needs its "
                    "uri and one of text or blob"
                )
            if res.text is not None:
                out.append(parts.ResourcePart(uri=res.uri, text=res.text, media_type=res.mime_type))
            else:
                name = res.uri.rsplit("/", 1)[-1] or None
                out.append(parts.media("file", media_type=res.mime_type, data=res.blob, name=name))
        elif block.data is None:
            raise ArgumentError(
                f"invalid arguments for run: attachments[{index}]: an {block.type} needs data"
            )
        else:
            out.append(parts.media(block.type, media_type=block.mime_type, data=block.data))
    return out


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
_ATTACHMENTS = {
    "type": "array",
    "description": "Images, audio and files for the agent, as MCP content blocks: "
    '{"type": "image", "data": BASE64, "mimeType": "image/png"}, audio alike, or '
    '{"type": "resource", "resource": {"uri", "text" or "blob", "mimeType"}}.',
    "items": {
        "type": "object",
        "properties": {
            "type": {"enum": ["image", "audio", "resource"]},
            "data": {"type": "string"},
            "mimeType": {"type": "string"},
            "resource": {"type": "object"},
        },
        "required": ["type"],
    },
}
_STRATEGY = {
    "enum": list(MULTITASK_STRATEGIES),
    "description": "When thread_id has a run going: reject (an error, as without this), "
    "enqueue (wait for its end, then continue from it), interrupt (cancel it, keep its "
    "output) or rollback (cancel it, leave it out of the thread).",
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
                "attachments": _ATTACHMENTS,
                "multitask_strategy": _STRATEGY,
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
