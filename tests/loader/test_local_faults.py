"""Local inputs that are not what they claim: a bootstrap part changed after it was written, a glob through a symlink
loop, a path that is not a regular file, a compressed file that ends early. Each is an error naming the file before
(or where) reading goes wrong, never a short, repeated or hanging stream."""

import gzip
import os
import re
import stat

import orjson
import pytest

from fwe_cli.errors import InputError, SourceError
from fwe_cli.loader import ConfigError, LoaderConfig, resolve_config
from fwe_cli.loader.files.formats import resolve_files
from fwe_cli.loader.stream import DocumentStream
from tests.bootstrap.support import core_run, manifest_of
from tests.helpers import invoke, write_jsonl


def texts(path, **kw):
    return [d.text for d in DocumentStream(resolve_config(env={}, local_path=str(path), **kw))]


@pytest.fixture
def bootstrap(tmp_path):
    """A complete directory bootstrap of synthetic documents with several parts."""
    out = tmp_path / "boot"
    core_run(out, source="synthetic", seed=3, target_bytes=150_000, file_mb=0.05)
    assert len(manifest_of(out)["files"]) >= 2
    return out


def test_truncated_bootstrap_part_is_refused_naming_it(bootstrap):
    """A part shorter than its manifest says is an InputError before any document is read, naming the part, both
    sizes and how to check and repair the bootstrap; never a silently short stream."""
    entry = manifest_of(bootstrap)["files"][1]
    part = bootstrap / entry["name"]
    part.write_bytes(part.read_bytes()[:-7])
    with pytest.raises(InputError) as info:
        texts(bootstrap)
    message = str(info.value)
    assert f"{part}: {entry['bytes'] - 7} bytes, manifest says {entry['bytes']}" in message
    assert f"fwe bootstrap --verify --out {bootstrap}" in message and "--force" in message


def test_same_size_edit_is_read_unless_verify_parts_then_refused(bootstrap):
    """A part edited in place at the same size passes the size check (sizes are all that is compared by default);
    with verify_parts its sha256 is compared too and the run fails naming the part."""
    entry = manifest_of(bootstrap)["files"][0]
    part = bootstrap / entry["name"]
    intact = texts(bootstrap)
    data = bytearray(part.read_bytes())
    data[20] = ord("Z") if data[20] != ord("Z") else ord("Y")  # inside the first document's text: still valid JSON
    part.write_bytes(bytes(data))
    assert len(texts(bootstrap)) == len(intact)
    with pytest.raises(InputError, match=re.escape(f"{part}: sha256 differs from the manifest")):
        texts(bootstrap, verify_parts=True)


def test_verify_parts_passes_an_intact_bootstrap_and_is_a_validated_field(bootstrap):
    """verify_parts reads an intact bootstrap like the default does; it is a boolean config field that round-trips
    through to_json/from_json."""
    assert texts(bootstrap, verify_parts=True) == texts(bootstrap)
    config = resolve_config(env={}, local_path=str(bootstrap), verify_parts=True)
    assert LoaderConfig.from_json(config.to_json()) == config
    with pytest.raises(ConfigError, match="verify_parts"):
        resolve_config(env={}, local_path=str(bootstrap), verify_parts="yes")


def test_changed_part_is_a_usage_exit_naming_it_in_the_cli(bootstrap, tmp_path):
    """`fwe smoke` on a bootstrap with a truncated part exits 2 (a bad input) with one line naming the part."""
    part = bootstrap / manifest_of(bootstrap)["files"][0]["name"]
    part.write_bytes(part.read_bytes()[:100])
    result = invoke("smoke", "--local-path", str(bootstrap), "--artifacts-dir", str(tmp_path / "a"))
    assert result.exit_code == 2, result.stderr
    assert str(part) in result.stderr and "Traceback" not in result.stderr


def test_verify_parts_flag_refuses_a_same_size_edit_in_the_cli(bootstrap, tmp_path):
    """`fwe smoke --verify-parts` on a bootstrap whose part was edited at the same size exits 2 naming the part;
    without the flag the size check alone lets it through (the run succeeds)."""
    part = bootstrap / manifest_of(bootstrap)["files"][0]["name"]
    data = bytearray(part.read_bytes())
    data[20] = ord("Z") if data[20] != ord("Z") else ord("Y")
    part.write_bytes(bytes(data))
    common = ("smoke", "--local-path", str(bootstrap), "--tokenizer", "byte", "--batches", "1", "--seq-len", "64")
    assert invoke(*common, "--artifacts-dir", str(tmp_path / "a")).exit_code == 0
    result = invoke(*common, "--verify-parts", "--artifacts-dir", str(tmp_path / "b"))
    assert result.exit_code == 2, result.stderr
    assert f"{part}: sha256 differs from the manifest" in " ".join(result.stderr.split())


def test_single_file_bootstrap_is_checked_against_its_sidecar_manifest(tmp_path):
    """A single-file bootstrap X.jsonl read by name is compared with X.jsonl.manifest.json like a directory's parts."""
    out = tmp_path / "one.jsonl"
    core_run(out, source="synthetic", seed=3, target_bytes=20_000)
    assert texts(out)
    out.write_bytes(out.read_bytes()[:-1])
    with pytest.raises(InputError, match=re.escape(f"{out}: ")):
        texts(out)


