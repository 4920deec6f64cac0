"""The fleet: where tool calls run when the inventory names targets.

* ``grants``: the HMAC grant an approval carries, which a runner verifies itself before it acts;
* ``heartbeats``: the record of each target's runner (last seen, by whom), its one owner;
* ``executions``: one remote execution's mark and result (at most once across crashes);
* ``dispatch``: the worker's side: a tool call for a runner target goes to that target's queue;
* ``runner``: the runner's side: an RQ worker on the host that runs only its own registry's tools;
* ``routing``: the tool list a run is offered, each call routed to its target's executor.

``bot.runs`` imports ``grants`` (the web process signs a grant when an approver clicks); nothing
here imports ``bot.runs``, ``bot.slack`` or ``bot.ops``.
"""
