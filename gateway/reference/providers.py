"""Pick a model provider by name: the embedded scripted model or an OpenAI-compatible server."""

from __future__ import annotations

from typing import Any

from .scripted import ScriptedProvider
from .types import ModelProvider

PROVIDERS = ("scripted", "openai")
_OPENAI_SETTINGS = ("base_url", "model", "api_key", "timeout_s", "text_tools", "text_only")
_SCRIPTED_SETTINGS = ("delay_s", "model")


def make_provider(name: str, **settings: Any) -> ModelProvider:
    """Settings that do not apply to the chosen provider are ignored, ``None`` means default."""
    given = {key: value for key, value in settings.items() if value is not None}
    if name == "scripted":
        return ScriptedProvider(**{k: v for k, v in given.items() if k in _SCRIPTED_SETTINGS})
    if name == "openai":
        missing = [key for key in ("base_url", "model") if not given.get(key)]
        if missing:
            raise ValueError(f"the openai provider needs {' and '.join(missing)}")
        # Imported here: httpx and the wire types cost start-up time the scripted model skips.
        from .openai import OpenAIProvider

        return OpenAIProvider(**{k: v for k, v in given.items() if k in _OPENAI_SETTINGS})
    raise ValueError(f"unknown provider {name!r}; choose one of: {', '.join(PROVIDERS)}")
