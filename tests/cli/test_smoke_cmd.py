"""`fwe smoke`: help, exit codes, --json output equal to the artifact, and real tokenizers on local files."""

import subprocess
import sys

import numpy as np
import orjson

from tests.helpers import REPO_ROOT, invoke, run_fwe

REQUIRED_KEYS = {"ok", "first_batch_s", "shape", "tokens_per_s", "tokenizer", "source", "config", "host",
                 "versions", "checks", "artifact"}


def test_root_help_lists_commands_and_version():
    """`fwe --help` lists every command and `fwe --version` prints the version, both exiting 0."""
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("smoke", "measure", "tune", "bootstrap"):
        assert command in result.stdout, command
    version = invoke("--version")
    assert version.exit_code == 0 and version.stdout.startswith("fwe ")


def test_smoke_help_teaches_flags_variables_and_exit_codes():
    """--help names the command's flags, the users' variables and every exit code."""
    result = invoke("smoke", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for needle in ("--timeout", "--batches", "--save-batches", "--json", "--artifacts-dir", "--synthetic-on-fail",
                   "NSA_FWE_DOC_BATCH", "NSA_FWE_Q", "NSA_FWE_PREFETCH",
                   "0 ok", "1 checks failed", "2 bad usage", "3 timeout", "4 loader/source/tokenizer error"):
        assert needle in text, needle


def test_help_imports_no_loader_core():
    """`fwe --help` (the app and its command modules) imports neither numpy nor the loader core: the cores are
    imported by the commands when they run."""
    code = ("import sys, fwe_cli.cli.app; "
            "print(sorted(m for m in ('numpy', 'fwe_cli.loader.fineweb_loader', 'fwe_cli.measure.cold_warm', "
            "'fwe_cli.measure.smoke', 'fwe_cli.measure.tune', 'fwe_cli.bootstrap.run') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_smoke_synthetic_byte_json(tmp_path):
    """The acceptance command exits 0; its JSON has ok true and first_batch_s, and equals the artifact file."""
    result = invoke("smoke", "--source", "synthetic", "--tokenizer", "byte", "--timeout", "60", "--json",
                    "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    out = orjson.loads(result.stdout)
    assert out["ok"] is True and out["first_batch_s"] > 0
    assert REQUIRED_KEYS <= set(out)
    assert {"seq_len", "batch_size", "doc_batch", "queue_depth", "prefetch", "shard"} <= set(out["config"])
    assert out["host"]["cpus_logical"] >= 1 and out["versions"]["numpy"]
    assert out["requests"] is None  # no Hub involved: nothing counted, rather than a misleading 0
    artifact = orjson.loads(open(out["artifact"], "rb").read())
    assert artifact == out
    assert out["artifact"].startswith(str(tmp_path / "smoke"))


def test_smoke_json_leaves_stderr_to_warnings_and_errors(tmp_path):
    """With --json the object carries the result: no summary table on stderr (as measure and tune), only warnings
    and errors; without --json the table is there."""
    args = ("smoke", "--source", "synthetic", "--tokenizer", "byte", "--batches", "1", "--artifacts-dir", str(tmp_path))
    quiet = invoke(*args, "--json")
    assert quiet.exit_code == 0, quiet.stderr
    assert [line for line in quiet.stderr.splitlines() if line.strip() and not line.startswith("warning:")] == []
    assert orjson.loads(quiet.stdout)["ok"] is True
    table = invoke(*args)
    assert table.exit_code == 0 and "fwe smoke" in table.stderr and "first batch" in table.stderr


def test_smoke_local_gpt2_seq1024_batch8(tmp_path, synthetic_jsonl, gpt2_tokenizer_json):
    """Local JSONL + GPT-2 tokenizer.json, seq 1024, batch 8: ok, shape right, ids within GPT-2's vocab."""
    out = tmp_path / "b.npz"
    result = invoke("smoke", "--local-path", str(synthetic_jsonl), "--tokenizer", gpt2_tokenizer_json,
                    "--seq-len", "1024", "--batch", "8", "--json", "--save-batches", str(out),
                    "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert data["shape"] == [8, 1024] and data["tokenizer"]["vocab_size"] == 50257
    assert all(c["ok"] for c in data["checks"]) and len(data["checks"]) == 4
    saved = np.load(out)["batches"]
    assert saved.shape == (3, 8, 1024) and saved.max() < 50257 and (saved == 50256).any()


def test_env_values_show_in_resolved_config(tmp_path):
    """NSA_FWE_* variables land in the artifact's resolved config, and are recorded as set."""
    result = invoke("smoke", "--source", "synthetic", "--json", "--artifacts-dir", str(tmp_path),
                    env={"NSA_FWE_DOC_BATCH": "33", "NSA_FWE_Q": "3"})
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert data["config"]["doc_batch"] == 33 and data["config"]["queue_depth"] == 3
    assert data["env"] == {"NSA_FWE_DOC_BATCH": "33", "NSA_FWE_Q": "3"}


def test_source_that_ends_early_fails_checks(tmp_path):
    """A source too small for one batch is a failed smoke (exit 1), not a pass with nothing checked."""
    path = tmp_path / "tiny.jsonl"
    path.write_text('{"text": "too short"}\n')
    result = invoke("smoke", "--local-path", str(path), "--json", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 1
    data = orjson.loads(result.stdout)
    assert data["ok"] is False and [check["name"] for check in data["checks"] if not check["ok"]] == ["batches"]


def test_unknown_tokenizer_file_is_loader_error(tmp_path):
    """A missing tokenizer file is a loader error (exit 4) explained in one line, without a traceback."""
    result = invoke("smoke", "--source", "synthetic", "--tokenizer", str(tmp_path / "nope.json"),
                    "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 4
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "does not exist" in errors[0] and "Traceback" not in result.stderr


def test_bad_flag_value_is_usage_error(tmp_path):
    """A bad loader setting is a usage error (exit 2) naming the value, and nothing is measured."""
    result = invoke("smoke", "--source", "nowhere", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 2 and "nowhere" in result.stderr
    assert not (tmp_path / "smoke").exists()


def _smoke_on_stalled_hub(tmp_path, env: dict, *args: str):
    """`fwe smoke --json` in its own process reading a Hub whose file listing never comes (stalled_listing); returns
    the process and its stdout, which must be exactly one JSON object (orjson rejects trailing data). (A FIFO hung
    here once; the loader now refuses one before opening it.)"""
    proc = run_fwe("smoke", "--source", "hub", "--tokenizer", "byte", *args, "--json",
                   "--artifacts-dir", str(tmp_path / "a"), env=env, timeout=60)
    data = orjson.loads(proc.stdout) if proc.stdout.strip() else None
    assert isinstance(data, dict), (proc.returncode, proc.stdout, proc.stderr)
    return proc, data


def test_a_hanging_source_ends_by_the_loaders_deadline_with_exit_3(tmp_path, stalled_listing):
    """A source that never yields (a Hub whose file listing never comes), with prefetch: the loader's own deadline
    ends the run (LoaderTimeout naming the stage, not the watchdog) and the process ends by itself, its producer
    thread still stuck: exit 3, one JSON object on stdout (ok false) equal to the one artifact, and the stage on
    stderr."""
    proc, data = _smoke_on_stalled_hub(tmp_path, stalled_listing, "--timeout", "1")
    assert proc.returncode == 3, proc.stderr
    assert data["exit_code"] == 3 and data["ok"] is False
    assert data["error"]["type"] == "LoaderTimeout" and " within " in data["error"]["message"]
    assert data["error"]["stage"].startswith("opening source (Hub file listing")
    assert "opening source (Hub file listing" in proc.stderr
    artifacts = list((tmp_path / "a" / "smoke").glob("*.json"))
    assert [str(a) for a in artifacts] == [data["artifact"]]
    assert orjson.loads(artifacts[0].read_bytes()) == data


def test_hanging_source_falls_back_within_the_loader_deadline(tmp_path, stalled_listing):
    """A source that never yields (a Hub whose file listing never comes) with --synthetic-on-fail: the loader's
    deadline ends the real attempt and the synthetic fallback gets its turn (the watchdog does not fire first):
    exit 0, one JSON object on stdout recording the fallback, equal to the artifact; the warning is one line on
    stderr."""
    proc, data = _smoke_on_stalled_hub(tmp_path, stalled_listing, "--synthetic-on-fail", "--timeout", "3")
    warned = [line for line in proc.stderr.splitlines() if "FALLING BACK" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: fwe: FALLING BACK TO SYNTHETIC DATA")
    assert "RuntimeWarning" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert data["ok"] is True and data["error"] is None and data["batches"] == 3
    assert data["fallback"]["from_source"] == "hub" and data["fallback"]["to_source"] == "synthetic"
    assert "LoaderTimeout" in data["fallback"]["reason"]
    assert orjson.loads(open(data["artifact"], "rb").read()) == data


def test_watchdog_still_prints_one_json_object(tmp_path, stalled_listing):
    """A read blocked in the main thread (--no-prefetch: the wait for a file listing that never comes) is beyond the
    loader's deadline: the last-resort watchdog ends the process with the timeout code (3), still printing one JSON
    object (ok false, the error named) on stdout and writing it as the artifact."""
    proc, data = _smoke_on_stalled_hub(tmp_path, stalled_listing, "--no-prefetch", "--timeout", "1")
    assert proc.returncode == 3, proc.stderr
    assert data["ok"] is False and data["first_batch_s"] is None
    assert data["error"] == {"type": "HardTimeout", "message": data["error"]["message"], "stage": "unknown (watchdog)"}
    assert " within " in data["error"]["message"]
    assert data["config"]["source"]["kind"] == "hub" and data["fwe_version"]
    artifacts = list((tmp_path / "a" / "smoke").glob("*.json"))
    assert [str(a) for a in artifacts] == [data["artifact"]]
    assert orjson.loads(artifacts[0].read_bytes()) == data
    assert "hard timeout" in proc.stderr


def test_old_automation_script_accepts_users_flags(tmp_path):
    """scripts/automation/fwe_smoke.py keeps the users' flags and delegates to `fwe smoke`."""
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts/automation/fwe_smoke.py"), "--seq-len", "256", "--batch", "2",
         "--timeout", "30", "--report-docs", "10", "--tokenizer", "byte", "--source", "synthetic", "--json",
         "--artifacts-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = orjson.loads(proc.stdout)
    assert result["shape"] == [2, 256] and result["config"]["report_docs"] == 10


def test_python_dash_m_and_console_script_agree():
    """`python -m fwe_cli` runs the app that the `fwe` console script declared in pyproject.toml points at."""
    import tomllib

    proc = run_fwe("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("fwe ")
    assert "from fwe_cli.cli.app import main" in (REPO_ROOT / "fwe_cli" / "__main__.py").read_text()
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fwe"] == "fwe_cli.cli.app:main"


def test_smoke_labels_and_boundaries_are_checked_and_saved(tmp_path):
    """`fwe smoke --labels --boundaries --bos` checks that the labels are the inputs shifted by one, counts the
    delimiters, and --save-batches holds the inputs with their labels, positions and cu_seqlens."""
    saved = tmp_path / "b.npz"
    result = invoke("smoke", "--source", "synthetic", "--tokenizer", "byte", "--seq-len", "128", "--batch", "4",
                    "--labels", "--boundaries", "--bos", "--batches", "20", "--save-batches", str(saved), "--json",
                    "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["labels"]["ok"] and checks["separators"]["ok"] and "id 256" in checks["separators"]["detail"]
    batches = np.load(saved)
    assert {k: batches[k].shape for k in ("batches", "labels", "positions", "cu_seqlens")} == {
        "batches": (20, 4, 128), "labels": (20, 4, 128), "positions": (20, 4, 128), "cu_seqlens": (20, 4, 129)}
    assert np.array_equal(batches["labels"][:, :, :-1], batches["batches"][:, :, 1:])
    assert data["config"]["labels"] and data["config"]["bos"]
