"""What changed on a target: the change record (``record``) and, on the host, its collectors.

A runner (or the worker, for local targets; an SSH session for SSH targets) reads the host's own
traces of change, read-only and bounded: dpkg's log and apt's history, watched files (kept as
redacted snapshots, each change a unified diff), unit files and service restarts, reboots and
crontabs. ``bot.changes`` stores them in Redis per target beside deploy markers sent from outside.
"""
