"""The fleet: where tool calls run when the inventory names targets.

- Routing: ``routing`` (the run's tool list, each call routed to its target by the tool's own
  placement, ``tools.placement``), ``dispatch`` (the
  worker's side: a call for a runner target goes to that target's queue, signed), ``runner`` and
  ``runner_job`` (the runner's side: an RQ worker on the host running only its registry's tools).
- Trust: ``target_keys`` (each target's key), ``job_signing`` (every runner job signed),
  ``grants`` (the approval a runner verifies itself), ``grant_ledger`` (grants spent, on the host's
  disk), ``direct_grants`` (the same checks before an SSH or Kubernetes call), ``runner_acl`` (a
  runner's Redis user reaches its own keys only), ``refusals`` (what a runner refused, audited).
- Records: ``heartbeats`` (each runner's last heartbeat), ``executions`` (one remote execution's
  mark and result, at most once across crashes).

The bottom layer of ``bot``: it imports none of ``bot.runs``, ``bot.slack``, ``bot.web``, ``bot.ops``.
"""
