"""runbooks/train.md's blocks, one section at a time, run as a reader runs them, in a scratch directory: a python block
after "Save as `NAME`" is saved as NAME (a python block without one runs as a script of its own), and each line of a
bash block runs with `bash -c`, `python` being this environment's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT, fwe_env

RUNBOOK = REPO_ROOT / "runbooks" / "train.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
SAVE_AS = re.compile(r"[Ss]ave as `([\w.-]+)`:\s*$")
STEP = re.compile(r"^step (\d+): (.*)$", re.M)


def section(heading: str) -> str:
    """The text of `## heading` up to the next `## ` heading."""
    text = RUNBOOK.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end + 1]


def blocks(heading: str) -> list[tuple[str, str | None, str]]:
    """(language, the file it is saved as or None, code) of each fenced block of the section, in order."""
    text = section(heading)
    found, before = [], 0
    for match in FENCE.finditer(text):
        saved = SAVE_AS.search(text[before:match.start()].rstrip("\n"))
        found.append((match.group(1), saved.group(1) if saved else None, match.group(2)))
        before = match.end()
    return found


def run_section(heading: str, cwd: Path, timeout: float = 300) -> list[tuple[str, subprocess.CompletedProcess]]:
    """Run the section's blocks in `cwd`, in order: (what ran, its process) for each command; the first that fails
    raises AssertionError with its output."""
    env = fwe_env(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    runs = []
    for i, (language, name, code) in enumerate(blocks(heading)):
        if language == "python" and name is not None:
            (cwd / name).write_text(code, encoding="utf-8")
            continue
        if language == "python":
            (cwd / f"block{i}.py").write_text(code, encoding="utf-8")
            commands = [f"python block{i}.py"]
        elif language == "bash":
            commands = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        else:
            raise AssertionError(f"runbooks/train.md ## {heading}: a ```{language} block this test cannot run")
        for command in commands:
            proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=cwd, env=env,
                                  timeout=timeout)
            assert proc.returncode == 0, f"{command!r} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
            runs.append((command, proc))
    return runs


def steps_printed(stdout: str) -> dict[int, str]:
    """The example scripts' `step N: TOKENS` lines, by step."""
    return {int(step): tokens for step, tokens in STEP.findall(stdout)}


def check_resumes_after_step_5(heading: str, cwd: Path, script: str) -> None:
    """The section's two runs of `python SCRIPT` (the second after the step-10 checkpoint was removed): the first
    prints steps 1-10, the resumed one steps 6-10 with the first run's tokens."""
    runs = [steps_printed(proc.stdout) for command, proc in run_section(heading, cwd)
            if command.startswith(f"python {script}")]
    assert len(runs) == 2
    first, resumed = runs
    assert sorted(first) == list(range(1, 11)) and sorted(resumed) == list(range(6, 11))
    assert resumed == {step: tokens for step, tokens in first.items() if step > 5}
