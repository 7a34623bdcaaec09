"""The OpenAPI 3.1 description of the native API: its paths, and the schemas of the msgspec
Structs its endpoints decode and encode (``msgspec.json.schema_components``).

Two bodies are streams, which OpenAPI 3.1 has no item schema for: the SSE events and the
NDJSON ingest body are each described as a string, with the schema of one item under
``x-itemSchema`` (what OpenAPI 3.2 calls ``itemSchema``). The WebSocket ingest is the GET that
upgrades (101), the frames it takes under ``x-websocket``. Security is the gateway's, which
knows whether a token is set: gateway/apidocs/document.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ...contracts.contract import RuntimeContract
from ...contracts.envelope import Envelope, LoopEvent
from ...contracts.ports import CommandResult
from ..shared.numbers import MAX_DIGITS
from ..shared.problem import PROBLEM_TYPE, Problem
from .ingest import IngestResult
from .loop import AgentList, LoopView
from .me import MeView
from .runs import (
    LIMIT_DEFAULT,
    LIMIT_MAX,
    RespondBody,
    RunList,
    RunView,
    StartBody,
    SteerBody,
)
from .threads import ThreadBody, ThreadList, ThreadView

REF = "#/components/schemas/{name}"
JSON = "application/json"


class IngestProblem(Problem, kw_only=True):
    """A problem with an NDJSON body: which line (when one was to blame), and what of the body
    was accepted and kept before it (when reading had begun)."""

    line: int | msgspec.UnsetType = msgspec.UNSET
    accepted: int | msgspec.UnsetType = msgspec.UNSET
    last_seq: int | msgspec.UnsetType | None = msgspec.UNSET


def ref(typ: type[msgspec.Struct]) -> dict[str, Any]:
    return {"$ref": REF.format(name=typ.__name__)}


def json_body(typ: type[msgspec.Struct], description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": ref(typ)}}}


def problem(description: str, typ: type[Problem] = Problem) -> dict[str, Any]:
    return {"description": description, "content": {PROBLEM_TYPE: {"schema": ref(typ)}}}


# Error answers every operation of this kind may give, by status (docs/api.md#errors).
BAD_JSON = problem("malformed JSON, JSON nested too deep, or an empty body")
TOO_LARGE = problem("the body is over `max_body_bytes`")
INVALID = problem("a wrong field type, an unknown field, or a value the loop refuses")
NO_RUN = problem("no such run")
GONE = problem("the run finished and was dropped to stay within the retention bounds")
BUSY = problem("too many active runs or subscribers; `Retry-After` says when to try again")
UNAVAILABLE = problem("the gateway cannot serve this now (connections, Redis); try again")
_COMMON = {"503": UNAVAILABLE}


STRING = {"type": "string"}


def param(name: str, where: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": where, "description": description, "schema": schema}


RUN_ID = {**param("run_id", "path", "the run's id", STRING), "required": True}
THREAD_ID = {**param("thread_id", "path", "the thread's id", STRING), "required": True}
LIMIT = param(
    "limit",
    "query",
    "how many, newest first",
    {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX, "default": LIMIT_DEFAULT},
)
CURSOR = {"type": "string", "pattern": f"^[0-9]{{1,{MAX_DIGITS}}}$"}
FLAG = {"enum": ["1", "true"]}


def operation(
    operation_id: str,
    tag: str,
    summary: str,
    description: str,
    responses: dict[str, Any],
    *,
    parameters: Iterable[dict[str, Any]] = (),
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": operation_id,
        "tags": [tag],
        "summary": summary,
        "description": description,
    }
    if parameters:
        op["parameters"] = list(parameters)
    if body is not None:
        op["requestBody"] = body
    op["responses"] = {**responses, **_COMMON}
    return op


def request(typ: type[msgspec.Struct], *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {JSON: {"schema": ref(typ)}}}


def command(operation_id: str, summary: str, description: str, body: Any = None) -> dict[str, Any]:
    return operation(
        operation_id,
        "Runs",
        summary,
        description,
        {
            "202": json_body(CommandResult, "accepted"),
            "200": json_body(
                CommandResult, "nothing to act on: `accepted` is false, `detail` says why"
            ),
            **({"400": BAD_JSON, "413": TOO_LARGE, "422": INVALID} if body is not None else {}),
            "404": NO_RUN,
            "410": GONE,
        },
        parameters=[RUN_ID],
        body=request(body) if body is not None else None,
    )


def event_stream() -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "the envelope's `seq`"},
            "data": {
                "type": "string",
                "contentMediaType": JSON,
                "contentSchema": ref(Envelope),
            },
        },
        "required": ["id", "data"],
    }
    return {
        "description": "The run's envelopes as server-sent events: `id` is the seq, `data` the "
        "envelope's JSON; no `event:` line (every envelope is a `message` event). The stream "
        "ends after the run's terminal `completion`. A quiet stream gets a `: keep-alive` "
        "comment line.",
        "content": {
            "text/event-stream": {
                "schema": STRING,
                "x-itemSchema": item,
                "example": 'id: 1\ndata: {"run_id":"run_1","seq":1,"ts":1796024971708926219,'
                '"kind":"content_delta","data":{"delta":"Hel"}}\n\n',
            }
        },
    }


def paths() -> dict[str, dict[str, Any]]:
    return {
        "/v1/runs": {
            "post": operation(
                "startRun",
                "Runs",
                "Start a run",
                "Starts a run of the loop (or an ingest run your own loop pushes events into, "
                "or a recorded stream replayed). A prompt string on a `thread_id` that has runs "
                "continues that thread. A W3C `traceparent` header parents the run's trace.",
                {
                    "201": {
                        **json_body(RunView, "the run, started"),
                        "headers": {
                            "Location": {
                                "description": "the run's URL",
                                "schema": STRING,
                            }
                        },
                    },
                    "400": BAD_JSON,
                    "409": problem("the run id is taken, or the thread's latest run is going"),
                    "413": TOO_LARGE,
                    "422": INVALID,
                    "429": BUSY,
                },
                parameters=[
                    param(
                        "traceparent",
                        "header",
                        "W3C trace context: the run's trace becomes its child",
                        STRING,
                    )
                ],
                body=request(StartBody),
            ),
            "get": operation(
                "listRuns",
                "Runs",
                "List runs",
                "Runs, newest first; `thread_id` lists the runs of one thread.",
                {"200": json_body(RunList, "the runs"), "400": problem("a bad `limit`")},
                parameters=[
                    LIMIT,
                    param("thread_id", "query", "only the runs of this thread", STRING),
                ],
            ),
        },
        "/v1/runs/{run_id}": {
            "get": operation(
                "getRun",
                "Runs",
                "Get a run",
                "The run's state (`running`, `finished`), terminal status, last seq and input.",
                {"200": json_body(RunView, "the run"), "404": NO_RUN, "410": GONE},
                parameters=[RUN_ID],
            )
        },
        "/v1/runs/{run_id}/events": {
            "get": operation(
                "streamEvents",
                "Events",
                "Watch a run's events (SSE)",
                "The run's history, then its live events, as server-sent events. Resume with "
                "`Last-Event-ID` (what an `EventSource` sends on reconnect) or `?after=`: the "
                "events after that seq (the header wins). A cursor at or past the last seq of "
                "a finished run gets 204, which stops an `EventSource` reconnecting.",
                {
                    "200": event_stream(),
                    "204": {"description": "the run has finished and has nothing after the cursor"},
                    "400": problem("a bad cursor: not 1-19 ASCII digits"),
                    "404": NO_RUN,
                    "410": GONE,
                    "429": BUSY,
                },
                parameters=[
                    RUN_ID,
                    param("after", "query", "resume after this seq", CURSOR),
                    param(
                        "Last-Event-ID",
                        "header",
                        "resume after this seq (wins over `after`)",
                        CURSOR,
                    ),
                ],
            ),
            "post": operation(
                "pushEvents",
                "Ingest",
                "Push events into an ingest run (NDJSON)",
                "One LoopEvent (`{kind, data}`) per line; the body may be streamed. The answer "
                "comes once the events are committed. A terminal `completion` ends the run; "
                "`?end=1` ends it after this body (a missing terminal completion is then "
                "synthesised as `failed / truncated`). A bad line stops the request; the "
                "lines before it are kept.",
                {
                    "200": json_body(IngestResult, "the events were accepted and committed"),
                    "404": NO_RUN,
                    "409": problem("the run has finished, or is not an ingest run", IngestProblem),
                    "413": problem(
                        "a line over `max_line_bytes`, or past the run's limits", IngestProblem
                    ),
                    "422": problem("a line that is not a valid LoopEvent", IngestProblem),
                },
                parameters=[
                    RUN_ID,
                    param("end", "query", "`1`: this body is the rest of the run", FLAG),
                ],
                body={
                    "required": True,
                    "content": {
                        "application/x-ndjson": {
                            "schema": STRING,
                            "x-itemSchema": ref(LoopEvent),
                            "example": '{"kind":"content_delta","data":{"delta":"Hello"}}\n'
                            '{"kind":"completion","data":{"status":"completed"}}\n',
                        }
                    },
                },
            ),
        },
        "/v1/runs/{run_id}/ingest": {
            "get": {
                **operation(
                    "ingestSocket",
                    "Ingest",
                    "Push events into an ingest run (WebSocket)",
                    "A WebSocket: one LoopEvent JSON per text frame (`x-websocket`). The "
                    "gateway sends `{type: error, frame, detail}` for a rejected frame, `{type: "
                    "command, command: steer|cancel, …}` when a client steers or cancels, `{type: "
                    "ack, frame, seq}` with `?ack=1` once frames are committed, and `{type: end, "
                    "frame, seq}` when your terminal completion is committed. Closing before a "
                    "terminal completion ends the run as truncated.",
                    {
                        "101": {"description": "Switching Protocols: the WebSocket is open"},
                        "403": {
                            "description": "the upgrade was refused: an unknown or finished "
                            "run, or a browser `Origin` that is not allowed"
                        },
                    },
                    parameters=[
                        RUN_ID,
                        param("ack", "query", "`1`: acknowledge committed frames", FLAG),
                    ],
                ),
                # No OpenAPI version describes WebSocket messages: the frames a client sends.
                "x-websocket": {"clientFrame": ref(LoopEvent)},
            }
        },
        "/v1/runs/{run_id}/cancel": {
            "post": command(
                "cancelRun",
                "Cancel a run",
                "A loop run ends with `completion{cancelled}`; an ingest run's cancel is "
                "relayed to its loop over the ingest WebSocket.",
            )
        },
        "/v1/runs/{run_id}/steer": {
            "post": command(
                "steerRun",
                "Steer a run",
                "A message for the loop, applied at its next round boundary (the stream "
                "shows a `steer` event).",
                SteerBody,
            )
        },
        "/v1/runs/{run_id}/respond": {
            "post": command(
                "respondToPermission",
                "Answer a permission request",
                "Answers a `permission_request` event of the run by its `request_id`.",
                RespondBody,
            )
        },
        "/v1/threads": {
            "post": operation(
                "createThread",
                "Threads",
                "Record a thread",
                "Records a thread before (or besides) its runs, so that every client of the "
                "gateway finds it. No body at all is fine: an id is made up.",
                {
                    "201": {
                        **json_body(ThreadView, "the thread, recorded"),
                        "headers": {
                            "Location": {
                                "description": "the thread's URL",
                                "schema": STRING,
                            }
                        },
                    },
                    "400": BAD_JSON,
                    "409": problem("a thread of that id is already recorded"),
                    "413": TOO_LARGE,
                    "422": INVALID,
                },
                body=request(ThreadBody, required=False),
            ),
            "get": operation(
                "listThreads",
                "Threads",
                "List recorded threads",
                "Recorded threads, newest first.",
                {"200": json_body(ThreadList, "the threads"), "400": problem("a bad `limit`")},
                parameters=[LIMIT],
            ),
        },
        "/v1/threads/{thread_id}": {
            "get": operation(
                "getThread",
                "Threads",
                "Get a recorded thread",
                "The record; 404 when the thread was never recorded (it may still have runs).",
                {
                    "200": json_body(ThreadView, "the thread"),
                    "404": problem("no thread of that id is recorded"),
                },
                parameters=[THREAD_ID],
            ),
            "delete": operation(
                "forgetThread",
                "Threads",
                "Forget a recorded thread",
                "Forgets the record, not the thread's runs.",
                {
                    "204": {"description": "forgotten"},
                    "404": problem("no thread of that id is recorded"),
                },
                parameters=[THREAD_ID],
            ),
        },
        "/v1/contract": {
            "get": operation(
                "getContract",
                "Runs",
                "The runtime contract",
                "The event kinds, completion statuses, hooks and the loop's config fields "
                "with their defaults.",
                {"200": json_body(RuntimeContract, "the contract")},
            )
        },
        "/v1/agents": {
            "get": operation(
                "listAgents",
                "Runs",
                "The agents runs may be started on",
                "Each agent's `name` (a run's `agent`, an OpenAI `model`, the `{name}` of "
                "`/agents/{name}/…` paths), `description`, its `loop` (`reference`, "
                "`python:pkg.mod:attr`, `http:URL` or `stdio:COMMAND`) and, for the reference "
                "loop, its `model`; `default: true` on the one a run that names none goes to "
                "(listed first).",
                {"200": json_body(AgentList, "the agents, the default first")},
            )
        },
        "/v1/loop": {
            "get": operation(
                "getLoop",
                "Runs",
                "The default agent's loop",
                "`name`: `reference` (the reference loop), `python:pkg.mod:attr`, `http:URL` or "
                "`stdio:COMMAND`; `model`: the reference loop's model, null for a plugged loop "
                "(which names its model, if at all, in its runs' `stage_start` events).",
                {"200": json_body(LoopView, "the loop and its model")},
            )
        },
        "/v1/me": {
            "get": operation(
                "getMe",
                "Gateway",
                "Who you are signed in as",
                "The principal the gateway resolved for this request: its `subject` (which "
                "owns the runs it starts), `tenant`, `scopes`, display `name` and `via` (how "
                "it was proven). Never the credential. With no credential configured, a "
                "loopback gateway answers the machine's own user (`local`, an admin).",
                {"200": json_body(MeView, "the caller")},
            )
        },
    }


# Every type a schema above refers to: their schemas become the document's components.
SCHEMA_TYPES: tuple[type[msgspec.Struct], ...] = (
    StartBody,
    SteerBody,
    RespondBody,
    RunView,
    RunList,
    CommandResult,
    ThreadBody,
    ThreadView,
    ThreadList,
    IngestResult,
    Envelope,
    LoopEvent,
    RuntimeContract,
    LoopView,
    AgentList,
    MeView,
    Problem,
    IngestProblem,
)


def describe() -> dict[str, Any]:
    """``paths`` and ``components`` of the native API, for the gateway's OpenAPI document."""
    _, schemas = msgspec.json.schema_components(SCHEMA_TYPES, ref_template=REF)
    return {"paths": paths(), "components": {"schemas": schemas}}
