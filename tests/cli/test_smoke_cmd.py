"""`fwe smoke`: help, exit codes, --json output equal to the artifact, and real tokenizers on local files."""

import subprocess
import sys

import numpy as np
import orjson
import pytest

from tests.helpers import REPO_ROOT, run_fwe

REQUIRED_KEYS = {"ok", "first_batch_s", "shape", "tokens_per_s", "tokenizer", "source", "config", "host",
                 "versions", "checks", "artifact"}


def test_root_help_lists_commands_and_version():
    proc = run_fwe("--help")
    assert proc.returncode == 0 and "smoke" in proc.stdout
    version = run_fwe("--version")
    assert version.returncode == 0 and version.stdout.startswith("fwe ")


def test_smoke_help_teaches_flags_variables_and_exit_codes():
    """--help names the users' variables and every exit code."""
    proc = run_fwe("smoke", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for needle in ("--timeout", "--save-batches", "NSA_FWE_DOC_BATCH", "NSA_FWE_Q", "NSA_FWE_PREFETCH",
                   "0 ok", "2 bad usage", "3 timeout", "4 loader/source/tokenizer error"):
        assert needle in text, needle


def test_smoke_synthetic_byte_json(tmp_path):
    """The acceptance command exits 0; its JSON has ok true and first_batch_s, and equals the artifact file."""
    proc = run_fwe("smoke", "--source", "synthetic", "--tokenizer", "byte", "--timeout", "60", "--json",
                   "--artifacts-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = orjson.loads(proc.stdout)
    assert result["ok"] is True and result["first_batch_s"] > 0
    assert REQUIRED_KEYS <= set(result)
    assert {"seq_len", "batch_size", "doc_batch", "queue_depth", "prefetch", "shard"} <= set(result["config"])
    assert result["host"]["cpus_logical"] >= 1 and result["versions"]["numpy"]
    assert result["requests"] is None  # no Hub involved: nothing counted, rather than a misleading 0
    artifact = orjson.loads(open(result["artifact"], "rb").read())
    assert artifact == result
    assert result["artifact"].startswith(str(tmp_path / "smoke"))


def test_smoke_local_gpt2_seq1024_batch8(tmp_path, synthetic_jsonl, gpt2_tokenizer_json):
    """Local JSONL + GPT-2 tokenizer.json, seq 1024, batch 8: ok, shape right, ids within GPT-2's vocab."""
    out = tmp_path / "b.npz"
    proc = run_fwe("smoke", "--local-path", str(synthetic_jsonl), "--tokenizer", gpt2_tokenizer_json,
                   "--seq-len", "1024", "--batch", "8", "--json", "--save-batches", str(out),
                   "--artifacts-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = orjson.loads(proc.stdout)
    assert result["shape"] == [8, 1024] and result["tokenizer"]["vocab_size"] == 50257
    assert all(c["ok"] for c in result["checks"]) and len(result["checks"]) == 4
    saved = np.load(out)["batches"]
    assert saved.shape == (3, 8, 1024) and saved.max() < 50257 and (saved == 50256).any()


def test_env_values_show_in_resolved_config(tmp_path):
    """NSA_FWE_* variables land in the artifact's resolved config, and are recorded as set."""
    proc = run_fwe("smoke", "--source", "synthetic", "--json", "--artifacts-dir", str(tmp_path),
                   env={"NSA_FWE_DOC_BATCH": "33", "NSA_FWE_Q": "3"})
    result = orjson.loads(proc.stdout)
    assert result["config"]["doc_batch"] == 33 and result["config"]["queue_depth"] == 3
    assert result["env"] == {"NSA_FWE_DOC_BATCH": "33", "NSA_FWE_Q": "3"}


def test_source_that_ends_early_fails_checks(tmp_path):
    """A source too small for one batch is a failed smoke (exit 1), not a pass with nothing checked."""
    path = tmp_path / "tiny.jsonl"
    path.write_text('{"text": "too short"}\n')
    proc = run_fwe("smoke", "--local-path", str(path), "--json", "--artifacts-dir", str(tmp_path))
    assert proc.returncode == 1
    assert orjson.loads(proc.stdout)["ok"] is False


def test_unknown_tokenizer_file_is_loader_error(tmp_path):
    proc = run_fwe("smoke", "--source", "synthetic", "--tokenizer", str(tmp_path / "nope.json"),
                   "--artifacts-dir", str(tmp_path))
    assert proc.returncode == 4
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr


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
    """`python -m fwe_cli` is wired to the same app as the `fwe` console script entry point."""
    from importlib import metadata

    try:
        eps = [ep for ep in metadata.entry_points(group="console_scripts") if ep.name == "fwe"]
    except Exception:  # noqa: BLE001
        eps = []
    if not eps:
        pytest.skip("fwe is not pip-installed in this environment")
    assert eps[0].value == "fwe_cli.cli.app:main"
