"""A2A 1.0's JSON objects as the ``a2a-sdk`` (1.x) reads them: ProtoJSON of ``a2a.proto``
(camelCase names, enum values by name, absent fields left out).

Only what loopgate sends or reads is here. A stream item (``StreamResponse``) is one of
``task``, ``message``, ``statusUpdate`` or ``artifactUpdate``: the projector makes the inner
object and :func:`stream_item` names its case.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

PROTOCOL_VERSION = "1.0"
# A2AInterface.protocolBinding values.
JSONRPC_BINDING = "JSONRPC"
HTTP_JSON_BINDING = "HTTP+JSON"

TaskState = Literal[
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
]
SUBMITTED: TaskState = "TASK_STATE_SUBMITTED"
WORKING: TaskState = "TASK_STATE_WORKING"
INPUT_REQUIRED: TaskState = "TASK_STATE_INPUT_REQUIRED"
COMPLETED: TaskState = "TASK_STATE_COMPLETED"
FAILED: TaskState = "TASK_STATE_FAILED"
CANCELED: TaskState = "TASK_STATE_CANCELED"
TERMINAL_STATES = frozenset({COMPLETED, FAILED, CANCELED, "TASK_STATE_REJECTED"})
Role = Literal["ROLE_USER", "ROLE_AGENT"]


class Part(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """One of ``text``, ``data`` (any JSON), ``url`` or ``raw`` (base64), with its metadata."""

    text: str | UnsetType = UNSET
    data: Any | UnsetType = UNSET
    url: str | UnsetType = UNSET
    raw: str | UnsetType = UNSET
    media_type: str | UnsetType = UNSET
    filename: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class Message(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    message_id: str
    role: Role | str
    parts: list[Part] = msgspec.field(default_factory=list)
    context_id: str | UnsetType = UNSET
    task_id: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    extensions: list[str] | UnsetType = UNSET
    reference_task_ids: list[str] | UnsetType = UNSET


class TaskStatus(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    state: TaskState
    message: Message | UnsetType = UNSET
    timestamp: str | UnsetType = UNSET


class Artifact(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    artifact_id: str
    parts: list[Part] = msgspec.field(default_factory=list)
    name: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class Task(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[Artifact] = msgspec.field(default_factory=list)
    history: list[Message] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] | UnsetType = UNSET


class StatusUpdate(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """``TaskStatusUpdateEvent``."""

    task_id: str
    context_id: str
    status: TaskStatus
    metadata: dict[str, Any] | UnsetType = UNSET


class ArtifactUpdate(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """``TaskArtifactUpdateEvent``: ``append`` adds the parts to the artifact of that id."""

    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | UnsetType = UNSET


Item = Task | Message | StatusUpdate | ArtifactUpdate
_CASES: dict[type[Any], str] = {
    Task: "task",
    Message: "message",
    StatusUpdate: "statusUpdate",
    ArtifactUpdate: "artifactUpdate",
}


def stream_item(item: Item) -> dict[str, Item]:
    """The ``StreamResponse`` (also ``SendMessageResponse``) carrying ``item``."""
    return {_CASES[type(item)]: item}


# --- what clients send -------------------------------------------------------------------------


class SendConfiguration(msgspec.Struct, kw_only=True, rename="camel"):
    accepted_output_modes: list[str] = msgspec.field(default_factory=list)
    history_length: int | None = None
    return_immediately: bool = False
    task_push_notification_config: dict[str, Any] | None = None


class SendParams(msgspec.Struct, kw_only=True, rename="camel"):
    """``SendMessageRequest`` (the params of SendMessage and SendStreamingMessage)."""

    message: Message
    configuration: SendConfiguration | None = None
    metadata: dict[str, Any] | None = None
    tenant: str = ""


class TaskParams(msgspec.Struct, kw_only=True, rename="camel"):
    """``GetTaskRequest``, ``CancelTaskRequest``, ``SubscribeToTaskRequest``."""

    id: str
    history_length: int | None = None
    metadata: dict[str, Any] | None = None
    tenant: str = ""


class ListParams(msgspec.Struct, kw_only=True, rename="camel"):
    """``ListTasksRequest``."""

    context_id: str = ""
    status: str = ""
    page_size: int | None = None
    page_token: str = ""
    history_length: int | None = None
    include_artifacts: bool = False
    tenant: str = ""


class PushConfig(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """``TaskPushNotificationConfig``."""

    task_id: str = ""
    id: str = ""
    url: str = ""
    token: str | UnsetType = UNSET
    authentication: dict[str, Any] | UnsetType = UNSET
    tenant: str | UnsetType = UNSET


class PushConfigParams(msgspec.Struct, kw_only=True, rename="camel"):
    """``Get``/``Delete``/``ListTaskPushNotificationConfig(s)Request``."""

    task_id: str
    id: str = ""
    page_size: int | None = None
    page_token: str = ""
    tenant: str = ""


def timestamp(ns: int) -> str:
    """RFC 3339 in UTC with nanoseconds, as ProtoJSON writes a Timestamp (deterministic)."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos:09d}Z"
