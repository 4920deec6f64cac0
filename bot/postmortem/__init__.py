"""Postmortem drafts: a finished run's facts, handed over (docs/POSTMORTEM.md).

* ``facts``: ``build_postmortem`` (pure): the run record, its audit entries and its alert group to
  a ``Postmortem`` whose every timeline line is one audit entry or one Slack message.
* ``render``: that draft as Markdown (every outside text inert) and as JSON.
* ``source``: reading the facts from Redis (``RunRecords``, ``AuditLog``, ``AlertStore``, their
  owners) and parsing a Slack thread link.

It owns no Redis key. It sits above the alerts and the run engine and below the Slack transport:
the CLI (``bot.ops.postmortem_cli``) resolves a thread link to its last run and builds it.
"""
