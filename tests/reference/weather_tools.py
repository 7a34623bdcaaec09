"""A --tools module for the text tool-call tests: the tools the transcripts call."""

from __future__ import annotations


def get_weather(city: str, unit: str = "celsius") -> str:
    """The weather now.

    Args:
        city: Where.
        unit: celsius or fahrenheit.
    """
    return f"{city}: sunny, 22 C" if unit == "celsius" else f"{city}: sunny, 72 F"
