"""Attachments: a message's content as typed parts (text, image, audio, file, resource).

A message whose content is text only stays a plain string (``Message.content: str``), so loops
and recordings written before parts existed see nothing new. A message that carries anything
else holds a list of parts, each in one shape whichever front end it came from: inline bytes
(base64 ``data`` with ``media_type`` and ``size``) or a ``url`` the gateway passes on and never
fetches.

The checks here (:func:`check_content`) run once per run start, for every front end: each
inline part's bytes decode, fit the bounds and look like their media type; each part is of a
kind the loop takes. A refusal is a :class:`ClientError` naming the part.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from .client_errors import ClientError

PartKind = Literal["text", "image", "audio", "file", "resource"]
# The kinds a loop may declare it takes besides text (which every loop takes).
ATTACHMENT_KINDS: tuple[PartKind, ...] = ("image", "audio", "file", "resource")


class TextPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="text"):
    text: str


class _Media(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type"):
    """Bytes inline (``data``: base64, with ``media_type`` and ``size`` in bytes) or a ``url``:
    an http(s) URL, or a reference the client's service knows (an OpenAI ``file_id``).

    In a run's record the journal keeps inline bytes once, in its blob store: the part there
    has ``ref`` (``sha256:<hex>`` of the bytes) instead of ``data`` (contracts/blobs.py). A
    client never sends one; whoever reads a record back into a conversation resolves it."""

    media_type: str | None = None
    data: str | None = None
    size: int | None = None
    url: str | None = None
    name: str | None = None  # a file name, where the client gave one
    ref: str | None = None


class ImagePart(_Media, frozen=True, tag="image"):
    pass


class AudioPart(_Media, frozen=True, tag="audio"):
    pass


class FilePart(_Media, frozen=True, tag="file"):
    pass


class ResourcePart(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type", tag="resource"
):
    """Something the client names by URI (an ACP resource, an MCP one): with its text when the
    client embedded it, else a link the loop may resolve itself."""

    uri: str
    text: str | None = None
    media_type: str | None = None
    name: str | None = None


Part = TextPart | ImagePart | AudioPart | FilePart | ResourcePart
MediaPart = ImagePart | AudioPart | FilePart
Content = str | list[Part]


class AttachmentLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on attachments (docs/attachments.md): bytes of one inline part, and of all the
    inline parts of one message."""

    max_part_bytes: int = 5 << 20
    max_message_bytes: int = 10 << 20


# --- building parts -----------------------------------------------------------------------

_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[^;,]*)*)(;base64)?,", re.ASCII)


def decoded_size(data: str) -> int:
    """Bytes that ``data`` (base64) decodes to, from its length alone (checked later)."""
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def media(
    kind: Literal["image", "audio", "file"],
    *,
    media_type: str | None = None,
    data: str | None = None,
    url: str | None = None,
    name: str | None = None,
) -> MediaPart:
    """A media part, inline or by URL; a ``data:`` URL becomes inline bytes."""
    if url is not None and url.startswith("data:"):
        inline = from_data_url(url)
        if inline is None:
            raise ClientError(f"{kind} part: a data URL that is not base64 is not taken")
        url_type, data = inline
        media_type, url = media_type or url_type, None
    size = decoded_size(data) if data is not None else None
    if kind == "image":
        return ImagePart(media_type=media_type, data=data, size=size, url=url, name=name)
    if kind == "audio":
        return AudioPart(media_type=media_type, data=data, size=size, url=url, name=name)
    return FilePart(media_type=media_type, data=data, size=size, url=url, name=name)


def from_data_url(url: str) -> tuple[str | None, str] | None:
    """``(media type, base64 data)`` of a base64 ``data:`` URL; None for another URL."""
    found = _DATA_URL.match(url)
    if found is None or not found.group(3):
        return None
    return found.group(1), url[found.end() :]


def data_url(part: MediaPart) -> str | None:
    """The part as a ``data:`` URL (inline parts) or its own URL."""
    if part.data is not None:
        return f"data:{part.media_type or 'application/octet-stream'};base64,{part.data}"
    return part.url


def content_of(parts: Sequence[Part]) -> Content:
    """Text-only content as a plain string (the texts joined by newlines), else the parts."""
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart))
    return list(parts)


# --- reading content ----------------------------------------------------------------------


def kind_of(part: Part) -> PartKind:
    kind: PartKind = part.__struct_config__.tag  # type: ignore[assignment]
    return kind


def parts_of(content: Content) -> list[Part]:
    return [TextPart(text=content)] if isinstance(content, str) else list(content)


def attachments(content: Content) -> list[Part]:
    """The parts of ``content`` that are not text."""
    return [] if isinstance(content, str) else [p for p in content if not isinstance(p, TextPart)]


