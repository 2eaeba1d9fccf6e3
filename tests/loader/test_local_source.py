"""Local files: JSONL, TXT, parquet, directories and globs read directly; malformed records counted or fatal."""

import gzip
import re

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fwe_cli.loader import SourceError, resolve_config
from fwe_cli.loader.files.formats import read_manifest, resolve_files
from fwe_cli.loader.stream import DocumentStream
from tests.helpers import invoke, write_jsonl


def texts(config):
    return [d.text for d in DocumentStream(config)]


def cfg(path, **kw):
    return resolve_config(env={}, local_path=str(path), **kw)


def test_jsonl_txt_parquet_and_gzip_read_in_order(tmp_path):
    """Each format yields its documents in file order; a directory reads files sorted by name."""
    write_jsonl(tmp_path / "a.jsonl", [{"text": "alpha"}, {"text": "beta", "id": "b"}])
    (tmp_path / "b.txt").write_text("gamma\n\ndelta\n")
    pq.write_table(pa.table({"text": ["epsilon", "zeta"], "id": ["e", "z"]}), tmp_path / "c.parquet", row_group_size=1)
    with gzip.open(tmp_path / "d.jsonl.gz", "wb") as handle:
        handle.write(b'{"text": "eta"}\n')
    (tmp_path / "ignored.csv").write_text("text\nnope\n")
    assert texts(cfg(tmp_path)) == ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
    assert texts(cfg(tmp_path / "*.txt")) == ["gamma", "delta"]
    ids = [d.id for d in DocumentStream(cfg(tmp_path / "c.parquet"))]
    assert ids == ["e", "z"]


def test_missing_and_empty_paths_are_clear_errors(tmp_path):
    """A missing path, a directory without readable files and an unsupported file type each say so."""
    with pytest.raises(SourceError, match="no such file"):
        resolve_files(str(tmp_path / "nope.jsonl"))
    with pytest.raises(SourceError, match="no .* files found"):
        resolve_files(str(tmp_path))
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(SourceError, match="unsupported file type"):
        resolve_files(str(tmp_path / "x.csv"))


def test_parquet_without_text_column_is_clear_error(tmp_path):
    """A parquet file without a `text` column is a SourceError saying so, not an empty stream."""
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "p.parquet")
    with pytest.raises(SourceError, match="no 'text' column"):
        texts(cfg(tmp_path / "p.parquet"))


MALFORMED = (b'{"text": "one"}\n'
             b'{bad json\n'
             b'{"title": "no text"}\n'
             b'{"text": 42}\n'
             b'[1, 2]\n'
             b'{"text": "two"}\n')


def test_malformed_lines_are_counted_and_reported_when_skipping(tmp_path):
    """skip mode: every bad line is counted with file:line and reason; good lines all come through."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(MALFORMED)
    stream = DocumentStream(cfg(path))
    assert [d.text for d in stream] == ["one", "two"]
    assert stream.bad.count == 4
    assert stream.bad.examples[0].startswith(f"{path}:2: bad JSON (")  # orjson's reason follows
    assert stream.bad.examples[1:] == [f"{path}:3: missing field 'text'", f"{path}:4: 'text' is int, not a string",
                                       f"{path}:5: not a JSON object"]


def test_malformed_line_is_fatal_in_error_mode_naming_file_and_line(tmp_path):
    """error mode: the first malformed line raises SourceError naming file:line and the reason."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(MALFORMED)
    with pytest.raises(SourceError, match=f"{path}:2: bad JSON"):
        texts(cfg(path, bad_records="error"))


def test_cli_reports_skips_and_errors_without_traceback(tmp_path, synthetic_jsonl):
    """`fwe smoke` counts skipped records in its JSON; with --bad-records error it exits 4 naming file:line."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(MALFORMED + synthetic_jsonl.read_bytes())
    ok = invoke("smoke", "--local-path", str(path), "--json", "--artifacts-dir", str(tmp_path))
    assert ok.exit_code == 0, ok.stderr
    assert orjson.loads(ok.stdout)["source"]["bad_records"]["count"] == 4
    assert "4 skipped" in ok.stderr
    bad = invoke("smoke", "--local-path", str(path), "--bad-records", "error", "--artifacts-dir", str(tmp_path))
    assert bad.exit_code == 4
    assert f"{path}:2" in bad.stderr and "Traceback" not in bad.stderr


def test_read_manifest_takes_a_directory_or_a_file_and_names_a_bad_one(tmp_path):
    """The one bootstrap-manifest reader: a directory or a manifest file gives the parsed JSON; a missing, unreadable
    or non-JSON manifest is a SourceError naming the file, with the underlying error as its cause."""
    (tmp_path / "manifest.json").write_bytes(orjson.dumps({"complete": True, "files": []}))
    sidecar = tmp_path / "x.jsonl.manifest.json"
    sidecar.write_bytes(orjson.dumps({"complete": False}))
    assert read_manifest(str(tmp_path)) == {"complete": True, "files": []}
    assert read_manifest(sidecar) == {"complete": False}
    missing = tmp_path / "y.jsonl.manifest.json"
    with pytest.raises(SourceError, match=re.escape(f"cannot read bootstrap manifest {missing}: ")) as info:
        read_manifest(str(missing))
    assert isinstance(info.value.__cause__, FileNotFoundError)
    (tmp_path / "empty").mkdir()
    empty_dir_manifest = tmp_path / "empty" / "manifest.json"
    with pytest.raises(SourceError, match=re.escape(f"cannot read bootstrap manifest {empty_dir_manifest}: ")):
        read_manifest(tmp_path / "empty")
    sidecar.write_bytes(b"{not json")
    with pytest.raises(SourceError, match=re.escape(f"cannot read bootstrap manifest {sidecar}: ")) as info:
        read_manifest(str(sidecar))
    assert isinstance(info.value.__cause__, orjson.JSONDecodeError)
    (tmp_path / "dir.manifest.json").mkdir()
    with pytest.raises(SourceError, match=re.escape(f"cannot read bootstrap manifest {tmp_path}/dir.manifest.json: ")):
        read_manifest(tmp_path / "dir.manifest.json")


def test_bootstrap_directory_whose_manifest_is_not_an_object_is_refused(tmp_path):
    """A manifest.json holding JSON that is not an object is a SourceError naming it, not a crash."""
    (tmp_path / "manifest.json").write_bytes(b"[1, 2]")
    with pytest.raises(SourceError, match=re.escape(f"{tmp_path}/manifest.json is not a bootstrap manifest")):
        resolve_files(str(tmp_path))
