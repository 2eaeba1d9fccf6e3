"""Reading a bootstrap manifest back: what a missing, damaged, foreign or unreadable one becomes, in both layouts."""

from __future__ import annotations

import os
import re

import pytest

from fwe_cli.errors import OutputError
from fwe_cli.loader.files.bootstrap_format import FORMAT, Layout
from fwe_cli.output.manifest_file import load_manifest, write_manifest


@pytest.fixture(params=["directory", "single-file"])
def layout(request, tmp_path) -> Layout:
    return Layout.for_out(str(tmp_path / ("out" if request.param == "directory" else "out.jsonl")))


def test_a_written_manifest_reads_back_and_a_missing_one_is_none(layout):
    """No manifest means a fresh output (None, not an error); a written one reads back equal."""
    assert load_manifest(layout) is None
    manifest = {"format": FORMAT, "complete": False, "files": []}
    write_manifest(layout, manifest)
    assert load_manifest(layout) == manifest


def test_a_damaged_manifest_is_refused_naming_the_file_and_force(layout):
    """A manifest that is not JSON (a torn write by another tool, say) is an OutputError naming it and --force."""
    write_manifest(layout, {"format": FORMAT})
    with open(layout.manifest_path, "wb") as handle:
        handle.write(b'{"format": "fwe-boot')
    with pytest.raises(OutputError, match=re.escape(f"{layout.manifest_path} is damaged (not JSON: ") + ".*--force"):
        load_manifest(layout)


def test_a_foreign_json_file_is_not_taken_for_a_manifest(layout):
    """JSON without the bootstrap format (a list, or another format) is refused, not resumed."""
    for foreign in ([1, 2], {"format": "something-else/1"}):
        write_manifest(layout, foreign)  # type: ignore[arg-type]
        with pytest.raises(OutputError, match=re.escape(f"{layout.manifest_path} is not an fwe bootstrap manifest")):
            load_manifest(layout)


def test_an_unreadable_manifest_says_it_cannot_be_read(layout):
    """A manifest path that exists but cannot be read (here a directory) is an OutputError, not 'no manifest'."""
    os.makedirs(layout.manifest_path)
    with pytest.raises(OutputError, match=re.escape(f"cannot read {layout.manifest_path}: ")):
        load_manifest(layout)
