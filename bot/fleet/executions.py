"""Remote executions: the one owner of ``{p}fleet:exec:{target}:{id}`` and its result list.

At most once across runner crashes and give-ups: before a runner runs a call it claims the
execution's mark with ``SET NX`` (``executing``); a dispatcher that stops waiting (the runner went
silent, the call timed out) claims it too (``abandoned``). Exactly one wins: if the dispatcher won,
the call never ran and never will (a job picked up late finds the mark and does nothing); if the
runner won, the outcome is unknown to the dispatcher, which says so. A retried job (RQ re-queues a
job whose runner died) finds its own ``executing`` mark and, for a call that changes something,
reports "outcome unknown" instead of running it again.

Results are sealed: the runner signs each with its target's key (``bot.fleet.target_keys``; HMAC
over the target, the execution id and the result), and the dispatcher drops one that is not, so whoever can write to Redis cannot
put words in a runner's mouth ("disk usage 12%") for the model to act on. The keys carry the
target, so a runner's Redis user reaches its own target's executions only (``bot.fleet.runner_acl``).

Behind Redis Sentinel (``replicas=1``) the mark of a call that changes something must be on a
replica before the call runs, or a failover could lose it and a retried job run the call again:
the claim is followed by ``WAIT 1`` on the same connection, and a mark no replica confirmed in
``replica_wait_ms`` is turned ``abandoned`` (the call never runs) and reported ``unreplicated``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import asdict, dataclass

import redis

from agent.redis_util import NOW_LUA, as_text
from agent.tooling import ToolResult
from bot.claims import claim_once
from bot.fleet.refusals import record_refusal
from bot.fleet.target_keys import target_key
from bot.keys import Keys

EXECUTING = "executing"
ABANDONED = "abandoned"
DONE = "done"
UNREPLICATED = "unreplicated"  # claimed, but no replica confirmed the mark: set abandoned, not run
_TTL_SECONDS = 24 * 3600  # outlives every retry of the job and every wait of its dispatcher
LATE = "late"
# Claim the execution unless its deadline passed (by Redis's clock) or someone claimed it first:
# one round trip on the path of every call.
_CLAIM = (
    NOW_LUA
    + """
