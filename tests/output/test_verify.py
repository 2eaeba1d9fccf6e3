"""fwe_cli/output/verify.py: an output's files checked against its manifest (`--verify` re-hashes them all), and
the one sha256 of a file (or of its first bytes) every writer and checker uses."""

from __future__ import annotations

import hashlib
import re

import pytest

from fwe_cli.errors import OutputError
from fwe_cli.output.verify import hash_into, sha256_file, verify_output
from tests.output.sample_layout import SampleLayout, write_sample


def _counts(manifest: dict) -> dict:
    return {"files_checked": len(manifest["files"])}


def test_an_intact_complete_output_verifies_ok(tmp_path):
    """Every listed file present with its size and sha256, and the manifest complete: ok, with the kind's counts
    between the common fields and an empty problem list."""
    layout = write_sample(tmp_path / "out", [0, 10, 3_000_000])
    assert verify_output(layout, _counts) == {"ok": True, "complete": True, "output": layout.out,
                                              "manifest_path": layout.manifest_path, "files_checked": 3,
                                              "problems": []}


def test_verify_names_every_damaged_file_and_what_is_wrong(tmp_path):
    """A flipped byte (same size: only the re-hash sees it), a truncated file and a missing one are each named with
    their problem, in listing order; an incomplete output is never ok."""
    out = tmp_path / "out"
    layout = write_sample(out, [10, 20, 30, 40], complete=False)
    flipped = bytearray((out / "data-1.bin").read_bytes())
    flipped[-1] ^= 1
    (out / "data-1.bin").write_bytes(bytes(flipped))
    (out / "data-2.bin").write_bytes(b"short")
    (out / "data-3.bin").unlink()
    result = verify_output(layout, _counts)
    assert result["ok"] is False and result["complete"] is False
    assert result["problems"] == [{"name": "data-1.bin", "problem": "sha256 differs from the manifest"},
                                  {"name": "data-2.bin", "problem": "5 bytes, manifest says 30"},
                                  {"name": "data-3.bin", "problem": "missing"}]
    assert verify_output(write_sample(tmp_path / "incomplete", [10], complete=False), _counts)["ok"] is False


def test_verify_without_a_manifest_is_an_error_naming_where_it_looked(tmp_path):
    """Nothing to verify against: OutputError naming the kind and the manifest path, not a report of no problems."""
    layout = SampleLayout.for_out(tmp_path / "nothing")
    with pytest.raises(OutputError, match=re.escape(f"no sample output manifest at {layout.manifest_path}")):
        verify_output(layout, _counts)


def test_sha256_of_a_file_or_its_first_bytes(tmp_path):
    """sha256_file equals hashlib's over the whole file or its first `limit` bytes, across read blocks; hash_into
    says how many bytes it fed, fewer than asked for when the file is shorter."""
    data = bytes(range(256)) * 9_000  # about 2.2 MiB: three read blocks
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert sha256_file(str(path)) == hashlib.sha256(data).hexdigest()
    assert sha256_file(str(path), 1_500_000) == hashlib.sha256(data[:1_500_000]).hexdigest()
    assert sha256_file(str(path), 0) == hashlib.sha256(b"").hexdigest()
    digest = hashlib.sha256()
    assert hash_into(digest, str(path), len(data) + 10) == len(data)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
