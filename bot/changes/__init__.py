"""The change journal: what changed on each target (``journal``, its one Redis owner), written by
the target's runner scans and by deploy markers from outside, read by ``recent_changes``, alert
runs and ``chatops changes``.

Deploy markers' bodies: ``markers`` (ours, ``POST /changes``, and the target resolution every
shape shares), ``github`` (GitHub's ``deployment_status``), ``argocd`` (the Argo CD notifications
template of docs/CHANGES.md); served by ``bot.web.change_receiver``."""
