"""The agent's defaults, each written once.

``agent`` cannot import ``bot``, so the defaults of the runtime's own types and clients live here,
and ``bot.settings.Settings`` names these same constants as the defaults of its fields: a run
built in code without settings behaves like one built from the default settings.
"""

from __future__ import annotations

# -- a run's boundaries (``agent.types.Limits``; CHATOPS_MAX_ITERATIONS, CHATOPS_DEADLINE_SECONDS,
# CHATOPS_MAX_CALLS_PER_TURN) ------------------------------------------------------------------
MAX_ITERATIONS = 20
DEADLINE_SECONDS = 900.0  # wall clock of work for the whole run, tools included
MAX_CALLS_PER_TURN = 32  # calls past this in one answer are not run (an error names the cap)

# -- loop detection (``agent.config.RunConfig``, ``agent.loop_detection.LoopDetector``) --------------
LOOP_WINDOW = 10
LOOP_WARN_AT = 3
LOOP_STOP_AT = 6

# -- model clients (``agent.models.openai_client``, ``agent.models.anthropic_client``, ``agent.models.endpoints.ClientOptions``,
# ``agent.models.retry.RetryPolicy``; LLM_MAX_TOKENS, LLM_CONNECT_TIMEOUT, LLM_READ_TIMEOUT,
# LLM_MAX_ATTEMPTS, LLM_RETRY_MAX_WAIT_SECONDS) ---------------------------------------------------
MAX_TOKENS = 4096
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 60.0
MAX_ATTEMPTS = 5  # per request, the first included
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
RETRY_MAX_WAIT_SECONDS = 60.0  # the longest Retry-After honoured
RETRY_BUDGET_SECONDS = 300.0  # one request's attempts and waits together

# -- stored runs (``agent.redis_memory``; CHATOPS_RETENTION_DAYS) ------------------------------------
RETENTION_DAYS = 30

# -- confirmations (CHATOPS_APPROVAL_TIMEOUT_SECONDS) -------------------------------------------------
# How long a pending decision stays open: the bot's approval cards expire after it, and a tool's
# dry-run plan stays valid a little longer (``tools.config``).
APPROVAL_TIMEOUT_SECONDS = 1800
