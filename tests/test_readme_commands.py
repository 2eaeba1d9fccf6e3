"""README.md's commands (and runbooks/commands.md's examples README leaves out) as a user types them, in a fresh
clone with a fresh `.venv`, each exiting as documented.

Every line of every ```bash block of README.md is classified (see `classify`): a block line this module does not
know fails the test by name, so README and test cannot drift apart silently. The repository's files (tracked, plus
new ones git does not ignore; never .venv, artifacts or data) are copied into a temporary directory, where
`python -m venv .venv` makes a fresh environment the way scripts/demo.sh does. There is no package index here, so the
fresh venv sees this environment's site-packages through a .pth file (the dependencies as installed here, pip
among them: the venv is made `--without-pip`, and `.venv/bin/pip` is the entry script pip writes for itself, instead
of ensurepip installing a second pip and setuptools, 7 CPU-s) and `pip install -e .` (scripts/demo.sh's, the first
README command) runs offline: PIP_NO_INDEX=1 and PIP_NO_BUILD_ISOLATION=0 (pip's inverted spelling: no build
isolation, the build backend is this environment's setuptools). Then every command runs with `bash -c` in the copy,
in README order, once for the module; a block's lines after `source .venv/bin/activate` run with that activation in
front of them.

`bash scripts/test.sh` is the suite itself (CI runs it via .ci/run): it is classified and not run here, or the suite
would run itself. The environment of the commands has HF_HUB_OFFLINE=1 and a private HF_HOME, so nothing reaches
for the Hub or touches the user's cache; commands that need the Hub do not belong in README's bash blocks."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

README = REPO_ROOT / "README.md"
COMMANDS = REPO_ROOT / "runbooks" / "commands.md"  # the examples that moved out of README
NOT_COPIED = (".venv", "artifacts", "data", ".git")  # a fresh clone has no venv, no outputs, no staged data
COMMAND_TIMEOUT_S = 600  # scripts/demo.sh is the main job; a generous bound for a slow machine, not a timing check
SETUP_TIMEOUT_S = 300
ACTIVATE = ("source .venv/bin/activate", ". .venv/bin/activate")
SUITE = ("bash scripts/test.sh",)  # the test suite itself: CI runs it via .ci/run
SCRIPTS = ("bash scripts/demo.sh",)  # set up ./.venv and run the main job
HUB_SOURCE_COMMANDS = ("smoke", "measure", "tune", "bootstrap")  # their default --source is the Hub
FWE_COMMANDS = HUB_SOURCE_COMMANDS + ("tokenize", "doctor", "report")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
DOCUMENTED_EXIT = re.compile(r"#.*\bexits?\s+(\d+)\b")
OTHER_SHELL_FENCES = ("```sh", "```shell", "```console", "```zsh")
# `.venv/bin/pip` as pip writes it for itself: this environment's pip module (seen through the .pth) run by the venv's
# python, so that what it installs goes into the venv
PIP_ENTRY = ("#!{python}\nimport sys\nfrom pip._internal.cli.main import main\n"
             "if __name__ == '__main__':\n    sys.exit(main())\n")
NOT_IN_A_CLONE = ("__pycache__", ".pytest_cache", ".hypothesis", "build", "dist")  # without git: what it ignores


@dataclass(frozen=True)
class Line:
    """One command of a README bash block: where it is, as written (continuations joined), and its block."""

    lineno: int
    text: str
    block: int
    doc: str = "README.md"


@dataclass(frozen=True)
class Step:
    """What the test does with a README line: 'activate', 'run' (expecting exit code `exit`) or 'suite' (not run)."""

    line: Line
    kind: str
    exit: int = 0


def bash_lines(text: str, doc: str = "README.md") -> list[Line]:
    """The command lines of every ```bash block: comment-only and blank lines left out, `\\` continuations joined."""
    lines: list[Line] = []
    block, pending, start = -1, "", 0
    in_block = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not in_block:
            if stripped == "```bash":
                in_block, block = True, block + 1
            assert stripped not in OTHER_SHELL_FENCES, (f"{doc}:{lineno}: a {stripped[3:]} block: write shell "
                                                        "commands in ```bash blocks, which this test runs")
            continue
        if stripped.startswith("```"):
            assert not pending, f"{doc}:{start}: a `\\` continuation runs into the end of its bash block"
            in_block = False
            continue
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        start = start if pending else lineno
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        lines.append(Line(start, pending + stripped, block, doc))
        pending = ""
    assert not in_block, f"{doc}: a ```bash block is never closed"
    return lines


