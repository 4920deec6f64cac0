"""``RedisMemory``: a run's history and state in Redis, fenced so only the lease holder writes.

Layout (keys from ``agent.keys``):

* the history is a list with one JSON ``Message`` per item. ``append`` only RPUSHes the new
  messages (one write per message, never a rewrite); ``replace_messages`` (condensing, and the
  first system prompt) is the only rewrite;
* the ``RunState`` lives in the run's hash, next to whatever record the application keeps there
  (``STATE_FIELDS`` are the memory's; it never touches another). ``status`` is stored as plain
  text (scripts compare it); every other state field is JSON. ``saved_at`` marks that the loop
  saved a state at all. A writer sends only the fields that changed since its own last write
  (``status`` and ``saved_at`` always).

Every write is one Lua script, so history, state, inbox trimming and expiry change together or
not at all, and the fencing check happens inside the same script: when the run's lease key no
longer holds this writer's token the write is refused with ``LeaseLostError``.

A rewrite (``replace_messages``) is refused when the stored history is no longer the one this
writer read and wrote (its length differs from the one the memory expects): it was built from
that history, and deleting the list would drop whatever another writer appended meanwhile (a
drained thread reply: gone from the inbox and, after the rewrite, from the history). The fence
should have stopped that other writer; this check keeps a second writer with the same token
(a fence counter that went backwards with a failover) from destroying anything.

Injected messages carry ``meta["inbox_id"]``: when such messages are appended, the same script
removes exactly those items from the head of the run's inbox (and refuses the write if the head
does not hold them), so a message moves from inbox to history exactly once. Inbox items are JSON
objects with an ``id`` field (chatops: written by ``bot.runs.inbox``).

A write can be sent without waiting for its answer (``append(..., wait=False)``, used for tool
results): the answer is read before this memory sends or reads anything else, and ``flush``
reads it on demand, so writes still land in order and a refused one is still raised, one step
later. Each write carries a ``write_id`` kept in the hash: a write sent again after a lost answer
(a dropped connection) is recognised and not applied twice.

When a state with a terminal status is written, the run's keys (state hash, history, inbox) get
the retention TTL, and in the same script the memory's ``TerminalExtension`` (if it was given one)
does its owner's part of the run's end: an application that keeps more of the run in Redis (chatops:
``bot.runs.record``) expires and releases its own keys there, atomically with the terminal state.
The memory itself knows no key and no field but its own.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import redis
from pydantic import BaseModel
from redis.connection import Connection

from agent.defaults import RETENTION_DAYS
from agent.errors import LeaseLostError, MemoryStoreError
from agent.keys import MemoryKeys
from agent.redis_util import as_text_dict
from agent.types import Message, RunState, RunStatus

INBOX_ID_META: Final = "inbox_id"  # a key of ``agent.types.MessageMeta``
DEFAULT_RETENTION_SECONDS = RETENTION_DAYS * 24 * 3600
STATUS_FIELD = "status"
SAVED_AT_FIELD = "saved_at"
WRITE_ID_FIELD = "write_id"  # the last write applied: a write sent again is recognised
# Every field the memory writes in the run's hash; the hash's other fields are its owner's.
STATE_FIELDS = frozenset({STATUS_FIELD, SAVED_AT_FIELD, WRITE_ID_FIELD, *RunState.model_fields})

# KEYS: 1 state hash, 2 messages, 3 inbox, 4 lease; terminal writes also: 5.. the extension's keys.
# ARGV: 1 fencing token ("" = unfenced), 2 JSON header (the small things), 3 the number N of state
# field items, 4..3+N the state fields (name, value, ...), then the messages' JSON (as they are stored:
# neither side encodes anything twice).
_WRITE_HEAD = f"""
local token = ARGV[1]
if token ~= '' and redis.call('GET', KEYS[4]) ~= token then
  return redis.error_reply('LEASE_LOST the run is leased to another worker')
end
local p = cjson.decode(ARGV[2])
if redis.call('HGET', KEYS[1], '{WRITE_ID_FIELD}') == p.write_id then return -1 end
if p.replace and p.expect_len >= 0 and redis.call('LLEN', KEYS[2]) ~= p.expect_len then
  return redis.error_reply('HISTORY_CHANGED another writer appended to the history this rewrite was read from')
