"""The agent's defaults, each written once.

``agent`` cannot import ``bot``, so the defaults of the runtime's own types and clients live here,
and ``bot.settings.Settings`` names these same constants as the defaults of its fields: a run
built in code without settings behaves like one built from the default settings.
"""

from __future__ import annotations

# -- a run's boundaries (``agent.types.Limits``; CHATOPS_MAX_ITERATIONS, CHATOPS_DEADLINE_SECONDS) ------
MAX_ITERATIONS = 20
DEADLINE_SECONDS = 900.0  # wall clock of work for the whole run, tools included
# Calls past this in one answer are not run (an error names the cap). A constant since 0.2.0 (it was
# CHATOPS_MAX_CALLS_PER_TURN): it only stops a runaway answer asking for hundreds of calls at once; a
# real turn asks for a handful (one per target checked), and the iteration limit bounds the rest.
MAX_CALLS_PER_TURN = 32

# -- loop detection (``agent.config.RunConfig``, ``agent.loop_detection.LoopDetector``) --------------
LOOP_WINDOW = 10
LOOP_WARN_AT = 3
LOOP_STOP_AT = 6

# -- model clients (``agent.models.openai_client``, ``agent.models.anthropic_client``, ``agent.models.endpoints.ClientOptions``,
# ``agent.models.retry.RetryPolicy``; LLM_MAX_TOKENS, LLM_READ_TIMEOUT) ----------------------------------
# The connect timeout and the retries are constants since 0.2.0 (they were LLM_CONNECT_TIMEOUT,
# LLM_MAX_ATTEMPTS and LLM_RETRY_MAX_WAIT_SECONDS): a model that keeps failing is handed over to the
# next one of LLM_FALLBACKS, which is the knob for an unreliable provider, not more waiting.
MAX_TOKENS = 4096
# A TCP and TLS handshake takes well under a second even across an ocean; 5 s means the endpoint is
# down or filtered, and the next attempt (or model) is a better use of the run's deadline.
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 60.0
# Per request, the first included: with the jittered backoff below (1, 2, 4, 8 s ceilings) a transient
# error of up to ~15 s is ridden out before the request counts as failed and the chain moves on.
MAX_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
# The longest Retry-After (or rate-limit reset) waited out: a minute is what providers ask for a
# per-minute rate limit; a longer hint means a quota, and the run goes to the next model at once.
RETRY_MAX_WAIT_SECONDS = 60.0
RETRY_BUDGET_SECONDS = 300.0  # one request's attempts and waits together

# -- stored runs (``agent.redis_memory``; CHATOPS_RETENTION_DAYS) ------------------------------------
RETENTION_DAYS = 30

# -- confirmations (CHATOPS_APPROVAL_TIMEOUT_SECONDS) -------------------------------------------------
# How long a pending decision stays open: the bot's approval cards expire after it, and a tool's
# dry-run plan stays valid a little longer (``tools.config``).
APPROVAL_TIMEOUT_SECONDS = 1800
