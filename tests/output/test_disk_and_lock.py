"""Where an output goes on disk: the nearest existing folder of a path not made yet (free space is measured there;
a lock creates what is missing below it and removes it again when the run wrote nothing), the disk preflight, and
the lock that keeps a second run off an output."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from fwe_cli.errors import DiskSpaceError, OutputError
from fwe_cli.output.disk_preflight import preflight_disk
from fwe_cli.output.lock import OutputLock
from fwe_cli.output.nearest_existing import nearest_existing
from tests.output.sample_layout import SampleLayout


def test_nearest_existing_gives_the_existing_folder_and_what_is_missing_below_it(tmp_path):
    """A path below missing folders gives its nearest existing ancestor and the missing ones, deepest first; an
    existing path is its own answer, with nothing missing."""
    target = tmp_path / "a" / "b" / "c"
    assert nearest_existing(str(target)) == (str(tmp_path), [str(target), str(tmp_path / "a" / "b"),
                                                             str(tmp_path / "a")])
    assert nearest_existing(str(tmp_path)) == (str(tmp_path), [])


def test_preflight_refuses_more_than_the_disk_holds_naming_where_it_measured(tmp_path):
    """Asking for more than any disk holds raises DiskSpaceError naming the output, the folder where free space was
    measured (the nearest that exists) and the flag that lowers the size; a small need passes, with its figures."""
    target = tmp_path / "not" / "yet"
    with pytest.raises(DiskSpaceError, match=re.escape(f"not enough disk space for the sample at {target}: ")
                       + rf".* GB free on {re.escape(str(tmp_path))}, .*lower --size"):
        preflight_disk(str(target), 10**18, "the sample", "--size")
    checked = preflight_disk(str(target), 1, "the sample", "--size")
    assert checked["checked_path"] == str(tmp_path) and checked["free_bytes"] >= checked["needed_bytes"]


def test_a_held_lock_refuses_a_second_holder_at_once_naming_the_holder(tmp_path):
    """While one OutputLock holds an output (here in this very process: flock locks are per open file), another is
    refused with the kind's command and the holder's PID; once released, the lock file is gone and the folders
    the holder created for it are removed again, as it wrote nothing else there."""
    layout = SampleLayout.for_out(tmp_path / "new" / "out")
    with OutputLock(layout):
        assert Path(layout.lock_path).read_text() == f"{os.getpid()}\n"
        with pytest.raises(OutputError, match=re.escape(f"{layout.out} is being written by another fwe sample "
                                                        f"(pid {os.getpid()}, lock {layout.lock_path})")):
            OutputLock(layout).__enter__()
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    with OutputLock(SampleLayout.for_out(tmp_path / "kept")):
        (tmp_path / "kept" / "data-0.bin").write_bytes(b"written")
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["data-0.bin"]