end
local n = #p.inbox_ids
if n > 0 then
  local head = redis.call('LRANGE', KEYS[3], 0, n - 1)
  for i = 1, n do
    if head[i] == nil or cjson.decode(head[i]).id ~= p.inbox_ids[i] then
      return redis.error_reply('INBOX_MISMATCH injected messages are not at the head of the inbox')
    end
  end
  redis.call('LTRIM', KEYS[3], n, -1)
end
if p.replace then redis.call('DEL', KEYS[2]) end
local nf = tonumber(ARGV[3])
for i = 4 + nf, #ARGV, 500 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 499, #ARGV)))
end
redis.call('HSET', KEYS[1], '{WRITE_ID_FIELD}', p.write_id, unpack(ARGV, 4, 3 + nf))
if token ~= '' and p.lease_ms > 0 then redis.call('PEXPIRE', KEYS[4], p.lease_ms) end
if p.retention > 0 then
  redis.call('EXPIRE', KEYS[1], p.retention)
  redis.call('EXPIRE', KEYS[2], p.retention)
  redis.call('EXPIRE', KEYS[3], p.retention)
  local ext_keys = {{}}
  for i = 5, #KEYS do ext_keys[i - 4] = KEYS[i] end
"""
_WRITE_TAIL = """
end
return #ARGV - 3 - nf
"""


@dataclass(frozen=True)
class TerminalStep:
    """What a ``TerminalExtension`` adds to one terminal write: its keys and its arguments."""

    keys: list[str]  # the fragment's ``ext_keys`` (``KEYS[5..]`` of the write)
    args: dict[str, Any] = field(default_factory=dict)  # the fragment's ``p.ext`` (JSON)


class TerminalExtension(Protocol):
    """The part of the write that ends a run which belongs to the owner of more of the run's keys.

    ``lua`` runs inside the write script, after the state is stored and the memory's own keys got
    their retention TTL, so it happens atomically with the terminal state or not at all. In scope:
    ``ext_keys`` and ``p.ext`` (from ``step``), ``p.run_id`` and ``p.retention`` (seconds). It must
    not ``return``.
    """

    @property
    def lua(self) -> str: ...

    def step(self, run_id: str) -> TerminalStep:
        """The keys and arguments of this run's terminal write (read just before it is sent)."""
        ...


# One encoder for every field: ``json.dumps`` with any option builds a new encoder per call.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))
# State fields holding a frozen model that is replaced whole when it changes, rarely, and whose
# dump grows with the run (the findings list every result checked): dumped again only when the
# field holds another object, so a write's cost does not grow with them (``RedisMemory._dumped``).
_DUMPED_BY_IDENTITY: Final[set[str]] = {"findings"}


def _encode(
    status: str,
    dumped: dict[str, Any],
    saved_at: float,
    unchanged: dict[str, Any] | None,
    encoded: dict[str, str] | None = None,
) -> list[str]:
    """The hash fields of a state: ``status`` as text, everything else as JSON.

    ``unchanged`` maps field names to the values (``model_dump(mode="json")``) last stored by this
    writer; fields still holding them are left out. ``status`` and ``saved_at`` are always written.
    ``encoded``: fields whose JSON text is known already (``_DUMPED_BY_IDENTITY``'s).
    """
    fields = [STATUS_FIELD, status, SAVED_AT_FIELD, repr(saved_at)]
    for name, value in dumped.items():
        if name != STATUS_FIELD and (unchanged is None or name not in unchanged or unchanged[name] != value):
            text = encoded.get(name) if encoded is not None else None
            if text is None:
                # An int's JSON is its decimal text: skip the encoder for the counters.
                text = str(value) if type(value) is int else _COMPACT_JSON.encode(value)
            fields += [name, text]
    return fields


def decode_state(raw: dict[str, str]) -> RunState | None:
    """The ``RunState`` in a run hash, or ``None`` when the loop never saved one."""
    if SAVED_AT_FIELD not in raw:
        return None
    data: dict[str, Any] = {STATUS_FIELD: RunStatus(raw[STATUS_FIELD])}
    for name in RunState.model_fields:
        if name != STATUS_FIELD and name in raw:
            data[name] = json.loads(raw[name])
    return RunState.model_validate(data)


@dataclass(frozen=True)
class _InFlight:
    """A write sent on the pinned connection whose answer has not been read yet."""

    keys: list[str]
    args: list[str | bytes]


