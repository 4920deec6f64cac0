"""Installed as ``sitecustomize.py`` in a throwaway clone's virtualenv by ``trace_files.py``: every
Python process of that clone records, per phase, the first time each product file (agent/, tools/,
bot/) has one of its functions called. Phases are switched with SIGUSR1 (the phase's name is read
from ``/tmp/chatops-trace/phase``); records go to ``/tmp/chatops-trace/<phase>/<pid>.tsv``.
Forked work horses inherit the hook and write files of their own."""

import contextlib
import os
import signal
import sys
import threading
import time

_CONTROL = "/tmp/chatops-trace"
# REPO/.venv/lib/pythonX.Y/site-packages/sitecustomize.py: the clone is four folders up. Not from the
# environment: the demo starts its runners with an environment of their own.
_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
if os.path.isdir(_CONTROL):
    _ROOTS = tuple(os.path.join(_REPO, p) + os.sep for p in ("agent", "tools", "bot"))
    _phase = [""]
    _RUNNER = "runner" in " ".join(sys.argv)
    _TOOL_FILES = ("/tools/builtin/", "/tools/catalog/build.py", "/tools/process.py")
    _seen: set[str] = set()
    _lock = threading.Lock()

    def _switch(_signum: int, _frame: object) -> None:
        try:
            with open(os.path.join(_CONTROL, "phase")) as f:
                name = f.read().strip()
        except OSError:
            return
        with _lock:
            _phase[0] = name
            _seen.clear()

    def _record(path: str) -> None:
        with _lock:
            if not _phase[0] or path in _seen:
                return
            _seen.add(path)
            folder = os.path.join(_CONTROL, _phase[0])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.getpid()}.tsv"), "a") as out:
            out.write(f"{time.time():.6f}\t{path}\t{' '.join(sys.argv)[:200]}\n")

    def _stack(frame, kind: str) -> None:  # type: ignore[no-untyped-def]
        """The product files on the stack at a hand-off (a job enqueued, a Slack call, a tool run)."""
        files = []
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(_ROOTS) and path not in files:
                files.append(path)
            frame = frame.f_back
        folder = os.path.join(_CONTROL, _phase[0])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.getpid()}.stacks"), "a") as out:
            out.write(f"{time.time():.6f}\t{kind}\t{' '.join(files)}\t{' '.join(sys.argv)[:200]}\n")

    def _profile(frame, event, _arg):  # type: ignore[no-untyped-def]
        if event == "call" and _phase[0]:
            code = frame.f_code
            path = code.co_filename
            if path.startswith(_ROOTS):
                if code.co_name != "<module>" and path not in _seen:
                    _record(path)
                    if _RUNNER and any(m in path for m in _TOOL_FILES):
                        _stack(frame, "tool")
            elif code.co_name == "enqueue_job" and path.endswith(os.path.join("rq", "queue.py")):
                _stack(frame, "enqueue")
            elif code.co_name == "api_call" and path.endswith(
                os.path.join("slack_sdk", "web", "base_client.py")
            ):
                _stack(frame, "slack")

    def _after_fork() -> None:
        _seen.clear()  # a work horse writes its own file, from its first call on

    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGUSR1, _switch)
    os.register_at_fork(after_in_child=_after_fork)
    sys.setprofile(_profile)
    threading.setprofile(_profile)
