"""What a run's tokens cost: ``LLM_PRICES``, model name to USD per million tokens.

``LLM_PRICES={"gpt-4o": {"input": 2.5, "output": 10, "cache_read": 1.25}}``: ``input`` is the price of
an uncached prompt token (cache writes count as input), ``output`` of a completion token,
``cache_read`` of a prompt token served from the provider's cache (absent: the input price). A
model without a price has no cost shown (its tokens still are). An unknown key or a negative or
missing price is a configuration error at start (``check_prices``, called by ``bot.settings``).

A run's cost is priced by the model that answered it last (``RunState.model``; a fallback model
that answered part of a run is priced as the last one): the card shows what the run spent, not an
invoice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.types import Usage

PRICE_KEYS = ("input", "output", "cache_read")
REQUIRED_KEYS = ("input", "output")
PER = 1_000_000  # prices are per million tokens


def check_prices(prices: Mapping[str, Mapping[str, float]]) -> None:
    """Raise ``ValueError`` naming the first mistake: an unknown key, a missing or negative price."""
    for model, price in prices.items():
        if not model.strip():
            raise ValueError("LLM_PRICES: a model name is empty")
        unknown = sorted(set(price) - set(PRICE_KEYS))
        if unknown:
            raise ValueError(
                f"LLM_PRICES[{model!r}]: unknown key(s) {', '.join(unknown)} (known: {', '.join(PRICE_KEYS)})"
            )
        missing = [key for key in REQUIRED_KEYS if key not in price]
        if missing:
            raise ValueError(f"LLM_PRICES[{model!r}]: missing {', '.join(missing)} (USD per million tokens)")
        negative = [key for key, value in price.items() if value < 0]
        if negative:
            raise ValueError(f"LLM_PRICES[{model!r}]: negative price for {', '.join(negative)}")


@dataclass(frozen=True)
class Prices:
    """The configured prices (``Settings.llm_prices``, checked)."""

    by_model: Mapping[str, Mapping[str, float]]

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """USD for ``usage`` on ``model``; ``None`` when that model has no price."""
        price = self.by_model.get(model or "")
        if price is None:
            return None
        cached = usage.cache_read_tokens
        return (
            (usage.prompt_tokens - cached) * price["input"]
            + cached * price.get("cache_read", price["input"])
            + usage.completion_tokens * price["output"]
        ) / PER


def dollars(cost: float | None) -> str:
    """``$0.42``, ``$0.0031`` for less than a cent, ``""`` for no price."""
    if cost is None:
        return ""
    return f"${cost:,.2f}" if cost >= 0.01 or cost == 0 else f"${cost:.4f}"