class RedisMemory:
    """The durable ``agent.memory.Memory`` of one run.

    ``fence`` is the writer's fencing token (chatops: from ``bot.runs.lease``); ``None`` writes
    unfenced (tools, tests, one-shot runs). ``lease_ttl_seconds`` renews the lease on every
    successful write, on top of the renewer thread, so a busy run never loses it between renewals.
    ``on_terminal``: the owner of the run's other keys, whose part of the run's end happens in the
    terminal write itself.
    """

    def __init__(
        self,
        redis_client: redis.Redis,
        keys: MemoryKeys,
        run_id: str,
        *,
        fence: int | None = None,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
        lease_ttl_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
        on_terminal: TerminalExtension | None = None,
    ) -> None:
        self._redis = redis_client
        self.run_id = run_id
        self.fence = fence
        self._retention = retention_seconds
        self._lease_ms = int(lease_ttl_seconds * 1000) if lease_ttl_seconds else 0
        self._clock = clock
        self._on_terminal = on_terminal
        extension = on_terminal.lua if on_terminal else ""
        self._write = redis_client.register_script(_WRITE_HEAD + extension + _WRITE_TAIL)
        # Built once: every write names the same keys.
        self._run_key = keys.run(run_id)
        self._messages_key = keys.messages(run_id)
        self._inbox_key = keys.inbox(run_id)
        self._lease_key = keys.lease(run_id)
        # The state fields this writer last stored (JSON-ready values): unchanged ones are not resent.
        self._stored_fields: dict[str, Any] = {}
        # Per ``_DUMPED_BY_IDENTITY`` field: the object last dumped and its dump.
        self._dumps: dict[str, tuple[object, Any, str | None]] = {}
        self._encoded: dict[str, str] = {}  # the JSON text of the identity-kept fields' last dumps
        # The history's length as this writer knows it: from its first read, then its own writes
        # (a later read never adopts another writer's appends). ``None``: never read.
        self._known_len: int | None = None
        self._writer_id = os.urandom(6).hex()
        self._writes = 0
        self._in_flight: _InFlight | None = None
        self._pinned: Connection | None = None  # the connection writes are sent on without waiting
        self._lock = threading.RLock()

    # -- reads ----------------------------------------------------------------------------------

    def load_messages(self) -> list[Message]:
        with self._lock:
            self._settle()
            items = self._call(lambda: self._redis.lrange(self._messages_key, 0, -1))
            if self._known_len is None:
                self._known_len = len(items)
        return [Message.model_validate_json(item) for item in items]

    def load_state(self) -> RunState | None:
        with self._lock:
            self._settle()
            raw = self._call(lambda: self._redis.hgetall(self._run_key))
        return decode_state(as_text_dict(raw))

    # -- writes ---------------------------------------------------------------------------------

    def append(self, messages: Sequence[Message], state: RunState, *, wait: bool = True) -> None:
        self._store(messages, state, replace=False, wait=wait)

    def save_state(self, state: RunState) -> None:
        self._store((), state, replace=False)

    def replace_messages(self, messages: Sequence[Message], state: RunState) -> None:
        self._store(messages, state, replace=True)

    def flush(self) -> None:
        """Read the answer to a write sent without waiting (raising what it came to), and give back
        the connection it went out on."""
        with self._lock:
            try:
                self._settle()
            finally:
                self._unpin()

    def _dumped(self, state: RunState) -> dict[str, Any]:
        """``state.model_dump(mode="json")``, reusing the last dump of a ``_DUMPED_BY_IDENTITY``
        field that still holds the same (frozen) object; the same dump object, so ``_encode``'s
        comparison with the stored fields is one identity check. Such a field holding a model is
        dumped as its JSON text (``self._encoded``: written as it is)."""
        # The serializer at once: ``model_dump``'s keyword handling is a sixth of a write's dump.
        dumped: dict[str, Any] = state.__pydantic_serializer__.to_python(
            state, mode="json", exclude=_DUMPED_BY_IDENTITY
        )
        for name in _DUMPED_BY_IDENTITY:
            value = getattr(state, name)
            last = self._dumps.get(name)
            if last is None or last[0] is not value:
                if isinstance(value, BaseModel):
                    # The JSON text from the serializer at once (what ``_encode`` would make of the
                    # dump: compact, in the same order), kept as the field's dump too: compared with
                    # the stored one only to leave an unchanged field out.
                    text = value.__pydantic_serializer__.to_json(value).decode()
                    last = (value, text, text)
                else:
                    last = (value, value, None)
                self._dumps[name] = last
            dumped[name] = last[1]
            if last[2] is not None:
                self._encoded[name] = last[2]
            else:
                self._encoded.pop(name, None)
        return dumped

    def _store(
        self, messages: Sequence[Message], state: RunState, *, replace: bool, wait: bool = True
    ) -> None:
        with self._lock:
            self._settle()  # writes land in order, and an earlier refusal is raised before a new write
            terminal = state.status.terminal
            dumped = self._dumped(state)
            self._writes += 1
            header = {
                "write_id": f"{self._writer_id}:{self._writes}",
                "inbox_ids": [m.meta[INBOX_ID_META] for m in messages if INBOX_ID_META in m.meta],
                "replace": replace,
                "expect_len": -1 if self._known_len is None else self._known_len,
                "lease_ms": self._lease_ms,
                "retention": 0,
            }
            script_keys = [self._run_key, self._messages_key, self._inbox_key, self._lease_key]
            if terminal:  # expire the run's keys, and the extension's part of the run's end
                header.update(retention=self._retention, run_id=self.run_id)
                if self._on_terminal is not None:
                    extension = self._on_terminal
                    step: TerminalStep = self._call(lambda: extension.step(self.run_id))
                    header["ext"] = step.args
                    script_keys += step.keys
            token = "" if self.fence is None else str(self.fence)
            fields = _encode(state.status.value, dumped, self._clock(), self._stored_fields, self._encoded)
            args: list[str | bytes] = [token, json.dumps(header), str(len(fields)), *fields]
            # Each message's JSON as the serializer's bytes (``model_dump_json`` without decoding).
            args += [m.__pydantic_serializer__.to_json(m) for m in messages]
            if wait or terminal:
                self._unpin()
                self._write_and_wait(script_keys, args)
            else:
                self._send(script_keys, args)
            self._stored_fields = dumped
            if replace:
                self._known_len = len(messages)
            elif self._known_len is not None:
                self._known_len += len(messages)

    def _write_and_wait(self, keys: list[str], args: list[str | bytes]) -> None:
        """The write script through the client (loading it when Redis lost it), answer awaited."""
        self._call(lambda: self._write(keys=keys, args=args))

    def _send(self, keys: list[str], args: list[str | bytes]) -> None:
        """Send a write on the pinned connection and leave its answer to ``_settle``.

        The connection stays pinned while writes follow each other without waiting (no pool
        checkout per write); a waited-for write or ``flush`` gives it back.
        """
        try:
            if self._pinned is None:
                self._pinned = self._redis.connection_pool.get_connection()
            self._pinned.send_command("EVALSHA", self._write.sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
        except redis.RedisError:
            # Perhaps sent in part: write it the ordinary way (its write_id keeps it from landing twice).
            self._unpin(broken=True)
            self._write_and_wait(keys, args)
            return
        self._in_flight = _InFlight(keys, args)

    def _settle(self) -> None:
        """Read the answer to the write in flight, if any; raise the agent's error for a refusal."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None or self._pinned is None:
            return
        try:
            self._pinned.read_response()
        except redis.exceptions.NoScriptError:
            # Redis lost its scripts (restarted): nothing was applied, send it again with the script.
            self._write_and_wait(in_flight.keys, in_flight.args)
        except redis.ResponseError as error:
            raise _translated(error) from error
        except redis.RedisError:
            # The answer was lost with the connection: the write may or may not have landed, and
            # its write_id makes sending it again safe either way.
            self._unpin(broken=True)
            self._write_and_wait(in_flight.keys, in_flight.args)
        except BaseException:
            self._unpin(broken=True)  # an unread answer would confuse the connection's next user
            raise

    def _unpin(self, *, broken: bool = False) -> None:
        connection, self._pinned = self._pinned, None
        if connection is None:
            return
        if broken:
            connection.disconnect()  # type: ignore[no-untyped-call]
        self._redis.connection_pool.release(connection)

    @staticmethod
    def _call(operation: Callable[[], Any]) -> Any:
        """Run one Redis operation, turning its failures into the agent's error types."""
        try:
            return operation()
        except redis.RedisError as error:
            raise _translated(error) from error


def _translated(error: redis.RedisError) -> LeaseLostError | MemoryStoreError:
    """The agent's error for a Redis failure: a refused fence is a lost lease, the rest a store failure."""
    if isinstance(error, redis.ResponseError):
        if str(error).startswith("LEASE_LOST"):
            return LeaseLostError(str(error).removeprefix("LEASE_LOST "))
        return MemoryStoreError(f"Redis refused a run write: {error}")
    return MemoryStoreError(f"Redis failed: {error}")
