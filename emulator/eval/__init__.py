"""``chatops eval``'s harness: fault scenarios on simulated hosts, scored in code.

What exists now:

* the scenario format and its strict loader (``spec``, ``fleet``, ``truth``, ``loading``; the
  shipped scenarios in ``scenarios/``, installed with the package);
* the scorer (``scoring``): ``rca``, ``grounding``, ``safety``, efficiency, pass and pass^k.

Not yet: the fault injector that writes a scenario's fleet onto the demo's simulated hosts, the
runner that drives a scenario through the real processes (``chatops eval run``), the scripted
bad agents, record and replay. docs/EVAL.md says the same for users.

The harness lives beside the emulator because it is built from it (simulated hosts, scripted
models, the Slack emulator) and production code never imports either.
"""
