"""`fwe measure` and `fwe tune` read a mix (--mix FILE): each run's process gets the whole mixture in its config, and
each run's record carries what it read of every source (`sources`: weight, documents, tokens); a bad mix is one line,
exit 2, before any run or artifact."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import invoke

SHAPE = ("--tokenizer", "byte", "--seq-len", "256", "--batch", "2")
NAMES = ["the synthetic source (seed 1)", "the synthetic source (seed 2)"]


@pytest.fixture
def mix(tmp_path) -> str:
    path = tmp_path / "mix.json"
    path.write_bytes(orjson.dumps({"by": "tokens", "sources": [
        {"weight": 3, "source": "synthetic", "seed": 1}, {"weight": 1, "source": "synthetic", "seed": 2,
                                                          "stop": "cycle"}]}))
    return str(path)


def _read_from_the_mix(record: dict, steps: int) -> None:
    """A run's `sources`: both sources at their weights, and at least the tokens its batches held taken from them."""
    sources = record["sources"]
    assert [(s["source"], s["weight"]) for s in sources] == [(NAMES[0], 0.75), (NAMES[1], 0.25)]
    assert all(s["documents"] > 0 for s in sources)
    assert sum(s["tokens"] for s in sources) >= (steps + 1) * 256 * 2  # the first batch, then the steady steps


def test_measure_runs_each_process_on_the_mix_and_records_its_sources(tmp_path, mix):
    """`fwe measure --warm --mix`: exit 0; the summary's config and each run's spec (what its process built its
    loader from) hold the mixture with both sources and their weights; each run's record says what it read of each."""
    result = invoke("measure", "--warm", "--mix", mix, *SHAPE, "--steps", "5", "--step-ms", "0", "--json",
                    "--artifacts-dir", str(tmp_path / "a"))
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    tree = summary["config"]["source"]
    assert tree["kind"] == "mixture" and tree["weights"] == [3, 1]
    assert [child["seed"] for child in tree["children"]] == [1, 2]
    assert [run["kind"] for run in summary["runs"]] == ["prime", "warm"]
    for run in summary["runs"]:
        assert run["error"] is None
        spec = orjson.loads((Path(run["run_dir"]) / "spec.json").read_bytes())
        assert spec["config"]["source"] == tree
        _read_from_the_mix(run, run["steps"])


def test_tune_sweeps_a_mix_and_each_trial_records_its_sources(tmp_path, mix):
    """`fwe tune --mix`: exit 0; a mix of text sources is tokenized, so the doc batch grid is swept as given (not cut
    to Q only as for token ids); every trial ran on the mixture and records what it read of each source."""
    result = invoke("tune", "--mix", mix, *SHAPE, "--doc-batch-grid", "16,64", "--q-grid", "2", "--repeats", "1",
                    "--trial-s", "0", "--steps", "3", "--objective", "tokens_per_s", "--json", "--artifacts-dir",
                    str(tmp_path / "a"))
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["config"]["source"]["kind"] == "mixture" and summary["plan"]["doc_batches"] == [16, 64]
    assert [trial["setting"]["doc_batch"] for trial in summary["trials"]] == [16, 64]
    for trial in summary["trials"]:
        assert trial["error"] is None
        _read_from_the_mix(trial, trial["steps"])
    assert summary["recommendation"] is not None


@pytest.mark.parametrize("command", ["measure", "tune"])
@pytest.mark.parametrize("entries, beside, needle", [
    ([{"weight": -1, "source": "synthetic"}], (), "must be a number >= 0, got -1"),
    ([{"weight": 1, "source": "synthetic"}], ("--source", "synthetic"), "--mix names its sources itself"),
])
def test_a_bad_mix_stops_measure_and_tune_before_any_run(tmp_path, command, entries, beside, needle):
    """A negative weight, or a single-source flag beside --mix: exit 2, one line naming it, no artifact written."""
    path = tmp_path / "mix.json"
    path.write_bytes(orjson.dumps({"sources": entries}))
    result = invoke(command, "--mix", str(path), *beside, *SHAPE, "--artifacts-dir", str(tmp_path / "a"))
    assert result.exit_code == 2 and needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()
