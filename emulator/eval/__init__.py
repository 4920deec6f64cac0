"""``chatops eval``'s harness: fault scenarios on simulated hosts, scored in code.

What exists now:

* the scenario format and its strict loader (``spec``, ``fleet``, ``truth``, ``loading``; the
  shipped scenarios in ``scenarios/``, installed with the package);
* the scorer (``scoring``): ``rca``, ``grounding``, ``safety``, efficiency, pass and pass^k;
* the fault injector (``injector``), the session of real processes built from the demo's
  (``session``), the runner that drives and scores one scenario (``runner``), ``results.json`` /
  ``report.md`` (``results``) and ``python -m emulator.eval run`` (``chatops eval run``), its runs in
  parallel (``suite``) with a progress bar (``progress``).

Not yet: ``report.html``, the scripted bad agents, record and replay. docs/EVAL.md says the same for users.

The harness lives beside the emulator because it is built from it (simulated hosts, scripted
models, the Slack emulator) and production code never imports either.
"""