def classify(line: Line) -> Step:
    """What a README bash line is, or AssertionError naming it when this module does not know it (add it here)."""
    where = f"{line.doc}:{line.lineno}: `{line.text}`"
    words = shlex.split(line.text, comments=True)
    command = " ".join(words)
    documented = DOCUMENTED_EXIT.search(line.text)
    expected = int(documented.group(1)) if documented else 0
    if command in ACTIVATE:
        return Step(line, "activate")
    if any(command == s or command.startswith(s + " ") for s in SUITE):
        return Step(line, "suite")  # the suite, run by CI via .ci/run: running it here would run this test inside it
    if command in SCRIPTS:
        return Step(line, "run", expected)
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]  # VAR=value fwe ...: the variables apply to the command
    if len(words) >= 2 and words[0] == "fwe" and words[1] in FWE_COMMANDS:
        if _needs_hub(words) and not documented:
            raise AssertionError(f"{where} reads FineWeb-Edu from the Hub (--source hub is the default), which a test "
                                 "cannot reach: keep such commands out of README's bash blocks, or document the exit "
                                 "code it has offline in a trailing comment (`# exits 4 without the Hub`)")
        return Step(line, "run", expected)
    raise AssertionError(f"{where} is a command tests/test_readme_commands.py does not know how to run; classify it "
                         "in classify() (a command to run and its documented exit code, or why it is not run)")


def _needs_hub(words: list[str]) -> bool:
    """`fwe smoke|measure|tune|bootstrap` without a local or synthetic source (and not --verify/--help)."""
    if words[1] not in HUB_SOURCE_COMMANDS or {"--help", "--verify"} & set(words):
        return False
    flags = dict(zip(words, words[1:]))
    source = next((w.split("=", 1)[1] for w in words if w.startswith("--source=")), flags.get("--source"))
    local = "--local-path" in words or any(w.startswith("--local-path=") for w in words)
    return source == "hub" or (source is None and not local)


def readme_steps() -> list[Step]:
    """README's lines, then the lines of runbooks/commands.md's examples README does not already run (README shows
    a few of them; the examples moved there still run as written)."""
    steps = [classify(line) for line in bash_lines(README.read_text(encoding="utf-8"))]
    seen = {repr(shlex.split(step.line.text, comments=True)) for step in steps}
    more = bash_lines(COMMANDS.read_text(encoding="utf-8"), "runbooks/commands.md")
    return steps + [classify(line) for line in more if repr(shlex.split(line.text, comments=True)) not in seen]


def test_every_readme_bash_line_is_classified():
    """Every command in README's bash blocks is one this module knows how to run (or knows why not to run), none
    needs the Hub, and the blocks hold the main job (scripts/demo.sh) and some fwe commands: README and this test
    cannot drift apart without this failing."""
    steps = readme_steps()
    kinds = [step.kind for step in steps]
    assert "run" in kinds and "activate" in kinds
    assert any(step.line.text.startswith("bash scripts/demo.sh") for step in steps)


def test_an_unknown_or_hub_command_is_named_not_skipped():
    """A README bash line the test does not know, or one that would read from the Hub, fails classification with a
    message naming its README line, instead of being skipped or run blind."""
    with pytest.raises(AssertionError, match=r"README.md:7: `make install` .*does not know"):
        classify(Line(7, "make install", 0))
    with pytest.raises(AssertionError, match=r"README.md:9: `fwe bootstrap --gb 5` reads FineWeb-Edu from the Hub"):
        classify(Line(9, "fwe bootstrap --gb 5", 0))
    assert classify(Line(3, "fwe smoke --source hub  # exits 4 without the Hub", 0)) == Step(
        Line(3, "fwe smoke --source hub  # exits 4 without the Hub", 0), "run", 4)
    assert bash_lines("x\n```bash\n# note\nfwe doctor   # one screen\n\nfwe smoke \\\n  --json\n```\n") == [
        Line(4, "fwe doctor   # one screen", 0), Line(6, "fwe smoke --json", 0)]


# -- the fresh clone and its fresh venv ---------------------------------------------------------------------------


def _repository_files() -> list[str]:
    """The files a clone would have: git's tracked files plus new ones it does not ignore (the working tree, so a
    file not committed yet is there too), minus NOT_COPIED and files deleted from the tree."""
    git = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                         capture_output=True, timeout=60)
    if git.returncode == 0:
        listed = git.stdout.decode().split("\0")
    else:  # a source tree without git: everything but what .gitignore keeps out of a clone
        listed = [str(p.relative_to(REPO_ROOT)) for p in REPO_ROOT.rglob("*")
                  if not {*NOT_IN_A_CLONE} & set(p.relative_to(REPO_ROOT).parts)
                  and not any(part.endswith(".egg-info") for part in p.parts)]
    return sorted({name for name in listed if name and name.split("/")[0] not in NOT_COPIED
                   and (REPO_ROOT / name).is_file()})


def _copy_repository(dest: Path) -> None:
    for name in _repository_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)  # keeps the scripts' modes


def _site_packages() -> list[str]:
    """This environment's site-packages (pure and platform), for the fresh venv's .pth file."""
    paths = sysconfig.get_paths()
    user = [site.getusersitepackages()] if site.ENABLE_USER_SITE else []
    return [p for p in dict.fromkeys([paths["purelib"], paths["platlib"], *user]) if os.path.isdir(p)]


