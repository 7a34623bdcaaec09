"""Attachments kept by reference: a run's record holds each inline part's bytes once, in the
journal's blob store, under their sha256.

A part in a record has ``ref`` (``sha256:<hex>`` of its decoded bytes) in place of ``data``;
``size``, ``media_type`` and ``name`` stay, so whatever reads only the text of a conversation
(titles, placeholders) needs no bytes. :func:`by_reference` turns a conversation into that
form and the bytes it refers to; :func:`resolved` turns it back, given those bytes.

The part's shape (``ref`` among its fields) is versioned in the runtime contract
(``parts.version``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable, Mapping

import msgspec

from .messages import Message
from .parts import AudioPart, FilePart, ImagePart, MediaPart, Part

REF_PREFIX = "sha256:"
_MEDIA = (ImagePart, AudioPart, FilePart)


def ref_of(raw: bytes) -> str:
    return REF_PREFIX + hashlib.sha256(raw).hexdigest()


def by_reference(messages: list[Message]) -> tuple[list[Message], dict[str, bytes]]:
    """``messages`` with each inline part as a reference, and the bytes referred to (each
    once, whatever number of parts carry them). Messages without inline parts are the same
    objects. The parts were checked (contracts.parts.check_content): their data decodes."""
    blobs: dict[str, bytes] = {}

    def stash(part: MediaPart) -> MediaPart:
        raw = binascii.a2b_base64(part.data or "")
        ref = ref_of(raw)
        blobs[ref] = raw
        return msgspec.structs.replace(part, data=None, ref=ref)

    return _rewritten(messages, _inline, stash), blobs


def refs_in(messages: Iterable[Message]) -> set[str]:
    """The blobs ``messages`` refer to."""
    found: set[str] = set()
    for message in messages:
        if not isinstance(message.content, str):
            found.update(p.ref for p in message.content if isinstance(p, _MEDIA) and p.ref)
    return found


def resolved(messages: list[Message], blobs: Mapping[str, bytes]) -> list[Message]:
    """``messages`` with each reference's bytes inline again (base64 ``data``); a reference
    whose bytes are not in ``blobs`` stays as it is. Each blob is encoded once, however many
    parts refer to it."""
    encoded: dict[str, str] = {}

    def found(part: Part) -> bool:
        return isinstance(part, _MEDIA) and part.ref is not None and part.ref in blobs

    def inline(part: MediaPart) -> MediaPart:
        ref = part.ref or ""
        data = encoded.get(ref)
        if data is None:
            data = encoded[ref] = base64.b64encode(blobs[ref]).decode("ascii")
        return msgspec.structs.replace(part, data=data, ref=None)

    return _rewritten(messages, found, inline)


def _rewritten(
    messages: list[Message],
    chosen: Callable[[Part], bool],
    rewrite: Callable[[MediaPart], MediaPart],
) -> list[Message]:
    """``messages`` with each ``chosen`` part (a media part) rewritten; a message with none is
    the same object."""
    out: list[Message] = []
    for message in messages:
        content = message.content
        if isinstance(content, str) or not any(chosen(p) for p in content):
            out.append(message)
            continue
        parts: list[Part] = [
            rewrite(p) if isinstance(p, _MEDIA) and chosen(p) else p for p in content
        ]
        out.append(msgspec.structs.replace(message, content=parts))
    return out


def _inline(part: Part) -> bool:
    return isinstance(part, _MEDIA) and part.data is not None
