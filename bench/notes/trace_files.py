"""How many product files (agent/, tools/, bot/) three flows cross, measured on the running demo.

    python bench/notes/trace_files.py REPO      # REPO: a throwaway clone with its .venv built

The flows, as issue 28 names them: (1) a mention to the first tool call on a runner; (2) an Approve
click to the resumed execution on the runner; (3) an Alertmanager webhook to the alert thread's first
message. ``trace_sitecustomize.py`` is installed in REPO's virtualenv for the measurement (and removed
after): every process of the demo (web, worker and its work horses, runners) records the first call
into each product file per phase. A flow's files are those first called between the flow's start and
its end marker, in any process; files that the idle processes also call in a quiet window of the same
length (heartbeats, sweeps, polling) are counted and reported apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONTROL = Path("/tmp/chatops-trace")
RUNNER_TOOL = ("/tools/builtin/", "/tools/catalog/build.py", "/tools/process.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes(repo: Path) -> list[int]:
    """The clone's Python processes (not its embedded redis-server, which SIGUSR1 would stop)."""
    out = subprocess.run(["pgrep", "-f", str(repo / ".venv")], capture_output=True, text=True).stdout
    found = []
    for pid in (int(p) for p in out.split()):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if pid != os.getpid() and Path(argv0).name.startswith("python"):
            found.append(pid)
    return found


def phase(repo: Path, name: str) -> float:
    (CONTROL / "phase").write_text(name)
    started = time.time()
    for pid in processes(repo):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
    time.sleep(0.5)  # every process has switched before the flow starts
    return started


def records(name: str) -> list[tuple[float, str, str]]:
    rows = []
    for file in (CONTROL / name).glob("*.tsv"):
        for line in file.read_text().splitlines():
            at, path, argv = line.split("\t", 2)
            rows.append((float(at), path, argv))
    return sorted(rows)


def stacks(name: str) -> list[tuple[float, str, list[str], str]]:
    rows = []
    for file in (CONTROL / name).glob("*.stacks"):
        for line in file.read_text().splitlines():
            at, kind, files, argv = line.split("\t", 3)
            rows.append((float(at), kind, files.split(), argv))
    return sorted(rows)


def chain(repo: Path, name: str, end_kind: str, end_file: str) -> tuple[set[str], float]:
    """The files on the stack at each hand-off: every job enqueued in the phase (the web process's,
    the worker's runner jobs) and the end itself (the first tool call on a runner, or the
    first Slack call made from ``end_file``), each stack's product files."""
    rows = stacks(name)
    ends = [r for r in rows if r[1] == end_kind and any(f.endswith(end_file) for f in r[2])]
    if not ends:
        raise SystemExit(f"{name}: the end marker was never reached")
    end, _, end_files, _ = ends[0]
    found = set(end_files)
    for _, kind, files, _ in rows:
        # Every enqueue of the phase, not only those before the end: a read-only call on the
        # parallel pool enqueues from a pool thread, whose stack starts at the pool; the same
        # hand-off made from the loop's own thread later in the run shows the whole chain.
        if kind == "enqueue":
            found.update(files)
    return {str(Path(f).relative_to(repo)) for f in found}, end


def crossed(repo: Path, name: str, is_end: object) -> tuple[set[str], float]:
    rows = records(name)
    ends = [at for at, path, argv in rows if is_end(path, argv)]  # type: ignore[operator]
    if not ends:
        raise SystemExit(f"{name}: the end marker was never reached")
    end = ends[0]
    return {str(Path(path).relative_to(repo)) for at, path, _ in rows if at <= end}, end


def main(repo: Path) -> None:
    site = next((repo / ".venv" / "lib").glob("python3*/site-packages"))
    hook = site / "sitecustomize.py"
    if hook.exists():
        raise SystemExit(f"{hook} exists: not a throwaway clone")
    shutil.rmtree(CONTROL, ignore_errors=True)
    CONTROL.mkdir()
    shutil.copy(Path(__file__).with_name("trace_sitecustomize.py"), hook)
    sys.path.insert(0, str(repo))
    from emulator.slack.client import SlackEmulatorClient

    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="trace-demo-"))
    env = {**os.environ, "CHATOPS_TRACE_ROOT": str(repo)}
    log = CONTROL / "demo.log"
    demo = subprocess.Popen(
        [
            str(repo / ".venv/bin/python"),
            "-m",
            "emulator.demo",
            "--no-browser",
            "--latency",
            "0",
            "--port",
            str(port),
            "--dir",
            str(folder),
        ],
        cwd=repo,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        while "\nReady" not in log.read_text():
            if demo.poll() is not None:
                raise SystemExit("the demo stopped before it was ready:\n" + log.read_text()[-3000:])
            time.sleep(0.5)
        slack = SlackEmulatorClient(f"http://127.0.0.1:{port}")
        results: dict[str, object] = {}

        idle_start = phase(repo, "idle")
        time.sleep(15)
        idle = {str(Path(p).relative_to(repo)) for _, p, _ in records("idle")}

        start = phase(repo, "mention")
        ts = slack.post_message("#incident", "alice", "@ops check db-01's load")["ts"]
        slack.wait_for_reply(
            "incident",
            ts,
            lambda m: (
                "load" in m["text"].lower() and "chatops_approve" not in json.dumps(m.get("blocks", []))
            ),
            120,
        )
        files, end = crossed(repo, "mention", lambda p, a: "runner" in a and any(m in p for m in RUNNER_TOOL))
        results["mention -> first runner call"] = (
            files,
            end - start,
            chain(repo, "mention", "tool", ".py")[0],
        )

        ts = slack.post_message("#incident", "alice", "@ops restart the api on web-03")["ts"]
        card = slack.wait_for_reply(
            "incident", ts, lambda m: "chatops_approve" in json.dumps(m.get("blocks", [])), 120
        )
        start = phase(repo, "click")
        slack.click(card["ts"], "bob", action_id="chatops_approve")
        slack.wait_for_reply("incident", ts, lambda m: m["text"].startswith("Done"), 120)
        files, end = crossed(repo, "click", lambda p, a: "runner" in a and any(m in p for m in RUNNER_TOOL))
        results["Approve click -> resumed execution on the runner"] = (
            files,
            end - start,
            chain(repo, "click", "tool", ".py")[0],
        )

        [button] = slack.state()["page_buttons"]
        start = phase(repo, "alert")
        slack.press(button["id"], "U_ALICE")
        deadline = time.time() + 120
        while not records("alert") or not any(
            p.endswith("alert_presenter.py") for _, p, _ in records("alert")
        ):
            if time.time() > deadline:
                raise SystemExit("alert: no alert thread")
            time.sleep(0.2)
        time.sleep(1)
        files, end = crossed(repo, "alert", lambda p, a: p.endswith("alert_presenter.py"))
        results["alert webhook -> first thread message"] = (
            files,
            end - start,
            chain(repo, "alert", "slack", "alert_presenter.py")[0],
        )

        print(
            f"repo {repo} at {subprocess.run(['git', '-C', str(repo), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}"
        )
        print(
            f"idle window ({time.time() - idle_start:.0f} s after start): {len(idle)} files called by the quiet processes"
        )
        for name, (files, seconds, path) in results.items():  # type: ignore[misc]
            noise = files & idle
            print(
                f"{name}: {len(path)} files on the hand-off stacks; {len(files)} files executed "
                f"({len(files - noise)} outside the idle set), {seconds:.2f} s"
            )
            for f in sorted(files | path):
                print(f"    {'*' if f in path else ' '} {'(idle) ' if f in noise else ''}{f}")
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
        hook.unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
