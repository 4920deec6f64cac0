"""``chatops eval``'s harness: fault scenarios on simulated hosts, scored in code.

What exists now:

* the scenario format and its strict loader (``spec``, ``fleet``, ``truth``, ``loading``; the
  shipped scenarios in ``scenarios/``, installed with the package);
* the scorer (``scoring``): ``rca``, ``grounding``, ``safety``, efficiency, pass and pass^k;
* the fault injector (``injector``), the session of real processes built from the demo's
  (``session``), the runner that drives and scores one scenario (``runner``), ``results.json`` /
  ``report.md`` / ``report.html`` (``results``, ``report_html``) and ``python -m emulator.eval run``
  (``chatops eval run``), its runs in parallel (``suite``) with a progress bar (``progress``);
* the scripted bad agents (``agents``), recorded model runs (``recording``: ``--record`` /
  ``--replay``), ``--agent model`` (``model_agent``) and ``chatops eval capture`` (``capture``).

The harness lives beside the emulator because it is built from it (simulated hosts, scripted
models, the Slack emulator) and production code never imports either.
"""
