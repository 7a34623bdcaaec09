"""What a client may read about an error: our own words, never an exception's text.

An exception raised inside the server says what went wrong *inside the server* (Python's own
messages, a library's, paths, values). Only two kinds of text reach a client:

- the message of a :class:`ClientError`, which our code raises with a message written for the
  client (a template of ours filled with values);
- msgspec's description of a client's malformed input, through :func:`describe_input_error`
  (it names the input's path and types, nothing of ours), normalised and bounded.

Every error builder's caller goes through :func:`client_message` or one of those, and
``tests/tolerance/test_no_exception_text.py`` scans the code for any other way: ``str(exc)``,
``f"{exc}"``, ``repr(exc)`` or ``exc.args`` of a caught exception outside logging.
"""

from __future__ import annotations

from typing import Any

import msgspec

MAX_DETAIL_CHARS = 300


class ClientError(ValueError):
    """A refusal whose message was written for the client who caused it.

    A ``ValueError``, so code that catches validation errors keeps working; but only this type's
    message is ever shown to a client (a bare ``ValueError`` may come from ``int()`` and say
    ``invalid literal for int() with base 10``)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field  # the request's field at fault, where one is (JSON-RPC's ``param``)


def client_message(exc: BaseException) -> str | None:
    """The words for ``exc`` a client may read, or None when it is not one of ours.

    Ours: :class:`ClientError` and the ports' exceptions (contracts.ports), whose messages are
    templates in this package. Anything else (a ``ValueError`` from ``int()``, a library's
    error) is None: the caller answers with its generic message and logs the exception."""
    if isinstance(exc, ClientError):
        return bounded(exc.message)
    from . import ports  # ports import the envelope, which imports this module

    if isinstance(exc, ports.LimitReached | ports.Forbidden | ports.ThreadBusy):
        return bounded(exc.detail)
    if isinstance(exc, _port_errors(ports)) and exc.args and isinstance(exc.args[0], str):
        return bounded(exc.args[0])
    return None


def _port_errors(ports: Any) -> tuple[type[BaseException], ...]:
    return (ports.RunNotFound, ports.RunExists, ports.RunNotIngest, ports.RunFinished, ports.CutOff)


def describe_input_error(
    exc: msgspec.MsgspecError, *, root: str = "body", field_prefix: str = ""
) -> str:
    """msgspec's message about a client's input, in the client's terms.

    ``Expected `str`, got `int` - at `$.config.x``` becomes ``… - at `config.x``` (or
    ``field_prefix`` + path), a bare ``$`` becomes ``root``."""
    text = str(exc)
    text = (
        text.replace("`$.", "`" + field_prefix)
        .replace("`$[", f"`{root}[")
        .replace("`$`", f"`{root}`")
    )
    return bounded(text)


def bounded(text: str) -> str:
    """At most :data:`MAX_DETAIL_CHARS` characters: a client's own huge input echoed back in a
    message is a waste, and a message is no place for a dump."""
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"
