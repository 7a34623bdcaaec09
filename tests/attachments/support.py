"""What the attachment tests send: a real PNG, a text file, and their SHA-256."""

from __future__ import annotations

import base64
import hashlib

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
