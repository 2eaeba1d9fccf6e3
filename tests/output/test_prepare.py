"""fwe_cli/output/prepare.py, what every resumable output decides before it writes: a fresh start, a resume (after
removing what the manifest does not stand behind), or a refusal in one line naming why and the way out."""

from __future__ import annotations

import re

import pytest

from fwe_cli.errors import OutputError
from fwe_cli.output.prepare import differences, prepare_output
from tests.output.sample_layout import SampleLayout, write_sample


def _same(manifest: dict) -> list[str]:
    return []


def test_differences_name_each_changed_argument_the_way_the_user_types_it():
    """One 'FLAG BEFORE there, AFTER now' per differing key, in key order: '--key-name' and repr unless named
    otherwise, 'unset' for a key only one side has; equal keys say nothing."""
    old = {"target_bytes": 5 * 10**9, "fields": "text", "seed": 1, "same": 3}
    new = {"target_bytes": 6 * 10**9, "fields": "all", "bad_records": "skip", "same": 3}
    named = {"target_bytes": ("--gb", lambda v: f"{v / 1e9:g}")}
    assert differences(old, new, named) == ["--bad-records unset there, 'skip' now", "--fields 'text' there, 'all' now",
                                            "--seed 1 there, unset now", "--gb 5 there, 6 now"]
    assert differences(old, dict(old)) == []


def test_different_arguments_are_refused_naming_each_and_nothing_is_deleted(tmp_path):
    """A manifest made with other arguments is never resumed: OutputError naming the output, its kind, every
    difference and --force; not a file is removed (stale ones included)."""
    layout = write_sample(tmp_path / "out", [10, 20], complete=False)
    (tmp_path / "out" / "data-2.bin.partial").write_bytes(b"left by a killed run")
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    with pytest.raises(OutputError, match=re.escape(f"{layout.out} holds a sample output made with different "
                                                    "arguments (--gb 5 there, 6 now; --seed 1 there, 2 now)")
                       + ".*--force") as refused:
        prepare_output(layout, False, lambda manifest: differences({"gb": 5, "seed": 1}, {"gb": 6, "seed": 2}))
    assert "\n" not in str(refused.value)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before


def test_a_damaged_listed_file_is_refused_naming_it_and_the_verify_command(tmp_path):
    """A resume whose listed files are missing or of the wrong size is refused, naming the first such file, how
    many there are, and the command's --verify, which lists them all."""
    layout = write_sample(tmp_path / "out", [10, 20, 30], complete=False)
    (tmp_path / "out" / "data-1.bin").write_bytes(b"short")
    (tmp_path / "out" / "data-2.bin").unlink()
    with pytest.raises(OutputError, match=re.escape(f"sample output at {layout.out} is damaged: data-1.bin 5 bytes, "
                                                    "manifest says 20 (2 file(s) in all; `fwe sample --verify` "
                                                    "lists them)")):
        prepare_output(layout, False, _same)


def test_a_resume_removes_only_what_the_manifest_does_not_list(tmp_path):
    """An incomplete output with the same arguments is resumed: its manifest comes back, the files an interrupted
    run left unlisted (a temporary manifest, a partial file, a file renamed after the last manifest) are removed,
    the listed ones and foreign ones stay. A complete output is returned as is."""
    out = tmp_path / "out"
    layout = write_sample(out, [10, 20], complete=False, args={"gb": 5})
    for name in ("manifest.json.tmp", "data-2.bin.partial", "data-3.bin"):
        (out / name).write_bytes(b"x")
    manifest = prepare_output(layout, False, _same)
    assert manifest["args"] == {"gb": 5} and [f["name"] for f in manifest["files"]] == ["data-0.bin", "data-1.bin"]
    assert sorted(p.name for p in out.iterdir()) == ["data-0.bin", "data-1.bin", "manifest.json"]
    done = write_sample(tmp_path / "done", [10], complete=True)
    assert prepare_output(done, False, _same)["complete"] is True


def test_force_removes_the_outputs_own_files_and_only_those(tmp_path):
    """--force starts fresh (None) even over other arguments or damage: the output's own files go, anything else
    in its directory stays."""
    out = tmp_path / "out"
    layout = write_sample(out, [10, 20], complete=False)
    (out / "data-0.bin").write_bytes(b"damaged")
    (out / "notes.txt").write_text("mine")
    assert prepare_output(layout, True, lambda manifest: ["--gb 5 there, 6 now"]) is None
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_directory_without_a_manifest_is_fresh_only_when_it_holds_nothing(tmp_path):
    """No manifest and nothing in the directory (or no directory) is a fresh start; files without a manifest are
    someone else's, or an output whose manifest is gone: refused, naming the manifest it lacks."""
    assert prepare_output(SampleLayout.for_out(tmp_path / "new"), False, _same) is None
    (tmp_path / "empty").mkdir()
    assert prepare_output(SampleLayout.for_out(tmp_path / "empty"), False, _same) is None
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=re.escape(f"{tmp_path / 'theirs'} exists and is not an fwe sample output "
                                                    "(no manifest.json)")):
        prepare_output(SampleLayout.for_out(tmp_path / "theirs"), False, _same)
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "mine"
