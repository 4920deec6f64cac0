"""Thread replies that arrive before the thread's mention has started its run.

Slack delivers a thread's ``app_mention`` and the replies under it as separate events, in no
guaranteed order and to concurrent requests. A reply handled before its mention finds no
active run in the thread; ignoring it would answer Slack 200 for a message nobody stores (the
person replied right after mentioning the bot, under load the mention's request is slower).
So a reply to a young thread (``EARLY_REPLY_SECONDS``) with no run yet is *parked* here: one
Lua script checks that the thread still has no run, claims the Slack message once and appends
the item to the thread's early list (capped, expiring). The run's creation
(``bot.runs.record``, ``ADOPT_EARLY_LUA`` in its create script) moves the list into the new
run's inbox in the same script, oldest first, so the model reads the reply like any other. A
young thread that never gets a run (an ordinary conversation) leaves the list to expire.

This module owns the ``early:{channel}:{thread_ts}`` list.
"""

from __future__ import annotations

from typing import Final

EARLY_REPLY_SECONDS: Final = 120.0  # a thread this young may still have its mention in flight
EARLY_TTL_SECONDS: Final = 600  # past Slack's last retry (5 minutes) of the mention's event
EARLY_MAX_ITEMS: Final = 20  # per thread: a flood of replies to a young thread is refused beyond it

# KEYS: 1 thread claim, 2 early list, 3 seen-message claim. ARGV: 1 item JSON, 2 dedupe ttl, 3 list ttl,
# 4 cap. Returns 'retry' (the thread has a run now: deliver to it), 'duplicate', 'full' or 'parked'.
PARK_LUA: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 'retry' end
if redis.call('LLEN', KEYS[2]) >= tonumber(ARGV[4]) then return 'full' end
if not redis.call('SET', KEYS[3], 'early', 'NX', 'EX', ARGV[2]) then return 'duplicate' end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 'parked'
"""

# A fragment of the run's create script: move the thread's early replies into the new inbox.
ADOPT_EARLY_LUA: Final = """
local function adopt_early(early_key, inbox_key)
  local early = redis.call('LRANGE', early_key, 0, -1)
  if #early > 0 then
    redis.call('RPUSH', inbox_key, unpack(early))
    redis.call('DEL', early_key)
  end
end
"""