def describe(part: Part) -> str:
    """A placeholder naming a part that is not text, for where only text goes:
    ``[image shot.png (image/png, 5120 bytes)]``."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ResourcePart):
        label = part.name or part.uri
        return f"[resource {label}]"
    facts = [x for x in (part.media_type, f"{part.size} bytes" if part.size else None) if x]
    label = part.name or (part.url if part.data is None and part.url else "")
    inner = f" ({', '.join(facts)})" if facts else ""
    return f"[{kind_of(part)}{' ' + label if label else ''}{inner}]"


def text_of(content: Content) -> str:
    """The text of ``content``: text parts and embedded resources' text, other parts named by
    :func:`describe` (a model or a log that reads text knows something was attached)."""
    if isinstance(content, str):
        return content
    pieces = []
    for part in content:
        if isinstance(part, ResourcePart) and part.text is not None:
            pieces.append(part.text)
        else:
            pieces.append(describe(part))
    return "\n".join(pieces)


# --- checking content ---------------------------------------------------------------------

# Leading bytes of the formats clients attach. A part labelled with one of these types must
# start with its signature; a part whose bytes carry another one's signature is mislabelled.
_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
    "application/pdf": (b"%PDF-",),
    "audio/wav": (b"RIFF",),
    "audio/x-wav": (b"RIFF",),
    "audio/mpeg": (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"),
    "audio/ogg": (b"OggS",),
    "application/zip": (b"PK\x03\x04",),
}
_SUBTYPES = {"image/webp": (8, b"WEBP"), "audio/wav": (8, b"WAVE"), "audio/x-wav": (8, b"WAVE")}
_MEDIA_TYPE = re.compile(r"[\w.+-]+/[\w.+-]+", re.ASCII)
_TEXTUAL = ("application/json", "application/xml", "application/x-yaml", "application/yaml")


def _looks_like(media_type: str, head: bytes) -> bool:
    signatures = _SIGNATURES.get(media_type)
    if signatures is not None and not any(head.startswith(s) for s in signatures):
        return False
    sub = _SUBTYPES.get(media_type)
    return sub is None or head[sub[0] : sub[0] + len(sub[1])] == sub[1]


def sniff(head: bytes) -> str | None:
    """The media type ``head`` (a file's first bytes) carries a signature of, if any."""
    for media_type in _SIGNATURES:
        if _looks_like(media_type, head):
            return media_type
    return None


def is_textual(media_type: str | None) -> bool:
    return media_type is not None and (
        media_type.startswith("text/") or media_type in _TEXTUAL or media_type.endswith("+json")
    )


def _check_media(part: MediaPart, where: str, limits: AttachmentLimits) -> int:
    """Bytes of ``part`` once decoded (0 for a URL); ClientError saying what is wrong."""
    kind = kind_of(part)
    if part.ref is not None:
        raise ClientError(f"{where}: a {kind} part's ref is the journal's own; send data or a url")
    if part.data is None:
        if not part.url:
            raise ClientError(f"{where}: a {kind} part needs data or a url")
        if part.url.startswith(("http://", "https://")) or "://" not in part.url:
            return 0  # passed on, never fetched; a bare id is a reference the service knows
        raise ClientError(f"{where}: a {kind} url must be http(s) or inline data")
    media_type = part.media_type
    if not media_type or not _MEDIA_TYPE.fullmatch(media_type):
        raise ClientError(f"{where}: inline {kind} data needs a media type (type/subtype)")
    media_type = media_type.lower()
    if kind in ("image", "audio") and not media_type.startswith(f"{kind}/"):
        raise ClientError(f"{where}: an {kind} part labelled {media_type} is not an {kind}")
    if decoded_size(part.data) > limits.max_part_bytes:
        raise ClientError(
            f"{where}: the {kind} part is over {limits.max_part_bytes} bytes "
            f"(about {decoded_size(part.data)})"
        )
    try:
        # Strict: whitespace or any other character outside the alphabet is refused, as
        # base64.b64decode(validate=True) does, without its regex pass over the whole string.
        raw = binascii.a2b_base64(part.data, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ClientError(f"{where}: the {kind} part's data is not valid base64") from None
    if part.size is not None and part.size != len(raw):
        raise ClientError(
            f"{where}: the {kind} part's size says {part.size} bytes but its data is {len(raw)}"
        )
    head = raw[:16]
    found = sniff(head)
    if media_type in _SIGNATURES:
        labelled_right = _looks_like(media_type, head)
    else:  # a type we know no signature of: right unless the bytes are another known one
        labelled_right = found is None or media_type == "application/octet-stream"
    if not labelled_right:
        raise ClientError(
            f"{where}: the {kind} part is labelled {media_type} but its bytes are "
            f"{found or 'not ' + media_type}"
        )
    if is_textual(media_type):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ClientError(
                f"{where}: the file is labelled {media_type} but is not UTF-8 text"
            ) from None
    return len(raw)


def check_content(
    messages: Iterable[tuple[int, Content]],
    limits: AttachmentLimits,
    accepts: frozenset[str] | None,
) -> None:
    """Refuse (ClientError) a part a loop that takes only ``accepts`` cannot have (None: any
    kind), or one over the bounds, malformed or mislabelled. ``messages`` pairs each message's
    number (from 1, as the client counts them) with its content."""
    for number, content in messages:
        if isinstance(content, str):
            continue
        total = 0
        for index, part in enumerate(content, 1):
            where = f"message {number}, part {index}"
            kind = kind_of(part)
            if kind != "text" and accepts is not None and kind not in accepts:
                taken = ", ".join(["text", *sorted(accepts)])
                raise ClientError(
                    f"{where}: this agent does not take {kind} parts (it takes {taken})",
                    field="content",
                )
            if isinstance(part, ImagePart | AudioPart | FilePart):
                total += _check_media(part, where, limits)
            if total > limits.max_message_bytes:
                raise ClientError(
                    f"message {number}: its attachments are over {limits.max_message_bytes} bytes"
                )


def parse_kinds(value: str | Iterable[str]) -> frozenset[str]:
    """``"image,file"`` or ``["image", "file"]`` as kinds; ValueError naming one unknown."""
    names = value.split(",") if isinstance(value, str) else list(value)
    kinds = {n.strip() for n in names if n.strip() and n.strip() != "text"}
    unknown = sorted(kinds - set(ATTACHMENT_KINDS))
    if unknown:
        raise ValueError(
            f"unknown part kind {unknown[0]!r}: a loop takes text and any of "
            f"{', '.join(ATTACHMENT_KINDS)}"
        )
    return frozenset(kinds)
