"""What checking an attachment costs at a run's start, in MB/s of decoded bytes.

    .venv/bin/python -m benchmarks.attachments [--mb 5] [--seconds 3] [--rounds 9]

One message with one inline PNG of ``--mb`` MiB (its signature, then zeros), then:

  check         ``check_content``: base64 strictly decoded, the bound, the signature against
                the label — what every run start pays per attachment (docs/attachments.md)
  decode        ``binascii.a2b_base64`` of the same data alone — the anchor: the least any
                check of the bytes costs
  json decode   the request's JSON (the message with its part) decoded into a ``Message``:
                what reading the request costs before any check

The table gives the median and range of MB/s and the check's cost paired, round by round,
against the anchor. The check runs on the event loop: at ``max_message_attachment_bytes``
(10 MiB) it holds it for 10 MiB / (check MB/s).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import sys
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._common import fmt_range, interleaved_rounds, median_range, table  # noqa: E402
from benchmarks.agui_encode import paired  # noqa: E402
from loopgate.contracts.messages import Message  # noqa: E402
from loopgate.contracts.parts import (  # noqa: E402
    AttachmentLimits,
    ImagePart,
    TextPart,
    check_content,
)

PNG_HEAD = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"


def build(mb: float) -> tuple[str, bytes]:
    """The base64 of an ``mb`` MiB PNG, and a request message carrying it as JSON."""
    raw = PNG_HEAD + b"\0" * max(0, int(mb * (1 << 20)) - len(PNG_HEAD))
    data = base64.b64encode(raw).decode()
    message = Message(
        role="user", content=[TextPart(text="see"), ImagePart(media_type="image/png", data=data)]
    )
    return data, msgspec.json.encode(message)


def paths(data: str, encoded: bytes) -> dict[str, object]:
    size = len(base64.b64decode(data))
    part = ImagePart(media_type="image/png", data=data)
    limits = AttachmentLimits(max_part_bytes=size, max_message_bytes=size)
    decode_message = msgspec.json.Decoder(Message).decode

    def check() -> int:
        check_content([(1, [part])], limits, None)
        return size

    def decode() -> int:
        return len(binascii.a2b_base64(data, strict_mode=True))

    def json_decode() -> int:
        decode_message(encoded)
        return size

    return {"check": check, "decode": decode, "json decode": json_decode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="MiB of the attachment")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per path, all rounds")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds")
    args = parser.parse_args(argv)
    data, encoded = build(args.mb)
    results = interleaved_rounds(paths(data, encoded), args.seconds, args.rounds, time.process_time)  # type: ignore[arg-type]
    mbs = {name: [v / (1 << 20) for v in values] for name, values in results.items()}
    rows = [[name, f"{median_range(v)[0]:,.0f}", fmt_range(v)] for name, v in mbs.items()]
    table(f"attachment of {args.mb:g} MiB, MB/s (median, range)", ["path", "MB/s", "range"], rows)
    ratio = [1 / r for r in paired(results, "check", "decode")]
    print(
        f"\ncheck / decode, time: {median_range(ratio)[0]:.2f}× (range {fmt_range(ratio, '.2f')})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
