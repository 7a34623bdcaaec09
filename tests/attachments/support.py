"""What the attachment tests send: a real PNG, a text file, and their SHA-256."""

from __future__ import annotations

import base64
import hashlib
import json

import httpx

# A 1x1 PNG (a real one: its signature, IHDR, IDAT, IEND).
PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
PNG = base64.b64decode(PNG_B64)
NOTES = "line one\nline two: ünïcode\n".encode()
NOTES_B64 = base64.b64encode(NOTES).decode()
PDF_B64 = base64.b64encode(b"%PDF-1.4\n%fake but signed\n").decode()


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def png_line() -> str:
    return f"image image/png {sha(PNG)}"


def notes_line() -> str:
    return f"file text/plain {sha(NOTES)}"


def answer_text(gateway: str, run_id: str) -> str:
    """The run's text, read from its native event stream, which ends with the run."""
    events = httpx.get(f"{gateway}/v1/runs/{run_id}/events", timeout=60).text
    return "".join(
        json.loads(line[6:])["data"]["delta"]
        for line in events.splitlines()
        if line.startswith("data: ") and '"content_delta"' in line
    )
