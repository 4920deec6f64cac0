"""The incident memory: what finished runs found, kept to help the next run (docs/MEMORY.md).

* ``incident.py``: one incident record (redacted when built, refused when malformed);
* ``store.py``: its Redis keys, their one owner, and why the index is shaped as it is;
* ``similar.py``: the channel boundary, the ranking, and the model's ``similar_incidents`` tool;
* ``notes.py``: what a new run (a mention's or an alert's) is given: its first message's incidents
  and its thread's "Similar:" note.

A run's end writes its incident (``bot.runs.incident_capture``, a step of the run's report); the
worker's composition root (``bot.ops.compose``) builds the memory and binds the tool to each run's
channel; ``chatops memory`` (``bot.ops.memory_cli``) lists, shows and forgets.
"""
