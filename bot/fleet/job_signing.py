"""Every runner job is signed: the runner acts only on jobs a holder of the runner secret wrote.

A grant authorises one approved call; but read-only calls, previews and descriptions carry none,
and anyone able to push into a runner's queue could otherwise make it read its host for them. The
dispatcher therefore signs each job's whole content (target, op, tool, the arguments verbatim, the
execution id, the deadline and the timeout; the grant, if any, is inside the arguments) with
HMAC-SHA256 under the target's key (``bot.fleet.target_keys``), in a domain of its own so a job's signature can never
pass for a grant's or a result's seal. The job's deadline is its signature's expiry: a replay of a
captured job is refused once it passed (within it, a read-only execution already done is not run
again: ``bot.fleet.runner_job``).

The runner refuses an unsigned, altered, foreign or expired job before it looks at anything else.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from agent.arguments import canonical_arguments

SIGNATURE = "signature"
TARGET = "target"
_DOMAIN = b"chatops runner job v1\n"
UNSIGNED = "it is not signed"
ALTERED = "its signature does not match its content (altered, or signed without the runner secret)"
EXPIRED = "its signature has expired (the job's deadline passed)"


def _mac(secret: bytes, payload: Mapping[str, Any]) -> str:
    body = canonical_arguments({key: value for key, value in payload.items() if key != SIGNATURE})
    return hmac.new(secret, _DOMAIN + body.encode(), hashlib.sha256).hexdigest()


def sign_job(secret: bytes, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` with its signature under ``secret``, its target's key (the dispatcher, just
    before it enqueues it)."""
    return {**payload, SIGNATURE: _mac(secret, payload)}


def signature_problem(secret: bytes, payload: Mapping[str, Any]) -> str | None:
    """Why ``payload`` is not a job a holder of the secret wrote as it is (``None``: it is)."""
    signature = payload.get(SIGNATURE)
    if not isinstance(signature, str) or not signature:
        return UNSIGNED
    try:
        expected = _mac(secret, payload)
    except (ValueError, TypeError):  # not canonical JSON (a NaN, odd keys): nobody signed that
        return ALTERED
    return None if hmac.compare_digest(signature, expected) else ALTERED


def freshness_problem(payload: Mapping[str, Any], *, target: str, now: float) -> str | None:
    """Why a signed job of the right shape is not for this runner now: another target, or its
    deadline (by Redis's clock, ``now``) passed."""
    if payload.get(TARGET) != target:
        return f"it is signed for target {payload.get(TARGET)!r}, not {target}"
    if now > float(payload["deadline"]):
        return EXPIRED
    return None
