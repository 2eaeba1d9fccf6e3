"""`fwe bootstrap` as users run it: help, output layout and manifest, refusals, preflight, verify, the loader
reading the result, progress lines, the artifact, and the old automation script.

The commands run in this process; only a run killed at a fault point and the old script (run as a script) get a
process of their own."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from tests.bootstrap.support import cli, file_hashes, killed_at, leftovers, lines_of, manifest_of
from tests.helpers import REPO_ROOT, invoke

SMALL = ("--source", "synthetic", "--gb", "0.003", "--file-mb", "1")


def test_help_teaches_flags_and_exit_codes():
    """--help names every bootstrap flag and the exit codes a script has to handle."""
    result = invoke("bootstrap", "--help", env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--gb", "--out", "--source", "--local-path", "--dataset", "--name", "--split", "--shard-mod",
                 "--shard-rem", "--file-mb", "--fields", "--json", "--artifacts-dir", "--force", "--verify",
                 "--checkpoint-mb", "--bad-records"):
        assert flag in result.stdout, flag
    for code in ("7 not enough disk space", "8 output conflict", "130 interrupted"):
        assert code in " ".join(result.stdout.split()), code


def test_directory_output_manifest_and_artifact(tmp_path):
    """A run writes part files whose size, line count and sha256 the manifest records, totals that add up,
    the provenance fields, no temporary files, a matching --json result and an artifact."""
    out = tmp_path / "out"
    result = cli(*SMALL, "--out", str(out), "--json", tmp=tmp_path)
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    manifest = manifest_of(out)
    assert data["complete"] is True and data["manifest"] == manifest
    assert len(manifest["files"]) == 3 and leftovers(out) == []
    for entry in manifest["files"]:
        raw = (out / entry["name"]).read_bytes()
        assert entry["bytes"] == len(raw) and entry["lines"] == raw.count(b"\n")
        assert entry["sha256"] == hashlib.sha256(raw).hexdigest()
    assert manifest["totals"] == {"bytes": data["bytes"], "documents": data["documents"], "files": 3}
    assert data["bytes"] >= 3_000_000 > data["bytes"] - 120_000  # stops right after the record reaching the target
    for key in ("source", "dataset", "config", "split", "revision", "shard", "fields", "fwe_version", "started",
                "finished", "bad_records"):
        assert key in manifest, key
    assert manifest["source"] == "synthetic" and manifest["shard"] == {"mod": 1, "rem": 0, "by": "document",
                                                                      "from": "default"}
    (artifact,) = (tmp_path / "artifacts" / "bootstrap").glob("*.json")
    record = orjson.loads(artifact.read_bytes())
    for key in ("bytes", "documents", "seconds", "mb_per_s", "output", "manifest"):
        assert record[key] == data[key], key
    line = orjson.loads((out / "part-00000.jsonl").read_bytes().splitlines()[0])
    assert set(line) == {"text", "id"}


def test_rerun_of_a_complete_output_changes_nothing(tmp_path):
    """Re-running a finished bootstrap reports it complete and leaves its files untouched."""
    out = tmp_path / "out"
    assert cli(*SMALL, "--out", str(out), tmp=tmp_path).exit_code == 0
    hashes, mtimes = file_hashes(out), {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = cli(*SMALL, "--out", str(out), "--json", tmp=tmp_path)
    assert again.exit_code == 0 and orjson.loads(again.stdout)["outcome"] == "already_complete"
    assert file_hashes(out) == hashes and {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == mtimes


def test_different_arguments_are_refused_unless_force(tmp_path):
    """Other arguments against an existing output exit 8 naming what differs; --force starts over."""
    out = tmp_path / "out"
    assert cli(*SMALL, "--out", str(out), tmp=tmp_path).exit_code == 0
    refused = cli("--source", "synthetic", "--gb", "0.002", "--file-mb", "1", "--fields", "all", "--out", str(out),
                  tmp=tmp_path)
    assert refused.exit_code == 8
    message = " ".join(refused.stderr.split())
    assert "--gb 0.003 there, 0.002 now" in message and "--fields 'text' there, 'all' now" in message
    assert "--force" in message
    forced = cli("--source", "synthetic", "--gb", "0.002", "--file-mb", "1", "--fields", "all", "--out", str(out),
                 "--force", tmp=tmp_path)
    assert forced.exit_code == 0, forced.stderr
    assert manifest_of(out)["fields"] == "all" and len(manifest_of(out)["files"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "part-00000.jsonl", "part-00001.jsonl"]


def test_foreign_directory_is_refused_and_force_keeps_foreign_files(tmp_path):
    """A non-empty directory that is not a bootstrap is refused (exit 8); with --force bootstrap writes there
    without deleting files it does not own."""
    out = tmp_path / "data"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    refused = cli(*SMALL, "--out", str(out), tmp=tmp_path)
    assert refused.exit_code == 8 and "not an fwe bootstrap" in refused.stderr
    assert cli(*SMALL, "--out", str(out), "--force", tmp=tmp_path).exit_code == 0
    assert (out / "notes.txt").read_text() == "keep me"


def test_preflight_refuses_before_writing_anything(tmp_path):
    """More than the disk holds fails with exit 7 and a message giving free and needed space; nothing is created."""
    out = tmp_path / "out"
    result = cli("--source", "synthetic", "--gb", "900000", "--out", str(out), tmp=tmp_path)  # 900 TB: under the limit
    assert result.exit_code == 7
    message = " ".join(result.stderr.split())
    assert "not enough disk space" in message and "GB free" in message and "needed" in message
    assert not out.exists()


def test_bad_flags_exit_2(tmp_path):
    """Missing or bad values are usage errors (exit 2) with a message naming the flag."""
    nothing = cli(tmp=tmp_path)
    assert nothing.exit_code == 2 and "--gb" in nothing.stderr
    no_gb = cli("--out", str(tmp_path / "o"), tmp=tmp_path)
    assert no_gb.exit_code == 2 and "--gb" in no_gb.stderr
    negative = cli("--gb", "-1", "--out", str(tmp_path / "o"), "--source", "synthetic", tmp=tmp_path)
    assert negative.exit_code == 2 and "--gb" in negative.stderr
    fields = cli("--gb", "0.001", "--out", str(tmp_path / "o"), "--source", "synthetic", "--fields", "some",
                 tmp=tmp_path)
    assert fields.exit_code == 2 and "'some'" in fields.stderr
    single = cli("--gb", "0.001", "--out", str(tmp_path / "o.jsonl"), "--file-mb", "1", "--source", "synthetic",
                 tmp=tmp_path)
    assert single.exit_code == 2 and "--file-mb" in single.stderr
    for flags, named in ((("--gb", "inf"), "--gb"), (("--gb", "1e300"), "--gb"), (("--gb", "nan"), "--gb"),
                         (("--gb", "0.001", "--file-mb", "1e300"), "--file-mb"),
                         (("--gb", "0.001", "--checkpoint-mb", "inf"), "--checkpoint-mb"),
                         (("--gb", "0.001", "--workers", "99999"), "--workers")):
        huge = cli(*flags, "--out", str(tmp_path / "o"), "--source", "synthetic", tmp=tmp_path)
        assert huge.exit_code == 2 and f"error: {named} must be" in huge.stderr, huge.stderr
    assert not (tmp_path / "o").exists()


def test_a_damaged_or_escaping_manifest_is_one_line_not_a_crash(tmp_path):
    """--verify on a manifest whose entry has a non-numeric size, or names a file outside the bootstrap
    ('../x'), exits 8 with one line calling it damaged; the loader refuses the escaping manifest too (exit 4)."""
    out = tmp_path / "out"
    assert cli(*SMALL, "--out", str(out), tmp=tmp_path).exit_code == 0
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    for entry_change in ({"bytes": "x"}, {"name": "../victim.jsonl"}):
        damaged = dict(manifest, files=[dict(manifest["files"][0], **entry_change)] + manifest["files"][1:])
        (out / "manifest.json").write_bytes(orjson.dumps(damaged))
        result = cli("--verify", "--out", str(out), tmp=tmp_path)
        assert result.exit_code == 8, result.stderr
        assert "damaged" in result.stderr and "Traceback" not in result.stderr
    (tmp_path / "victim.jsonl").write_bytes(b'{"text": "outside"}\n')
    smoke = invoke("smoke", "--local-path", str(out), "--tokenizer", "byte", "--artifacts-dir", str(tmp_path / "a"))
    assert smoke.exit_code == 4 and "not a plain file name" in " ".join(smoke.stderr.split())


def test_verify_detects_a_changed_part(tmp_path):
    """--verify passes on an intact bootstrap and fails (exit 1, naming the file) once a byte of a part changes;
    a part whose size changed makes a re-run refuse the output as damaged (exit 8)."""
    out = tmp_path / "out"
    assert cli(*SMALL, "--out", str(out), tmp=tmp_path).exit_code == 0
    ok = cli("--verify", "--out", str(out), "--json", tmp=tmp_path)
    assert ok.exit_code == 0 and orjson.loads(ok.stdout)["ok"] is True
    part = out / "part-00001.jsonl"
    data = bytearray(part.read_bytes())
    data[100] ^= 1
    part.write_bytes(bytes(data))
    bad = cli("--verify", "--out", str(out), "--json", tmp=tmp_path)
    assert bad.exit_code == 1
    assert orjson.loads(bad.stdout)["problems"] == [{"name": "part-00001.jsonl",
                                                     "problem": "sha256 differs from the manifest"}]
    part.write_bytes(bytes(data[:-10]))
    damaged = cli(*SMALL, "--out", str(out), tmp=tmp_path)
    assert damaged.exit_code == 8 and "damaged" in damaged.stderr


def test_smoke_reads_a_bootstrap_dir_and_refuses_an_incomplete_one(tmp_path):
    """The loader reads a finished bootstrap directory through its manifest; an unfinished one fails with a
    message saying it is incomplete and how to finish it, and --allow-partial reads the finished parts."""
    out = tmp_path / "out"
    assert cli(*SMALL, "--out", str(out), tmp=tmp_path).exit_code == 0
    smoke = invoke("smoke", "--local-path", str(out), "--timeout", "60", "--json",
                   "--artifacts-dir", str(tmp_path / "artifacts"))
    assert smoke.exit_code == 0, smoke.stderr
    assert orjson.loads(smoke.stdout)["source"]["files"] == 3
    killed = killed_at("part-renamed:2", *SMALL, "--out", str(tmp_path / "part"), tmp=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    refused = invoke("smoke", "--local-path", str(tmp_path / "part"), "--timeout", "60",
                     "--artifacts-dir", str(tmp_path / "artifacts"))
    assert refused.exit_code == 4 and "incomplete" in refused.stderr and "re-running" in refused.stderr
    partial = invoke("smoke", "--local-path", str(tmp_path / "part"), "--allow-partial", "--timeout", "60",
                     "--json", "--artifacts-dir", str(tmp_path / "artifacts"))
    assert partial.exit_code == 0 and orjson.loads(partial.stdout)["source"]["files"] == 1


def test_single_file_output_for_the_users_local_path(tmp_path):
    """--out X.jsonl writes one file (manifest beside it) that `fwe smoke --local-path X.jsonl` reads; until it
    is complete the file does not exist under its name and the loader says the bootstrap is incomplete."""
    out = tmp_path / "fwe_bootstrap.jsonl"
    args = ("--source", "synthetic", "--gb", "0.002", "--checkpoint-mb", "0.5", "--out", str(out))
    killed = killed_at("record:300", *args, tmp=tmp_path)
    assert killed.returncode == -signal.SIGKILL and not out.exists(), killed.stderr
    refused = invoke("smoke", "--local-path", str(out), "--artifacts-dir", str(tmp_path / "artifacts"))
    assert refused.exit_code == 4 and "incomplete" in refused.stderr
    assert cli(*args, tmp=tmp_path).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("fwe_")) == [
        "fwe_bootstrap.jsonl", "fwe_bootstrap.jsonl.manifest.json"]
    manifest = manifest_of(out)
    assert manifest["files"][0]["name"] == "fwe_bootstrap.jsonl" and manifest["layout"] == "single-file"
    assert manifest["files"][0]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    smoke = invoke("smoke", "--local-path", str(out), "--json", "--artifacts-dir", str(tmp_path / "artifacts"))
    assert smoke.exit_code == 0, smoke.stderr


def test_signal_handlers_are_given_back_after_a_run(tmp_path):
    """A run installs its own Ctrl-C/SIGTERM handlers (stop at a record, save a resume point) only for its duration:
    afterwards, also after a failed run, the process's handlers are the ones it had."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    assert cli(*SMALL, "--out", str(tmp_path / "out"), tmp=tmp_path).exit_code == 0
    assert {sig: signal.getsignal(sig) for sig in before} == before
    failed = cli(*SMALL, "--out", str(tmp_path / "full"), tmp=tmp_path, env={"FWE_TEST_ENOSPC_AFTER_BYTES": "1000"})
    assert failed.exit_code == 7 and {sig: signal.getsignal(sig) for sig in before} == before


