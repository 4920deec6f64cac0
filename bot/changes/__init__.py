"""The change journal: what changed on each target, written by the target's runner scans and by
deploy markers from outside, read by ``recent_changes``, alert runs and ``chatops changes``.

* ``journal.py``: ``fleet:changes:{target}``, its one Redis owner: each change sealed with its
  target's key, deduplicated, bounded.
* ``reader.py``: the worker's readers, ``ChangeReader``: the model's ``recent_changes`` tool over the
  targets the run's channel may name, and the window before an alert (``bot.alerts.changes``).
* ``text.py``: how a change reads (quoted to the model, a root line) and how a time is named
  (RFC 3339 or ``2h``).
* ``errors.py``: the package's errors.
* deploy markers' bodies: ``markers.py`` (ours, ``POST /changes``, and the target resolution every
  shape shares), ``github.py`` (GitHub's ``deployment_status``), ``argocd.py`` (the Argo CD
  notifications template of docs/CHANGES.md); served by ``bot.web.change_receiver``.

The runner's side, the scan thread that appends a host's changes, is ``bot.fleet.change_scan``;
the record itself (``Change``) is ``tools.changes.record``. docs/CHANGES.md.
"""
