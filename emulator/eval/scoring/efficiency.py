"""Efficiency, reported and never scored: iterations, tool calls, tokens, cost, seconds.

A run that solves a scenario in fewer tokens is cheaper, not better at finding causes; the pass
rule ignores all of this on purpose. ``cost`` is given only where the model's prices are known
(``Prices``, US dollars per million tokens); a cache read is priced at ``cache_read`` when given,
else as an ordinary prompt token, and so is a cache write at ``cache_write``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from emulator.eval.scoring.inputs import RUN_FINISHED, TOOL_EXECUTED, TOOL_REFUSED, RunObservation

MILLION = 1_000_000


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens."""

    prompt: float
    completion: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True)
class Tokens:
    prompt: int
    completion: int
    cache_read: int
    cache_write: int = 0


@dataclass(frozen=True)
class Efficiency:
    iterations: int
    tool_calls: int
    tokens: Tokens
    cost: float | None
    seconds: float


def cost_of(tokens: Tokens, prices: Prices) -> float:
    cache_read = prices.cache_read if prices.cache_read is not None else prices.prompt
    cache_write = prices.cache_write if prices.cache_write is not None else prices.prompt
    uncached = max(0, tokens.prompt - tokens.cache_read - tokens.cache_write)
    dollars = (
        uncached * prices.prompt
        + tokens.cache_read * cache_read
        + tokens.cache_write * cache_write
        + tokens.completion * prices.completion
    )
    return dollars / MILLION


def _iterations(audit: Sequence[Mapping[str, str]]) -> int:
    finished = [entry for entry in audit if entry.get("kind") == RUN_FINISHED]
    return int(finished[-1].get("iterations") or 0) if finished else 0


def efficiency(observation: RunObservation, prices: Prices | None = None) -> Efficiency:
    usage = observation.usage
    tokens = Tokens(
        prompt=int(usage.get("prompt_tokens", 0)),
        completion=int(usage.get("completion_tokens", 0)),
        cache_read=int(usage.get("cache_read_tokens", 0)),
        cache_write=int(usage.get("cache_write_tokens", 0)),
    )
    calls = sum(1 for entry in observation.audit if entry.get("kind") in (TOOL_EXECUTED, TOOL_REFUSED))
    iterations = (
        observation.iterations if observation.iterations is not None else _iterations(observation.audit)
    )
    return Efficiency(
        iterations=iterations,
        tool_calls=calls,
        tokens=tokens,
        cost=cost_of(tokens, prices) if prices is not None else None,
        seconds=observation.seconds,
    )
