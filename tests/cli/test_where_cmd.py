"""`--where` on the command line: a malformed expression, an unknown column, a column the source lacks and a filter
on a source without fields are each exit 2 with one line naming it; the flag-level ones (found before anything
runs) write nothing at all, and those found when the source opens write no data (for smoke: the failed run's
artifact, as for any source that cannot be read). `fwe bootstrap --where` copies the passing records."""

from __future__ import annotations

import orjson
import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from tests.helpers import invoke, write_jsonl


def _one_line(result, *needles: str, alone: bool = True) -> str:
    """The one error line of a usage error (exit 2) holding every needle; `alone`: stderr holds nothing else (a
    failed smoke prints its summary table first)."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr and (len(lines) == 1 or not alone), result.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


@pytest.fixture
def records(tmp_path):
    """60 FineWeb-Edu-shaped records as JSONL, and the same as a TXT file of their texts."""
    rows = [synthetic_record(4, i) for i in range(60)]
    write_jsonl(tmp_path / "docs.jsonl", rows)
    (tmp_path / "docs.txt").write_text("".join(r["text"].replace("\n", " ") + "\n" for r in rows))
    return rows


@pytest.mark.parametrize("where", ["int_score >= ", "int_score = 3", "int_score >= 3 or score > 1", "import os",
                                   "int_scor >= 3", "dump >= 3"])
@pytest.mark.parametrize("command", ["smoke", "bootstrap"])
def test_a_bad_expression_on_the_synthetic_source_is_one_line_and_writes_nothing(tmp_path, command, where):
    """Malformed, naming a column the synthetic source's ten fields lack, or comparing a string field with a number:
    exit 2, one line naming --where, and no artifact, output or folder."""
    extra = ("--gb", "0.001", "--out", str(tmp_path / "out")) if command == "bootstrap" else ()
    result = invoke(command, "--source", "synthetic", "--where", where, "--artifacts-dir", str(tmp_path / "art"),
                    *extra)
    _one_line(result, "--where")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_column_a_jsonl_source_lacks_is_named_before_bootstrap_writes_anything(tmp_path, records):
    """`fwe bootstrap --where` naming a field the JSONL's first record lacks: exit 2, one line naming the field and
    the line; no output folder (the failed run's artifact only)."""
    result = invoke("bootstrap", "--local-path", str(tmp_path / "docs.jsonl"), "--where", "edu >= 3", "--gb", "0.001",
                    "--out", str(tmp_path / "out"), "--artifacts-dir", str(tmp_path / "art"))
    _one_line(result, "--where names 'edu'", "docs.jsonl:1")
    assert not (tmp_path / "out").exists()


def test_a_filter_on_txt_or_a_missing_parquet_column_fails_with_one_line(tmp_path, records):
    """A TXT file has no fields: named as the flags are read (nothing written); in a folder, when it opens. A
    parquet file without the column is named as it opens: exit 2, its error line, no batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    txt = invoke("smoke", "--local-path", str(tmp_path / "docs.txt"), "--where", "int_score >= 3", "--artifacts-dir",
                 str(tmp_path / "art"))
    _one_line(txt, "--where", "docs.txt is TXT")
    assert not (tmp_path / "art").exists()
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_text("one\n")
    folder = invoke("smoke", "--local-path", str(tmp_path / "texts"), "--where", "int_score >= 3",
                    "--artifacts-dir", str(tmp_path / "art"))
    _one_line(folder, "--where", "a.txt is TXT", alone=False)
    pq.write_table(pa.table({"text": ["a b c"]}), tmp_path / "few.parquet")
    few = invoke("smoke", "--local-path", str(tmp_path / "few.parquet"), "--where", "int_score >= 3",
                 "--artifacts-dir", str(tmp_path / "art"))
    _one_line(few, "--where names 'int_score'", "few.parquet lacks", alone=False)


def test_the_native_hub_bootstrap_refuses_a_filter_with_one_line(tmp_path):
    """The native Hub bootstrap copies whole files: --where there is exit 2 naming the way out, nothing written."""
    result = invoke("bootstrap", "--where", "int_score >= 3", "--gb", "0.001", "--out", str(tmp_path / "out"),
                    "--artifacts-dir", str(tmp_path / "art"))
    _one_line(result, "--where", "--hub-reader datasets")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_bootstrap_copies_the_passing_records_and_smoke_shows_what_was_removed(tmp_path, records):
    """`fwe bootstrap --where ... --fields all` writes exactly the passing JSONL lines, in order; `fwe smoke
    --json` over the result with another filter reports it and the documents it removed."""
    out = tmp_path / "out"
    result = invoke("bootstrap", "--local-path", str(tmp_path / "docs.jsonl"), "--where", "int_score >= 3",
                    "--fields", "all", "--gb", "0.01", "--out", str(out), "--artifacts-dir", str(tmp_path / "art"))
    assert result.exit_code == 0, result.stderr
    lines = [orjson.loads(line) for part in sorted(out.glob("*.jsonl")) for line in part.read_bytes().splitlines()]
    assert lines == [r for r in records if r["int_score"] >= 3]
    smoke = invoke("smoke", "--local-path", str(out), "--where", "int_score >= 4", "--seq-len", "64", "--batches",
                   "2", "--json", "--artifacts-dir", str(tmp_path / "art"))
    assert smoke.exit_code == 0, smoke.stderr
    source = orjson.loads(smoke.stdout)["source"]
    assert source["where"] == "int_score >= 4" and source["filtered"]["documents"] >= 1


def test_bootstrap_names_its_flags_in_a_setting_error(tmp_path):
    """A bad source setting given to `fwe bootstrap` is named by the flag typed (--hub-reader), as every other
    command names it, not by the config field (hub_reader)."""
    result = invoke("bootstrap", "--hub-reader", "fast", "--gb", "0.001", "--out", str(tmp_path / "out"),
                    "--artifacts-dir", str(tmp_path / "art"))
    _one_line(result, "--hub-reader must be one of native, datasets; got 'fast'")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_bootstrap_continued_from_the_hub_refuses_a_filter(tmp_path, records):
    """--tail hub serves the Hub's own stream: a --where there is exit 2 with one line, before anything runs."""
    result = invoke("smoke", "--local-path", str(tmp_path / "docs.jsonl"), "--tail", "hub", "--where",
                    "int_score >= 3", "--artifacts-dir", str(tmp_path / "art"))
    _one_line(result, "--where", "--tail hub")
    assert not (tmp_path / "art").exists()
