"""Deciding what a bootstrap run starts from: a fresh output, a resume, a finished output, or a refusal.

Also the checks made before any download: free disk space against what is left to write plus a margin, and
(on resume) that the arguments and, for a local source, the source files are the ones the output was made
with. Used by fwe_cli/bootstrap/run.py; nothing here writes data.
"""

from __future__ import annotations

import os

import psutil

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.bootstrap.config import BootstrapConfig
from fwe_cli.errors import DiskSpaceError, OutputError
from fwe_cli.bootstrap.manifest import FORMAT, Layout, load_manifest
from fwe_cli.loader.sources.local_files import listed_file_problems
from fwe_cli.bootstrap.output_errors import remove_output
from fwe_cli.loader.sources import registry
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.loader.sources.records import Records
from fwe_cli.loader.sources.spec import ReadOptions

# Free space needed beyond the bytes still to write: the last record overshoots the target by up to ~120 KB,
# the manifest is a few KB, and a filesystem at 100% misbehaves, so keep 64 MiB + 2 % spare.
MARGIN_BYTES = 64 * 2**20
MARGIN_FRACTION = 0.02


def identity(config: BootstrapConfig, layout: Layout) -> dict:
    """The arguments that decide the output bytes; a resume must match them exactly. The source's are the fields its
    kind reads (path, repository and reader, or seed)."""
    args: dict = {"source": config.source.kind, "shard": {"mod": config.shard.mod, "rem": config.shard.rem},
                  "fields": config.fields, "target_bytes": config.target_bytes, "bad_records": config.bad_records}
    if not layout.single:
        args["file_bytes"] = config.file_bytes
    args.update(config.source.fields)
    if args.get("local_path") is not None:
        args["local_path"] = os.path.abspath(args["local_path"])
    return args


# identity key -> (flag, how to show a value)
_FLAGS = {
    "target_bytes": ("--gb", lambda v: f"{v / 1e9:g}"),
    "file_bytes": ("--file-mb", lambda v: f"{v / 1e6:g}"),
    "shard": ("--shard-mod/--shard-rem", lambda v: f"{v['mod']}/{v['rem']}" if isinstance(v, dict) else repr(v)),
}


def _differences(old: dict, new: dict) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            flag, show = _FLAGS.get(key, ("--" + key.replace("_", "-"), repr))
            before = "unset" if key not in old else show(old[key])
            after = "unset" if key not in new else show(new[key])
            out.append(f"{flag} {before} there, {after} now")
    return out


def check_out_kind(layout: Layout) -> None:
    """--out must be what its layout needs, checked before anything is created: the OS would say only 'file
    exists' or 'is a directory'."""
    if layout.single and os.path.isdir(layout.out):
        raise OutputError(f"--out {layout.out} is a directory; a single-file bootstrap needs a file path "
                          "(or drop the .jsonl ending to write parts into a directory)")
    if not layout.single and os.path.lexists(layout.out) and not os.path.isdir(layout.out):
        raise OutputError(f"--out {layout.out} exists and is not a directory; a bootstrap writes parts into a "
                          "directory (or end the path in .jsonl for a single file)")


def prepare_output(config: BootstrapConfig, layout: Layout) -> dict | None:
    """None for a fresh start (after --force cleanup); else the existing manifest to resume or confirm.

    Called with the output's lock held (fwe_cli/bootstrap/output_lock.py): it may delete files."""
    remove_output(layout.manifest_path + ".tmp")  # a manifest never renamed into place holds nothing we need
    if config.force:
        for path, _index in layout.own_files():
            remove_output(path)
        _remove_downloads(layout)
        return None
    manifest = load_manifest(layout)
    if manifest is None:
        if layout.own_files() or layout.has_foreign_files():
            raise OutputError(f"{layout.out} exists and is not an fwe bootstrap (no {os.path.basename(layout.manifest_path)}):"
                              " choose a new or empty --out, or pass --force to write there anyway")
        return None
    old = dict(manifest.get("args", {}))
    if old.get("source") == "hub":
        old.setdefault("hub_reader", "datasets")  # made before the native reader existed
    diffs = _differences(old, identity(config, layout))
    if diffs:
        raise OutputError(f"{layout.out} holds a bootstrap made with different arguments ({'; '.join(diffs)}): "
                          "re-run with the original arguments to resume it, pass --force to replace it, "
                          "or choose another --out")
    problems = listed_file_problems(layout.directory, manifest, rehash=False)
    if problems:
        first = problems[0]
        raise OutputError(f"bootstrap at {layout.out} is damaged: {first['name']} {first['problem']} "
                          f"({len(problems)} file(s) in all; `fwe bootstrap --verify` lists them); "
                          "pass --force to start over")
    if manifest["complete"]:
        _remove_downloads(layout)  # killed after the manifest said complete, before the folder was deleted
    else:
        current = manifest["resume"]["part"]
        for path, index in layout.own_files():
            stale = index is not None and (index > current or (index < current and path.endswith(".partial")))
            if stale:
                remove_output(path)
    return manifest


