"""The part checks every run start goes through (contracts/parts.py): bytes against their
label, bounds, URLs never fetched, the loop's declared kinds; and the plain-string rule."""

from __future__ import annotations

import base64

import msgspec
import pytest

from loopgate.contracts.client_errors import ClientError
from loopgate.contracts.messages import Message
from loopgate.contracts.parts import (
    AttachmentLimits,
    FilePart,
    ImagePart,
    TextPart,
    check_content,
    content_of,
    media,
    parse_kinds,
    sniff,
    text_of,
)
from tests.attachments.support import NOTES, NOTES_B64, PDF_B64, PNG, PNG_B64

LIMITS = AttachmentLimits(max_part_bytes=1024, max_message_bytes=1500)


def check(*parts: object, accepts: frozenset[str] | None = None) -> None:
    check_content([(1, list(parts))], LIMITS, accepts)  # type: ignore[list-item]


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_text_only_content_stays_a_plain_string() -> None:
    assert content_of([TextPart(text="a"), TextPart(text="b")]) == "a\nb"
    encoded = msgspec.json.encode(Message(role="user", content="hi"))
    assert encoded == b'{"role":"user","content":"hi"}'


def test_a_message_with_parts_round_trips_as_json() -> None:
    message = Message(
        role="user",
        content=[TextPart(text="see"), media("image", url=f"data:image/png;base64,{PNG_B64}")],
    )
    decoded = msgspec.json.decode(msgspec.json.encode(message), type=Message)
    assert decoded == message
    [_, image] = decoded.content
    assert isinstance(image, ImagePart)
    assert (image.media_type, image.size, image.url) == ("image/png", len(PNG), None)


def test_sniff_knows_the_signatures() -> None:
    assert sniff(PNG[:16]) == "image/png"
    assert sniff(base64.b64decode(PDF_B64)[:16]) == "application/pdf"
    assert sniff(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert sniff(NOTES[:16]) is None


def test_well_labelled_parts_pass() -> None:
    check(
        ImagePart(media_type="image/png", data=PNG_B64),
        FilePart(media_type="text/plain", data=NOTES_B64, name="notes.txt"),
        FilePart(media_type="application/pdf", data=PDF_B64),
        ImagePart(url="https://example.com/a.png"),
    )


@pytest.mark.parametrize(
    ("part", "said"),
    [
        (
            ImagePart(media_type="image/png", data=PDF_B64),
            "labelled image/png but its bytes are application/pdf",
        ),
        (
            ImagePart(media_type="image/jpeg", data=PNG_B64),
            "labelled image/jpeg but its bytes are image/png",
        ),
        (
            FilePart(media_type="text/plain", data=PNG_B64),
            "labelled text/plain but its bytes are image/png",
        ),
        (FilePart(media_type="text/plain", data=b64(b"\xff\xfe\xfa")), "is not UTF-8 text"),
        (
            ImagePart(media_type="application/pdf", data=PDF_B64),
            "an image part labelled application/pdf",
        ),
        (ImagePart(media_type="image/png", data="not base64!"), "not valid base64"),
        (ImagePart(data=PNG_B64), "needs a media type"),
        (ImagePart(url="file:///etc/passwd"), "must be http(s) or inline data"),
        (ImagePart(), "needs data or a url"),
        (
            ImagePart(media_type="image/png", data=PNG_B64, size=1),
            "size says 1 bytes but its data is 69",
        ),
        (ImagePart(media_type="image/png", data=b64(PNG + b"\0" * 1024)), "over 1024 bytes"),
    ],
)
def test_bad_parts_are_refused_naming_the_part(part: object, said: str) -> None:
    with pytest.raises(ClientError) as refused:
        check(TextPart(text="look"), part)
    assert refused.value.message.startswith("message 1, part 2: ")
    assert said in refused.value.message


def test_a_message_over_its_bound_is_refused() -> None:
    half = ImagePart(media_type="image/png", data=b64(PNG + b"\0" * 800))
    check(half)
    with pytest.raises(ClientError, match="message 1: its attachments are over 1500 bytes"):
        check(half, half)


def test_a_kind_the_loop_does_not_take_is_refused_naming_it() -> None:
    image = ImagePart(media_type="image/png", data=PNG_B64)
    check(image, accepts=frozenset({"image"}))
    with pytest.raises(ClientError, match=r"does not take image parts \(it takes text, file\)"):
        check(TextPart(text="hi"), image, accepts=frozenset({"file"}))
    check(TextPart(text="text is always taken"), accepts=frozenset())


def test_declared_kinds_are_checked() -> None:
    assert parse_kinds("image, file,text") == {"image", "file"}
    with pytest.raises(ValueError, match="unknown part kind 'video'"):
        parse_kinds(["video"])


def test_text_of_names_what_it_cannot_show() -> None:
    content = [
        TextPart(text="see"),
        media("image", media_type="image/png", data=PNG_B64, name="dot.png"),
    ]
    assert text_of(content) == f"see\n[image dot.png (image/png, {len(PNG)} bytes)]"


def test_a_data_url_that_is_not_base64_is_refused() -> None:
    with pytest.raises(ClientError, match="not base64"):
        media("image", url="data:image/svg+xml,<svg/>")
