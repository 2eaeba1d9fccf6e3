"""What a run starts from: a fresh output, a resume, a finished output, or a refusal naming why.

    manifest = prepare_output(layout, force, lambda old: differences(recorded(old), identity_now, FLAGS))

A resume must be made with the arguments the output was made with (anything else would mix two outputs in one), so
a manifest whose recorded arguments differ is refused (exit 8) naming each difference, unless `force`; so is a
directory that holds files but no manifest, and an output whose listed files are missing or of the wrong size.
Called with the output's lock held (lock.py): it deletes files (with `force`, this output's own; on a resume,
those an interrupted run left that the manifest does not stand behind).
"""

from __future__ import annotations

import os
from typing import Callable, Mapping

from fwe_cli.errors import OutputError
from fwe_cli.output.kind import OutputLayout
from fwe_cli.output.manifest_file import load_manifest
from fwe_cli.output.os_errors import remove_output
from fwe_cli.output.verify import listed_file_problems

Named = tuple[str, Callable[[object], str]]
"""How a difference names an argument: (what the user types, e.g. '--gb'; how a value of it reads)."""


def differences(old: dict, new: dict, named: Mapping[str, Named] = {}) -> list[str]:
    """'FLAG BEFORE there, AFTER now' for each key whose value differs between `old` (recorded in the manifest) and
    `new` (this run's), in key order; `named[key]` says how, else '--key-name' and repr ('unset' when absent)."""
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            flag, show = named.get(key, ("--" + key.replace("_", "-"), repr))
            before = "unset" if key not in old else show(old[key])
            after = "unset" if key not in new else show(new[key])
            out.append(f"{flag} {before} there, {after} now")
    return out


def prepare_output(layout: OutputLayout, force: bool, differences_from: Callable[[dict], list[str]]) -> dict | None:
    """None for a fresh start (after removing this output's own files with `force`); else the existing manifest to
    resume or confirm, once `differences_from(manifest)` says nothing differs and its listed files are there."""
    kind = layout.kind
    remove_output(layout.manifest_path + ".tmp")  # a manifest never renamed into place holds nothing we need
    if force:
        for path, _number in layout.own_files():
            remove_output(path)
        return None
    manifest = load_manifest(layout)
    if manifest is None:
        if layout.own_files() or layout.has_foreign_files():
            raise OutputError(f"{layout.out} exists and is not an fwe {kind.what} (no "
                              f"{os.path.basename(layout.manifest_path)}): choose a new or empty --out, or pass "
                              "--force to write there anyway")
        return None
    diffs = differences_from(manifest)
    if diffs:
        raise OutputError(f"{layout.out} holds a {kind.what} made with different arguments ({'; '.join(diffs)}): "
                          "re-run with the original arguments to resume it, pass --force to replace it, or choose "
                          "another --out")
    problems = listed_file_problems(layout.directory, {"files": kind.listed(manifest)}, rehash=False)
    if problems:
        first = problems[0]
        raise OutputError(f"{kind.what} at {layout.out} is damaged: {first['name']} {first['problem']} "
                          f"({len(problems)} file(s) in all; `{kind.command} --verify` lists them); "
                          "pass --force to start over")
    if not manifest["complete"]:
        for path in layout.stale_files(manifest):
            remove_output(path)
    return manifest
