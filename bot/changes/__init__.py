"""The change journal: what changed on each target (``journal``, its one Redis owner), written by
the target's runner scans and by deploy markers from outside, read by ``recent_changes``, alert
runs and ``chatops changes``."""