def test_recursive_glob_through_a_symlink_loop_reads_each_document_once(tmp_path):
    """`DIR/**/*.jsonl` and DIR itself, with a directory symlink pointing back up and a second link to a file, name
    each file once (first path in sorted order kept) and end: every document is read exactly once."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    write_jsonl(data / "a.jsonl", [{"text": "alpha"}])
    write_jsonl(data / "sub" / "b.jsonl", [{"text": "beta"}])
    (data / "sub" / "loop").symlink_to(data, target_is_directory=True)
    (data / "z.jsonl").symlink_to(data / "a.jsonl")
    for path in (data / "**" / "*.jsonl", data):
        assert resolve_files(str(path)) == [str(data / "a.jsonl"), str(data / "sub" / "b.jsonl")]
        assert sorted(texts(path)) == ["alpha", "beta"]


def test_recursive_glob_follows_a_linked_directory_once_and_skips_hidden(tmp_path):
    """`**` still matches files at every depth (zero directories included) and through a symlink to a directory
    elsewhere, and, as Python's glob, not inside hidden directories."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_jsonl(elsewhere / "c.jsonl", [{"text": "gamma"}])
    data = tmp_path / "data"
    (data / "x" / "y").mkdir(parents=True)
    (data / ".hidden").mkdir()
    write_jsonl(data / "top.jsonl", [{"text": "top"}])
    write_jsonl(data / "x" / "y" / "deep.jsonl", [{"text": "deep"}])
    write_jsonl(data / ".hidden" / "h.jsonl", [{"text": "hidden"}])
    (data / "linked").symlink_to(elsewhere, target_is_directory=True)
    got = resolve_files(str(data / "**" / "*.jsonl"))
    assert got == [str(data / "linked" / "c.jsonl"), str(data / "top.jsonl"), str(data / "x" / "y" / "deep.jsonl")]


def test_fifo_is_refused_before_it_is_opened(tmp_path):
    """A FIFO (given by name, or found in a directory) is an InputError saying what it is, raised from a stat:
    nothing opens it, so nothing blocks (this test never opens it either)."""
    fifo = tmp_path / "stream.jsonl"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    for path in (fifo, tmp_path):
        with pytest.raises(InputError, match=re.escape(f"{fifo} is a FIFO (named pipe), not a regular file")):
            texts(path)


def test_fifo_is_a_usage_exit_in_the_cli(tmp_path):
    """`fwe smoke` and `fwe measure` on a FIFO exit 2 at once with one line naming it (they used to block in open)."""
    fifo = tmp_path / "stream.jsonl"
    os.mkfifo(fifo)
    for command in ("smoke", "measure"):
        result = invoke(command, "--local-path", str(fifo), "--artifacts-dir", str(tmp_path / "a"))
        assert result.exit_code == 2, (command, result.stderr)
        assert f"{fifo} is a FIFO" in result.stderr and "Traceback" not in result.stderr


def test_directory_where_a_bootstrap_part_should_be_is_refused(bootstrap):
    """A listed part that is a directory is an InputError saying so, not a read error or an empty part."""
    part = bootstrap / manifest_of(bootstrap)["files"][0]["name"]
    part.unlink()
    part.mkdir()
    with pytest.raises(InputError, match=re.escape(f"{part} is a directory, not a regular file")):
        resolve_files(str(bootstrap))


def gzip_part(path, count):
    with gzip.open(path, "wb") as handle:
        for i in range(count):
            handle.write(orjson.dumps({"text": f"document {i} " + "x" * 200}) + b"\n")
    return path


def test_truncated_gzip_names_the_file_and_where_reading_stopped(tmp_path):
    """A .jsonl.gz cut short is an InputError naming the file and the last line read (not EOFError, which the CLI
    reported as a bare "Aborted."); documents before the cut are read first."""
    path = gzip_part(tmp_path / "docs.jsonl.gz", 2000)
    path.write_bytes(path.read_bytes()[:-100])
    stream = iter(DocumentStream(resolve_config(env={}, local_path=str(path))))
    assert next(stream).text.startswith("document 0 ")
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))} is truncated or corrupt: reading stopped after "
                                         r"line \d+ \(byte \d+ of the decompressed text, \d+ of \d+ compressed bytes"):
        list(stream)


def test_corrupt_gzip_in_a_bootstrap_is_a_usage_exit_naming_it(tmp_path):
    """Garbage inside a .jsonl.gz (here: not gzip at all) fails naming the file, exit 2 through the CLI."""
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(b"this is not gzip data\n")
    with pytest.raises(InputError, match=re.escape(f"{path} is truncated or corrupt")):
        texts(path)
    result = invoke("smoke", "--local-path", str(path), "--artifacts-dir", str(tmp_path / "a"))
    assert result.exit_code == 2 and str(path) in result.stderr and "Aborted" not in result.stderr


def test_unreadable_file_is_one_line_naming_it(tmp_path, monkeypatch):
    """An OSError while opening a file is a SourceError in os_error_line's words, naming the file."""
    path = write_jsonl(tmp_path / "docs.jsonl", [{"text": "alpha"}])

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("fwe_cli.loader.files.formats._open_binary", denied)
    with pytest.raises(SourceError, match=re.escape(f"cannot open {path}: permission denied (errno EACCES)")):
        texts(path)


def test_a_utf8_bom_at_the_start_of_a_file_is_not_a_bad_record(tmp_path):
    """A JSONL or TXT file saved with a UTF-8 byte order mark (as some editors do) reads its first record like the
    others: the mark is dropped, nothing is counted as bad."""
    (tmp_path / "bom.jsonl").write_bytes(b'\xef\xbb\xbf{"text": "first", "id": "a"}\n{"text": "second", "id": "b"}\n')
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfline one\nline two\n")
    stream = DocumentStream(resolve_config(env={}, local_path=str(tmp_path / "bom.jsonl")))
    assert [d.text for d in stream] == ["first", "second"] and stream.describe()["bad_records"]["count"] == 0
    assert texts(tmp_path / "bom.txt") == ["line one", "line two"]
