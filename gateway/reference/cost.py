"""What a model request cost: the operator's price of a model, per million tokens."""

from __future__ import annotations

import math

import msgspec

# A price past this (USD per million tokens) is a typo: the dearest models cost well under it.
MAX_PRICE_PER_MTOK = 10_000.0


class Price(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """USD per million tokens: ``input`` (the prompt), ``output`` (the completion, reasoning
    included)."""

    input: float
    output: float

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 <= value <= MAX_PRICE_PER_MTOK):
                raise ValueError(
                    f"{name} must be a price in USD per million tokens, 0 to "
                    f"{MAX_PRICE_PER_MTOK:g}, got {value}"
                )

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD, rounded to a millionth of a cent."""
        usd = (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000
        return round(usd, 8)


def price_table(value: dict[str, object]) -> dict[str, Price]:
    """``[prices.MODEL]`` tables → a price per model; ValueError naming the model."""
    table: dict[str, Price] = {}
    for model, entry in value.items():
        try:
            table[model] = msgspec.convert(entry, Price)
        except (msgspec.ValidationError, ValueError) as exc:
            raise ValueError(f"prices.{model}: {exc}") from None
    return table
