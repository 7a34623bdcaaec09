"""Secrets out of the log: ``token=…`` (a WebSocket's ``?token=``, a URL in an error) becomes
``token=[redacted]`` in every line the server's handlers write, access log included, however
the name is percent-encoded (``tok%65n=``).

A filter on the handlers, not on loggers: a logger's filters do not see records propagated from
its children, a handler's see every record it writes.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any


def _spelled(word: str) -> str:
    """A pattern for ``word`` with any of its letters percent-encoded: a query's names are
    decoded before they are looked up, so ``?tok%65n=`` authenticates as ``?token=`` does and
    must be redacted as it is."""
    return "".join(f"(?:{re.escape(c)}|%{ord(c.lower()):02x}|%{ord(c.upper()):02x})" for c in word)


# The name (letters possibly percent-encoded, ``=`` too: a URL inside another one's query), then
# the value up to the end of the query parameter or of the word: ``&``, space, quote or bracket;
# not what is redacted already.
_SECRET = re.compile(rf"(?i)({_spelled('token')}(?:=|%3d))(?!\[redacted\])[^&\s\"'<>\])]+")
REDACTED = r"\1[redacted]"


def redact(text: str) -> str:
    return _SECRET.sub(REDACTED, text) if "=" in text or "%" in text else text


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            args = record.args.items()
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in args}
        try:
            message = record.getMessage()
        except Exception:
            return True  # the formatter will report the broken record itself
        if _SECRET.search(message):
            # An argument whose str() holds the secret (a URL object, an exception).
            record.msg, record.args = redact(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install_redaction() -> None:
    """Put the filter on every handler configured now (uvicorn's, ours, the root's).

    The root logger gets a stderr handler if it has none, the one ``logging.basicConfig`` would
    add the first time a library logs an error — added then, it would not be filtered.
    """
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
        root.addHandler(handler)
    loggers: list[Any] = [root, *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(RedactSecrets())
