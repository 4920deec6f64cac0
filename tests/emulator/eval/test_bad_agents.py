"""Each bad agent through the real processes, on every shipped scenario: ``python -m emulator.eval run
--agent X`` as ``chatops eval run`` starts it, in a child process. Every attacked metric that
applies scores below the pass line, no such scenario passes, and each run scores exactly what
``test_bad_agent_plans`` predicts without processes (so the fast table speaks for real runs).

``CHATOPS_EVAL_BAD_SCENARIOS=a,b`` runs only those scenarios (while working on one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.eval.agents import AGENTS, ATTACKS, METRICS, applies
from emulator.eval.loading import find_scenario, shipped_files
from emulator.eval.scoring.verdict import GROUNDING_TO_PASS

from .predicted import predicted_score

EXIT_FAILED = 1
CHOSEN = [name for name in os.environ.get("CHATOPS_EVAL_BAD_SCENARIOS", "").split(",") if name]
NAMES = CHOSEN or [path.stem for path in shipped_files()]


def below_the_line(metric: str, value: float) -> bool:
    return value < GROUNDING_TO_PASS if metric == "grounding" else value < 1.0


@pytest.mark.slow
@pytest.mark.parametrize("agent", [agent for agent in AGENTS if agent != "reference"])
def test_a_bad_agent_fails_every_scenario_it_attacks(agent: str, redis_url: str, tmp_path: Path) -> None:
    out = tmp_path / agent
    command = [
        sys.executable,
        "-m",
        "emulator.eval",
        "run",
        "--agent",
        agent,
        "--jobs",
        "2",
        "--out",
        str(out),
    ]
    command += ["--redis-url", redis_url]
    for name in NAMES:
        command += ["--scenario", name]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300 * (len(NAMES) + 1))
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr

    entries = {entry["name"]: entry for entry in json.loads((out / "results.json").read_text())["scenarios"]}
    assert sorted(entries) == sorted(NAMES)
    problems = []
    for name, entry in entries.items():
        scenario = find_scenario(name)
        assert entry["agent"] == agent
        applying = [m for m in ATTACKS[agent] if applies(scenario, agent, m)]
        problems += [
            f"{name}: {m} {entry['scores'][m]}" for m in applying if not below_the_line(m, entry["scores"][m])
        ]
        if applying and entry["passed"]:
            problems.append(f"{name}: passed")
        predicted = predicted_score(scenario, agent).scores()
        if entry["scores"] != predicted:
            problems.append(f"{name}: scored {entry['scores']}, predicted {predicted}")
        assert set(entry["scores"]) == set(METRICS)
    assert problems == [], done.stdout