def test_plain_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    """Without a terminal, progress comes as plain lines (bytes of target, percent, docs, MB/s, ETA), no bar."""
    result = cli(*SMALL, "--out", str(tmp_path / "out"), tmp=tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.startswith("bootstrap: ")]
    assert lines and "0.003/0.003 GB (100.0%)" in lines[-1]
    assert "docs" in lines[-1] and "MB/s" in lines[-1] and "ETA" in lines[-1]
    assert "━" not in result.stderr


def test_automation_script_accepts_the_old_flags(tmp_path):
    """scripts/automation/fwe_bootstrap.py --out X.jsonl --bytes N (the users' old interface) produces the same
    file as `fwe bootstrap` with the equivalent flags."""
    old = tmp_path / "old.jsonl"
    script = REPO_ROOT / "scripts" / "automation" / "fwe_bootstrap.py"
    result = subprocess.run([sys.executable, str(script), "--out", str(old), "--bytes", "1.5M", "--source",
                             "synthetic"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    new = tmp_path / "new.jsonl"
    assert cli("--source", "synthetic", "--gb", "0.0015", "--out", str(new), tmp=tmp_path).exit_code == 0
    assert old.read_bytes() == new.read_bytes() and len(lines_of(old)) > 100
    again = subprocess.run([sys.executable, str(script), "--out", str(old), "--bytes", "2M", "--source", "synthetic"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert again.returncode == 8 and "different arguments" in again.stderr


def test_bootstrap_registered_in_top_level_help():
    """`fwe --help` lists the command."""
    assert "bootstrap" in invoke("--help").stdout


def test_without_out_it_writes_data_fwe_bootstrap_under_the_current_directory(tmp_path, monkeypatch):
    """`fwe bootstrap --gb N` (the card's command, no --out) stages into ./data/fwe_bootstrap, says so with the
    absolute path in its summary and --json result, and `fwe bootstrap --verify` without --out checks that same
    directory."""
    monkeypatch.chdir(tmp_path)
    result = cli("--source", "synthetic", "--gb", "0.001", "--json", tmp=tmp_path)
    assert result.exit_code == 0, result.stderr
    default = Path.cwd() / "data" / "fwe_bootstrap"  # cwd as the process sees it (symlinks resolved)
    manifest = manifest_of(default)
    assert manifest["complete"] is True and (default / manifest["files"][0]["name"]).is_file()
    assert orjson.loads(result.stdout)["output"] == str(default)
    flat = "".join(result.stderr.split())
    assert str(default) in flat and f"--local-path{default}" in flat
    verified = cli("--verify", "--json", tmp=tmp_path)
    assert verified.exit_code == 0, verified.stderr
    assert orjson.loads(verified.stdout)["output"] == str(default)


def test_verify_without_out_and_without_a_bootstrap_names_the_default(tmp_path, monkeypatch):
    """`fwe bootstrap --verify` with no --out and nothing staged fails as a missing manifest (exit 8) naming
    data/fwe_bootstrap, so the user sees which directory was checked."""
    monkeypatch.chdir(tmp_path)
    result = cli("--verify", tmp=tmp_path)
    assert result.exit_code == 8
    assert str(Path.cwd() / "data" / "fwe_bootstrap") in "".join(result.stderr.split())


def test_help_names_the_default_output():
    """`fwe bootstrap --help` says where the data goes without --out: "Default data/fwe_bootstrap"."""
    result = invoke("bootstrap", "--help", env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Default data/fwe_bootstrap" in " ".join(result.stdout.split())



def test_paths_with_brackets_print_as_typed(tmp_path):
    """An --out path holding rich markup (`[red]x[/]`, `[torch]`) shows up verbatim in the summary and in --verify's
    lines: paths are escaped, never read as markup (no MarkupError, no dropped brackets)."""
    out = tmp_path / "o[red]x[/]-[torch]"
    result = cli(*SMALL, "--out", str(out), tmp=tmp_path)
    assert result.exit_code == 0, result.stderr
    flat = "".join(result.stderr.split())
    assert "".join(str(out).split()) in flat
    part = out / "part-00001.jsonl"
    data = bytearray(part.read_bytes())
    data[100] ^= 1
    part.write_bytes(bytes(data))
    bad = cli("--verify", "--out", str(out), tmp=tmp_path)
    assert bad.exit_code == 1
    assert "".join("bad: part-00001.jsonl: sha256 differs from the manifest".split()) in "".join(bad.stderr.split())
    assert "".join(str(out / "manifest.json").split()) in "".join(bad.stderr.split())


def test_artifacts_dir_that_is_a_file_is_refused_before_anything_is_staged(tmp_path):
    """An --artifacts-dir that cannot take the artifact fails at once (exit 8, one line naming it) and stages nothing,
    rather than after the copy, when the run's outcome could no longer be recorded."""
    blocker = tmp_path / "artifacts-file"
    blocker.write_text("not a folder")
    out = tmp_path / "out"
    result = invoke("bootstrap", *SMALL, "--out", str(out), "--artifacts-dir", str(blocker))
    assert result.exit_code == 8, result.stderr
    assert str(blocker) in "".join(result.stderr.split()) and "Traceback" not in result.stderr
    assert not out.exists()


def test_tokenize_summary_points_training_at_the_shards(tmp_path):
    """After `fwe bootstrap --tokenize T`, the summary's next step is --local-path of the token shards (OUT/tokens,
    or OUT.tokens beside a single-file bootstrap), not of the text, which would be tokenized again."""
    for out, shards in ((tmp_path / "dir", tmp_path / "dir" / "tokens"),
                        (tmp_path / "one.jsonl", tmp_path / "one.jsonl.tokens")):
        sizes = SMALL[:-2] if out.suffix == ".jsonl" else SMALL  # a single file has no parts to size (--file-mb)
        result = cli(*sizes, "--out", str(out), "--tokenize", "byte", tmp=tmp_path)
        assert result.exit_code == 0, result.stderr
        assert (shards / "manifest.json").exists()
        flat = "".join(result.stderr.split())
        assert "".join(f"trainfromit:--local-path{shards}".split()) in flat, result.stderr
