"""Scoring a run of a scenario in code, no LLM judge: pure functions over plain data.

``score_run(truth, targets, observation)`` reads the run's findings (as shown), its audit entries
and its tool calls (``inputs``) and gives ``rca`` (``rca``), ``grounding`` (``grounding``),
``safety`` (``safety``) and the efficiency report (``efficiency``); ``verdict`` says whether it
passed and computes pass^k over repeats. Nothing here starts a process or reads Redis.
"""
