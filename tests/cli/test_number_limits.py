"""Numbers out of range (inf, 1e308, nan, integers past 64 bits) from flags and NSA_FWE_* variables.

The decision these tests pin down: a number out of range is a usage error found while the settings are parsed, before
anything runs, so it writes no artifact (there is no run to record) and prints exactly one line on stderr naming the
flag or variable and what was typed; the exit code is 2.
"""

import pytest

from tests.helpers import invoke

HUGE = str(2**70)  # past the 64 bits orjson can write into an artifact


def _one_line_usage_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("flag, typed", [
    ("--timeout", "inf"),
    ("--timeout", "1e308"),
    ("--timeout", "nan"),
    ("--warmup-timeout", "inf"),
    ("--seq-len", HUGE),
    ("--batch", HUGE),
    ("--doc-batch", HUGE),
    ("--q", HUGE),
    ("--report-docs", HUGE),
    ("--tokenizer-threads", HUGE),
    ("--seed", HUGE),
    ("--rank", HUGE),
    ("--shard-mod", HUGE),
    ("--shard-rem", HUGE),
    ("--batches", HUGE),
])
def test_smoke_flag_out_of_range_is_one_usage_line_and_no_artifact(flag, typed, tmp_path):
    """Symptom 7 (flags): `fwe smoke FLAG inf|1e308|2**70` exits 2 with one line naming the flag and the value, and
    writes no artifact — never an OverflowError in a wait or a TypeError from orjson while writing the artifact."""
    result = invoke("smoke", "--source", "synthetic", flag, typed, "--artifacts-dir", str(tmp_path))
    shown = "1e+308" if typed == "1e308" else typed
    _one_line_usage_error(result, flag, shown)
    assert not (tmp_path / "smoke").exists()


@pytest.mark.parametrize("var, raw", [
    ("NSA_FWE_DOC_BATCH", HUGE),
    ("NSA_FWE_Q", HUGE),
    ("NSA_FWE_REPORT_DOCS", HUGE),
    ("NSA_FWE_WARMUP_BATCHES", HUGE),
    ("NSA_FWE_TOKENIZER_THREADS", HUGE),
    ("NSA_FWE_WARMUP_TIMEOUT", "inf"),
    ("NSA_FWE_WARMUP_TIMEOUT", "1e308"),
    ("NSA_FWE_WARMUP_TIMEOUT", "nan"),
])
def test_variable_out_of_range_is_one_usage_line_and_no_artifact(var, raw, tmp_path):
    """Symptom 7 (variables): an NSA_FWE_* variable out of range exits 2 with one line naming the variable and the text
    it holds, and writes no artifact."""
    result = invoke("smoke", "--source", "synthetic", "--artifacts-dir", str(tmp_path), env={var: raw})
    _one_line_usage_error(result, var, repr(raw))
    assert not (tmp_path / "smoke").exists()


@pytest.mark.parametrize("command, args, needle", [
    ("measure", ("--run-timeout", "inf"), "--run-timeout"),
    ("measure", ("--step-ms", "1e308"), "--step-ms"),
    ("measure", ("--steps", HUGE), "--steps"),
    ("measure", ("--repeats", HUGE), "--repeats"),
    ("measure", ("--timeout", "inf"), "--timeout"),
    ("measure", ("--targets", "fetch_p95_ms=nan"), "--targets fetch_p95_ms"),
    ("measure", ("--targets", "cold_first_batch_s=inf"), "--targets cold_first_batch_s"),
    ("tune", ("--budget-s", "inf"), "--budget-s"),
    ("tune", ("--q-grid", f"1,{HUGE}"), "--q-grid"),
    ("tune", ("--doc-batch-grid", f"16,{HUGE}"), "--doc-batch-grid"),
    ("tune", ("--threads-grid", HUGE), "--threads-grid"),
    ("tune", ("--doc-batch", HUGE), "--doc-batch"),
    ("tune", ("--q", HUGE), "--q"),
])
def test_measure_and_tune_numbers_out_of_range_fail_before_any_run(command, args, needle, tmp_path):
    """Symptom 7 (measure/tune knobs): a run knob, grid entry or target out of range exits 2 in one line naming it,
    before any run starts or any artifact folder is made."""
    result = invoke(command, "--source", "synthetic", *args, "--artifacts-dir", str(tmp_path))
    _one_line_usage_error(result, needle)
    assert not (tmp_path / command).exists()


def test_largest_allowed_values_still_run(tmp_path):
    """The limits reject only the absurd: a timeout of a whole day and a 64-bit seed are accepted and the artifact
    is written."""
    result = invoke("smoke", "--source", "synthetic", "--timeout", "86400", "--seed", str(2**63 - 1),
                    "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert len(list((tmp_path / "smoke").glob("*.json"))) == 1
