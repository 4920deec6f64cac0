"""The durable-run engine: a run survives any process, waits for people without holding a worker,
and acts at most once per approval.

- The run: ``record`` (the run hash, the thread's claim, the run indexes: their one owner),
  ``service`` (``RunService``: submit, deliver a reply, cancel; ``RunOptions``), ``run_job`` (one
  job's work: lease, loop, report), ``runtime`` (what a job runs with), ``run_tools`` (the run's
  tool list, fixed by its first segment), ``thread_history`` (what a follow-up reads of its thread),
  ``report_steps``, ``transcript_source`` (a run's transcript read from its records).
- Jobs and workers: ``jobs`` (the RQ job functions), ``queueing`` (the one way jobs are enqueued),
  ``worker`` (the worker classes), ``lease`` (fencing), ``inbox`` and ``early_replies`` (thread
  replies), ``limits`` (who may start how many runs), ``lost_runs`` (Redis came back empty).
- Approvals: ``approvals`` (the records and their scripts), ``approval_lifecycle`` (every move, with
  its audit entry), ``approval_gate`` (the run's confirm callback), ``approval_seal`` (the facts the
  worker proposed, sealed), ``approval_votes`` (several approvals on one card), ``provenance`` (a
  run's texts by author: what people asked, what the bot read), ``durability`` (the
  consumed mark made durable before the side effect), ``replication`` (``WAIT`` behind Sentinel).
- Budgets: ``budget_asks`` (a run's budget card, decided once), ``budget_gate`` (the run's
  ``extend_budget`` callback), ``budget_lifecycle`` (Extend / Stop, audited), ``monthly_tokens``
  (a channel's paid tokens per UTC month, and its cap).
- Undo: ``undo_offers`` (an executed change's undo, sealed, claimed once), ``undo_offering`` (made
  when its check ends), ``undo_requests`` (a claimed undo's run, with the stored call pending).
- ``presenter``: the seam to the chat transport (Slack's is ``bot.slack.delivery.presenter``).

Imports no Slack and nothing of ``bot.ops``, ``bot.web``, ``bot.slack`` or ``bot.alerts``.
"""
