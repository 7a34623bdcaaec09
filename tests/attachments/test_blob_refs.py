"""Parts by reference (contracts/blobs.py): the same bytes in several messages are one blob;
resolving gives back the messages as they were; a client cannot send a reference."""

from __future__ import annotations

import pytest

from loopgate.contracts.blobs import by_reference, refs_in, resolved
from loopgate.contracts.client_errors import ClientError
from loopgate.contracts.messages import Message
from loopgate.contracts.parts import AttachmentLimits, ImagePart, TextPart, check_content
from tests.attachments.support import PNG, PNG_B64, sha

IMAGE = ImagePart(media_type="image/png", data=PNG_B64, name="dot.png")


def test_the_same_bytes_in_three_messages_are_one_blob_and_resolve_back() -> None:
    messages = [
        Message(role="user", content=[TextPart(text="see"), IMAGE]),
        Message(role="assistant", content="a dot"),
        Message(role="user", content=[IMAGE, TextPart(text="again")]),
        Message(role="user", content=[ImagePart(url="https://example.com/cat.png")]),
    ]
    kept, blobs = by_reference(messages)
    assert blobs == {f"sha256:{sha(PNG)}": PNG}
    assert refs_in(kept) == set(blobs)
    first = kept[0].content[1]
    assert isinstance(first, ImagePart) and first.data is None and first.name == "dot.png"
    assert kept[1] is messages[1] and kept[3] is messages[3]  # nothing inline: untouched
    assert resolved(kept, blobs) == messages
    # A blob the store no longer has stays a reference (the text of the thread still reads).
    assert resolved(kept, {}) == kept


def test_a_client_part_with_a_ref_is_refused() -> None:
    forged = ImagePart(media_type="image/png", ref=f"sha256:{sha(PNG)}")
    with pytest.raises(ClientError, match="ref is the journal's own"):
        check_content([(1, [forged])], AttachmentLimits(), None)