def _user_env(home: Path) -> dict[str, str]:
    """A shell as a user has it (no venv active, none of the users' NSA_FWE_* or the tests' FWE_* settings), with pip
    offline, no build isolation, the Hub off and a private HF_HOME."""
    outer_bin = str(Path(sys.prefix) / "bin")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NSA_FWE_", "FWE_", "PIP_", "HF_", "HUGGINGFACE_"))
           and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != outer_bin)
    env.update(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               HF_HUB_OFFLINE="1", HF_HOME=str(home / "hf"), FWE_TRACEBACK="1")  # a bug shows its traceback
    return env


def _run(args, cwd: Path, env: dict, what: str, timeout: float = SETUP_TIMEOUT_S) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{_tail(proc)}"
    return proc


def _tail(proc: subprocess.CompletedProcess, chars: int = 3000) -> str:
    return f"--- stderr (tail) ---\n{proc.stderr[-chars:]}\n--- stdout (tail) ---\n{proc.stdout[-chars // 3:]}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, dict]:
    """A copy of the repository with a fresh .venv made offline (nothing installed in it yet: the README's first
    command, scripts/demo.sh, installs the project with `pip install -e .` as a user's first run does) and the
    environment to run README commands in."""
    root = tmp_path_factory.mktemp("readme")
    copy, env = root / "fwe", _user_env(root)
    _copy_repository(copy)
    base = getattr(sys, "_base_executable", None) or sys.executable
    _run([base, "-m", "venv", "--without-pip", str(copy / ".venv")], copy, env, "python -m venv .venv")
    python = copy / ".venv" / "bin" / "python"
    fresh = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], copy, env,
                      "the fresh venv's python").stdout.strip())
    (fresh / "_fwe_test_outer_env.pth").write_text("".join(p + "\n" for p in _site_packages()))
    pip = copy / ".venv" / "bin" / "pip"
    pip.write_text(PIP_ENTRY.format(python=python))
    pip.chmod(0o755)
    return copy, env


@dataclass(frozen=True)
class Ran:
    """A README command as it ran in the clone: its step, and its process (None: it ran past COMMAND_TIMEOUT_S)."""

    step: Step
    proc: subprocess.CompletedProcess | None


@pytest.fixture(scope="module")
def readme_run(clone) -> list[Ran]:
    """Each command of README's bash blocks, run once for the module in order in the fresh clone as a user types it
    (after `source .venv/bin/activate` where its block activated the venv); stops at the first that ran past
    COMMAND_TIMEOUT_S or exited otherwise than README documents (the commands after it depend on it)."""
    copy, env = clone
    activated = False
    ran: list[Ran] = []
    for step in readme_steps():
        if step.kind == "activate":
            activated = True
            continue
        if step.kind == "suite":
            continue  # the suite, run by CI via .ci/run: this test is part of it
        script = f"{ACTIVATE[0]} && {step.line.text}" if activated else step.line.text
        try:
            proc = subprocess.run(["bash", "-c", script], cwd=copy, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc = None
        ran.append(Ran(step, proc))
        if proc is None or proc.returncode != step.exit:
            break
    return ran


def test_readme_commands_exit_as_documented(readme_run):
    """Each command of README's bash blocks, run in order in the fresh clone as a user types it (after
    `source .venv/bin/activate` where its block activated the venv), exits with the documented code (0 unless a
    trailing `# exits N` says otherwise); a failure names the README line and shows its output's tail."""
    for ran in readme_run:
        step, proc = ran.step, ran.proc
        if proc is None:
            pytest.fail(f"{step.line.doc}:{step.line.lineno}: `{step.line.text}` ran past {COMMAND_TIMEOUT_S} s")
        assert proc.returncode == step.exit, (f"{step.line.doc}:{step.line.lineno}: `{step.line.text}` exited "
                                              f"{proc.returncode}, its doc documents {step.exit}\n{_tail(proc)}")
    assert [ran.step for ran in readme_run] == [step for step in readme_steps() if step.kind == "run"], (
        "not every README command ran")


def test_fresh_venv_runs_the_copy(clone, readme_run, tmp_path):
    """After README's commands (scripts/demo.sh installs the project), the fresh venv's `fwe_cli` (imported away
    from the copy's directory) and the `fwe` that activation puts on PATH are the copy's, not this checkout's: the
    README commands really ran a fresh clone's install."""
    copy, env = clone
    where = _run([str(copy / ".venv" / "bin" / "python"), "-c", "import fwe_cli; print(fwe_cli.__file__)"], tmp_path,
                 env, "import fwe_cli in the fresh venv").stdout.strip()
    assert Path(where).resolve().is_relative_to(copy.resolve()), where
    found = _run(["bash", "-c", "source .venv/bin/activate && command -v fwe"], copy, env, "command -v fwe")
    assert Path(found.stdout.strip()) == copy / ".venv" / "bin" / "fwe"