def _remove_downloads(layout: Layout) -> None:
    from fwe_cli.bootstrap.hub_download import remove_tree

    remove_tree(layout.download_dir)


def preflight_disk(directory: str, remaining_bytes: int) -> dict:
    """Raise DiskSpaceError unless the filesystem of `directory` has room for what is left plus a margin."""
    probe = os.path.abspath(directory)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    remaining = max(0, remaining_bytes)
    need = remaining + MARGIN_BYTES + int(MARGIN_FRACTION * remaining)
    free = psutil.disk_usage(probe).free
    if free < need:
        raise DiskSpaceError(
            f"not enough disk space for the bootstrap at {directory}: {free / 1e9:.2f} GB free on {probe}, "
            f"{need / 1e9:.2f} GB needed ({remaining / 1e9:.2f} GB still to write + margin); free space, "
            "choose another --out, or lower --gb"
        )
    return {"free_bytes": free, "needed_bytes": need, "checked_path": probe}


def open_source(config: BootstrapConfig, layout: Layout, manifest: dict | None):
    """The opened records to copy from, at the manifest's resume point if any: a source's Records, or for a source
    whose files bootstrap downloads (the native Hub reader) a HubFileStream (both give position(), bad, and (record,
    line) pairs). A Hub source is read at the commit the manifest pins (a new run: the commit the Hub names now)."""
    resume = manifest["resume"] if manifest else None
    options = ReadOptions(strict=config.bad_records == "error")
    pinned = manifest.get("revision") if manifest else None
    source = registry.open_source(config.source.replace(revision=pinned) if pinned else config.source, options)
    if source.copies_whole_files:
        from fwe_cli.bootstrap.hub_stream import open_hub_files

        return open_hub_files(config, layout.download_dir, manifest)
    if manifest is None and (latest := source.latest_revision()) is not None:
        source = registry.open_source(config.source.replace(revision=latest), options)
    return source.records(config.shard, start=resume["position"] if resume else None, all_fields=config.fields == "all",
                          bad=BadRecords(**resume["bad_records"]) if resume else None).open()


def fresh_manifest(config: BootstrapConfig, layout: Layout, stream) -> dict:
    """The manifest of a new run reading `stream` (a source's Records, or the native Hub reader's HubFileStream)."""
    where = config.source.fields  # the fields the source's kind reads; the others are recorded as null
    native = getattr(stream, "manifest_fields", None)
    by_file = native is not None
    manifest = {
        "format": FORMAT,
        "complete": False,
        "fwe_version": fwe_cli.__version__,
        "layout": "single-file" if layout.single else "directory",
        "source": config.source.kind,
        "dataset": where.get("dataset"),
        "config": where.get("name"),
        "split": where.get("split"),
        "revision": stream.revision,
        "local_path": os.path.abspath(where["local_path"]) if "local_path" in where else None,
        "seed": where.get("seed"),
        "shard": {"mod": config.shard.mod, "rem": config.shard.rem, "by": "file" if by_file else "document",
                  "from": config.shard_origin},
        "fields": config.fields,
        "target_bytes": config.target_bytes,
        "file_bytes": None if layout.single else config.file_bytes,
        "args": identity(config, layout),
        "source_files": stream.fingerprint(),
        "files": [],
        "totals": {"bytes": 0, "documents": 0, "files": 0},
        "bad_records": {"count": 0, "examples": []},
        "source_exhausted": None,
        "started": utc_iso(),
        "finished": None,
        "runs": [],
        "resume": None,
    }
    if by_file:
        manifest.update(native())
    elif "hub_reader" in where:
        manifest["hub_reader"] = where["hub_reader"]
    return manifest


def check_source_files(manifest: dict, stream: Records) -> None:
    """A local source must not change under a resume: the two halves would come from different data."""
    before = manifest.get("source_files")
    change = stream.source.changed(before) if before is not None else None
    if change is not None:
        raise OutputError(f"the local source changed since this bootstrap started ({change}): resuming would mix two "
                          "versions; pass --force to start over")


def listed_totals(manifest: dict) -> dict:
    files = manifest["files"]
    return {"bytes": sum(f["bytes"] for f in files), "documents": sum(f["lines"] for f in files), "files": len(files)}