if now() > tonumber(ARGV[2]) then return 'late' end
if redis.call('SET', KEYS[1], 'executing ' .. ARGV[1], 'NX', 'EX', ARGV[3]) then return 'ok' end
return redis.call('GET', KEYS[1]) or 'gone'
"""
)


@dataclass(frozen=True)
class RemoteResult:
    """A tool result as it travels back from a runner."""

    output: str
    is_error: bool = False
    plan: str | None = None
    nothing_to_do: bool = False
    stable_output: str | None = None
    executor: str | None = None

    def to_tool_result(self, target: str) -> ToolResult:
        return ToolResult(
            output=self.output,
            is_error=self.is_error,
            plan=self.plan,
            nothing_to_do=self.nothing_to_do,
            stable_output=self.stable_output,
            target=target,
            executor=self.executor,
        )

    @classmethod
    def from_tool_result(cls, result: ToolResult, executor: str) -> RemoteResult:
        return cls(
            output=result.output,
            is_error=result.is_error,
            plan=result.plan,
            nothing_to_do=result.nothing_to_do,
            stable_output=result.stable_output,
            executor=executor,
        )

    def encode(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> RemoteResult:
        try:
            data = json.loads(text)
            return cls(**data)
        except (ValueError, TypeError):
            return cls(output="Error: the runner sent a result that cannot be read", is_error=True)


def _seal(secret: bytes, target: str, execution_id: str, body: str) -> str:
    return hmac.new(secret, f"{target}\n{execution_id}\n{body}".encode(), hashlib.sha256).hexdigest()


class Executions:
    """The executions on one target (``target``: its keys). ``secret``: the master secret, or with
    ``derived`` the target's own key already (a runner's)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        secret: bytes,
        target: str,
        *,
        derived: bool = False,
        replicas: int = 0,
        replica_wait_ms: int = 500,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._secret = secret if derived else target_key(secret, target)
        self.target = target
        self._claim = client.register_script(_CLAIM)
        self.replicas = replicas
        self.replica_wait_ms = replica_wait_ms

    def record_refusal(self, **fields: object) -> None:
        """A job this target's runner refused, for the audit (``bot.fleet.refusals``)."""
        record_refusal(self._redis, self._keys, self.target, **fields)

    def claim(
        self, execution_id: str, executor: str, deadline: float, *, replicated: bool = False
    ) -> str | None:
        """The runner: ``None`` if this execution may start now; else why not: ``late`` (its
        deadline passed), the state of whoever claimed it first (``executing``, ``done``,
        ``abandoned``), or ``unreplicated`` (``replicated``, behind sentinels: no replica confirmed
        the mark in time; it is ``abandoned`` now, so the call never runs)."""
        key = self._keys.execution(self.target, execution_id)
        args: list[str | int] = [executor, repr(deadline), _TTL_SECONDS]
        if not (replicated and self.replicas):
            answer = as_text(self._claim(keys=[key], args=args))
        else:
            with self._redis.pipeline(transaction=False) as pipe:  # one connection: the claim, then WAIT
                self._claim(keys=[key], args=args, client=pipe)
                pipe.execute_command("WAIT", self.replicas, self.replica_wait_ms)  # type: ignore[no-untyped-call]
                raw, acked = pipe.execute()
            answer = as_text(raw)
            if answer == "ok" and int(acked) < self.replicas:
                self._redis.set(key, ABANDONED, xx=True, keepttl=True)
                return UNREPLICATED
        if answer == "ok":
            return None
        return (answer or "gone").split(" ", 1)[0]

    def abandon(self, execution_id: str) -> bool:
        """The dispatcher gives up: True if the call never started (and now never will)."""
        return claim_once(
            self._redis, self._keys.execution(self.target, execution_id), _TTL_SECONDS, ABANDONED
        )

    def state(self, execution_id: str) -> str | None:
        raw = as_text(self._redis.get(self._keys.execution(self.target, execution_id)))
        return raw.split(" ", 1)[0] if raw else None

    def _sealed(self, execution_id: str, result: RemoteResult) -> str:
        body = result.encode()
        return json.dumps({"result": body, "seal": _seal(self._secret, self.target, execution_id, body)})

    def finish(self, execution_id: str, result: RemoteResult) -> None:
        """The runner: push the result for the dispatcher (and mark the execution done)."""
        key = self._keys.execution_result(self.target, execution_id)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, self._sealed(execution_id, result))
            pipe.expire(key, _TTL_SECONDS)
            pipe.set(self._keys.execution(self.target, execution_id), DONE, xx=True, keepttl=True)
            pipe.execute()

    def answer(self, execution_id: str, result: RemoteResult) -> None:
        """Push a result without touching the mark (a refusal, an "outcome unknown")."""
        key = self._keys.execution_result(self.target, execution_id)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, self._sealed(execution_id, result))
            pipe.expire(key, _TTL_SECONDS)
            pipe.execute()

    def wait(self, execution_id: str, timeout: float) -> RemoteResult | None:
        """The dispatcher: the result, if it arrives within ``timeout`` seconds."""
        found = self._redis.blpop(
            [self._keys.execution_result(self.target, execution_id)], timeout=max(0.05, timeout)
        )
        if found is None:
            return None
        return self._opened(execution_id, as_text(found[1]) or "")

    def _opened(self, execution_id: str, text: str) -> RemoteResult:
        try:
            sealed = json.loads(text)
            body, seal = sealed["result"], sealed["seal"]
        except (ValueError, TypeError, KeyError):
            body, seal = "", ""
        if (
            not isinstance(body, str)
            or not isinstance(seal, str)
            or not hmac.compare_digest(seal, _seal(self._secret, self.target, execution_id, body))
        ):
            return RemoteResult(
                "Error: a result for this call was not sealed by a runner holding the runner secret; it was "
                "ignored (someone who is not a runner wrote it into Redis)",
                is_error=True,
            )
        return RemoteResult.decode(body)
