"""fwe_cli/output/manifest_file.py: an output's manifest is replaced atomically (a crash leaves the old one or the
new one, never a mix) and read back only when it is this kind's, in a shape it can trust."""

from __future__ import annotations

import re

import pytest

from fwe_cli.errors import OutputError
from fwe_cli.output.manifest_file import load_manifest, write_manifest
from fwe_cli.output.prepare import prepare_output
from tests.output.sample_layout import SAMPLE, write_sample


class _Crash(Exception):
    pass


def test_a_crash_before_the_rename_leaves_the_old_manifest_whole(tmp_path):
    """A run that dies between writing the new manifest and renaming it leaves the old manifest as it was and the
    new one under its temporary name, which the next run's prepare removes before reading."""
    layout = write_sample(tmp_path / "out", [10], complete=False)
    old = load_manifest(layout)

    def crash() -> None:
        raise _Crash

    with pytest.raises(_Crash):
        write_manifest(layout, {**old, "complete": True}, before_rename=crash)
    assert load_manifest(layout) == old
    assert (tmp_path / "out" / "manifest.json.tmp").exists()
    assert prepare_output(layout, False, lambda manifest: []) == old
    assert not (tmp_path / "out" / "manifest.json.tmp").exists()


def test_another_kinds_or_a_misshapen_manifest_is_refused_naming_the_file(tmp_path):
    """JSON of another format is not this kind's manifest, and one of this format whose shape its kind rejects is
    damaged: each an OutputError naming the file, the kind or the problem, and --force."""
    layout = write_sample(tmp_path / "out", [10])
    write_manifest(layout, {"format": "fwe-tokens/1", "files": []})
    with pytest.raises(OutputError, match=re.escape(f"{layout.manifest_path} is not an fwe sample output manifest "
                                                    f"(format {SAMPLE.format})") + ".*--force"):
        load_manifest(layout)
    write_manifest(layout, {"format": SAMPLE.format, "files": "not a list"})
    with pytest.raises(OutputError, match=re.escape(f"{layout.manifest_path} is damaged (no file list); pass --force")):
        load_manifest(layout)
