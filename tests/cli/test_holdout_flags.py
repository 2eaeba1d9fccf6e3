"""The held-out split's flags on the commands that read documents (smoke and the loader's commands, bootstrap,
tokenize): each bad value is exit 2 with one error line naming the flag (or variable) and what was typed, one --json
error object, and nothing written; a good run's --json result counts what the split kept and removed."""

from __future__ import annotations

import pytest

from fwe_cli.cli.exit_codes import EXIT_USAGE
from tests.helpers import invoke, one_object, write_jsonl

SMOKE = ("smoke", "--source", "synthetic", "--tokenizer", "byte", "--batches", "2")
BOOTSTRAP = ("bootstrap", "--source", "synthetic", "--gb", "0.001")

BAD = [
    (SMOKE + ("--holdout", "1.5"), {}, "--holdout must be a fraction from 0 up to (not including) 1", "got '1.5'"),
    (SMOKE + ("--holdout", "-0.1"), {}, "--holdout must be a fraction", "got '-0.1'"),
    (SMOKE + ("--holdout", "abc"), {}, "--holdout must be a fraction", "got 'abc'"),
    (SMOKE + ("--holdout", "0.1", "--holdout-split", "eval"), {}, "--holdout-split must be train or holdout",
     "got 'eval'"),
    (SMOKE + ("--holdout-split", "holdout"), {}, "--holdout-split holdout reads one side", "--holdout"),
    (SMOKE + ("--holdout", "0.1", "--split", "holdout"), {}, "--split names a Hub dataset's split",
     "--holdout-split holdout"),
    (SMOKE, {"NSA_FWE_HOLDOUT": "ten percent"}, "NSA_FWE_HOLDOUT must be a fraction", "got 'ten percent'"),
    (BOOTSTRAP + ("--holdout", "1"), {}, "--holdout must be a fraction", "got '1'"),
    (BOOTSTRAP + ("--holdout", "0.1", "--holdout-split", "test"), {}, "--holdout-split must be", "got 'test'"),
    (("bootstrap", "--gb", "0.001", "--holdout", "0.1"), {}, "native Hub reader copies whole parquet files",
     "--hub-reader datasets"),
    (("tokenize", "SRC", "--tokenizer", "byte", "--holdout", "1"), {}, "--holdout must be a fraction", "got '1'"),
    (("tokenize", "SRC", "--tokenizer", "byte", "--holdout", "0.1", "--holdout-split", "val"), {},
     "--holdout-split must be", "got 'val'"),
]


@pytest.mark.parametrize("args,env,names,typed", BAD, ids=[" ".join(a[:1] + a[-2:]) + str(e) for a, e, _n, _t in BAD])
def test_a_bad_split_value_is_exit_2_one_line_and_nothing_written(tmp_path, args, env, names, typed):
    """Exit 2; stderr's one `error:` line names the setting and what was typed; --json prints one error object;
    neither the output nor the artifacts folder is created."""
    out = tmp_path / "out"
    args = tuple(str(tmp_path / "src.jsonl") if a == "SRC" else a for a in args)
    if args[0] != "smoke":
        args += ("--out", str(out))
    result = invoke(*args, "--json", "--artifacts-dir", str(tmp_path / "artifacts"), env=env)
    assert result.exit_code == EXIT_USAGE, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert names in lines[0] and typed in lines[0]
    one_object(result.stdout, EXIT_USAGE)
    assert not out.exists() and not (tmp_path / "artifacts").exists()


def test_smoke_json_counts_what_the_split_kept_and_removed(tmp_path):
    """`fwe smoke --holdout 0.5 --holdout-split holdout --json`: the loader's source record is the split's, with the
    documents it kept and removed, over its child."""
    write_jsonl(tmp_path / "docs.jsonl", [{"text": f"document number {i} " * 20, "id": f"d{i}"} for i in range(400)])
    result = invoke("smoke", "--local-path", str(tmp_path / "docs.jsonl"), "--tokenizer", "byte", "--batches", "2",
                    "--seq-len", "256", "--holdout", "0.5", "--holdout-split", "holdout", "--json",
                    "--artifacts-dir", str(tmp_path / "artifacts"))
    assert result.exit_code == 0, result.stderr
    source = one_object(result.stdout, 0)["loader"]["source"]
    assert source["kind"] == "holdout" and source["holdout"] == 0.5 and source["holdout_split"] == "holdout"
    assert source["documents_kept"] > 0 and source["documents_removed"] > 0
    assert source["children"][0]["kind"] == "local"
