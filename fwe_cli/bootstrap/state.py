"""Deciding what a bootstrap run starts from: a fresh output, a resume, a finished output, or a refusal.

What decides a bootstrap's bytes (its `identity`: the arguments a resume must match), the fresh manifest and the
source to read from, and the check that a local source did not change under a resume; the decision itself is
fwe_cli/output/prepare.py's. Used by fwe_cli/bootstrap/run.py; nothing here writes data.
"""

from __future__ import annotations

import os

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.bootstrap.config import BootstrapConfig
from fwe_cli.errors import OutputError
from fwe_cli.bootstrap.manifest import FORMAT, Layout
from fwe_cli.loader.sources.local import BadRecords
from fwe_cli.loader.sources.records import RecordSpec, RecordStream
from fwe_cli.output import prepare


def identity(config: BootstrapConfig, layout: Layout) -> dict:
    """The arguments that decide the output bytes; a resume must match them exactly."""
    args: dict = {"source": config.source, "shard": {"mod": config.shard.mod, "rem": config.shard.rem},
                  "fields": config.fields, "target_bytes": config.target_bytes, "bad_records": config.bad_records}
    if not layout.single:
        args["file_bytes"] = config.file_bytes
    if config.source == "local":
        args["local_path"] = os.path.abspath(config.local_path)
    elif config.source == "hub":
        args.update(dataset=config.dataset, name=config.name, split=config.split, hub_reader=config.hub_reader)
    else:
        args["seed"] = config.seed
    return args


# identity key -> (flag, how to show a value)
_FLAGS = {
    "target_bytes": ("--gb", lambda v: f"{v / 1e9:g}"),
    "file_bytes": ("--file-mb", lambda v: f"{v / 1e6:g}"),
    "shard": ("--shard-mod/--shard-rem", lambda v: f"{v['mod']}/{v['rem']}" if isinstance(v, dict) else repr(v)),
}


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

    Called with the output's lock held (fwe_cli/output/lock.py): it may delete files."""
    manifest = prepare.prepare_output(layout, config.force, lambda manifest: prepare.differences(
        _recorded_args(manifest), identity(config, layout), _FLAGS))
    if config.force or (manifest is not None and manifest["complete"]):
        _remove_downloads(layout)  # for a complete one: killed after the manifest said so, before the folder went
    return manifest


def _recorded_args(manifest: dict) -> dict:
    old = dict(manifest.get("args", {}))
    if old.get("source") == "hub":
        old.setdefault("hub_reader", "datasets")  # made before the native reader existed
    return old


def _remove_downloads(layout: Layout) -> None:
    from fwe_cli.bootstrap.hub_download import remove_tree

    remove_tree(layout.download_dir)


def source_spec(config: BootstrapConfig, manifest: dict | None) -> RecordSpec:
    """The RecordSpec to read; for the Hub, the revision pinned by the manifest (or looked up for a new run)."""
    revision = None
    if config.source == "hub":
        if manifest is not None:
            revision = manifest.get("revision")
        else:
            from fwe_cli.loader.sources.hub import hub_revision

            revision = hub_revision(config.dataset)
    return RecordSpec(kind=config.source, local_path=config.local_path, dataset=config.dataset, name=config.name,
                      split=config.split, revision=revision, seed=config.seed, shard=config.shard,
                      strict=config.bad_records == "error", all_fields=config.fields == "all")


def open_source(config: BootstrapConfig, layout: Layout, manifest: dict | None):
    """The opened stream to copy from, at the manifest's resume point if any: a RecordStream, or for the Hub with
    the native reader a HubFileStream (both give position(), bad, and (record, line) pairs)."""
    resume = manifest["resume"] if manifest else None
    if config.source == "hub" and config.hub_reader == "native":
        from fwe_cli.bootstrap.hub_stream import open_hub_files

        return open_hub_files(config, layout.download_dir, manifest)
    return RecordStream(source_spec(config, manifest), start=resume["position"] if resume else None,
                        bad=BadRecords(**resume["bad_records"]) if resume else None).open()


def fresh_manifest(config: BootstrapConfig, layout: Layout, stream) -> dict:
    """The manifest of a new run reading `stream` (a RecordStream, or the native Hub reader's HubFileStream)."""
    hub, local = config.source == "hub", config.source == "local"
    native = getattr(stream, "manifest_fields", None)
    by_file = native is not None
    manifest = {
        "format": FORMAT,
        "complete": False,
        "fwe_version": fwe_cli.__version__,
        "layout": "single-file" if layout.single else "directory",
        "source": config.source,
        "dataset": config.dataset if hub else None,
        "config": config.name if hub else None,
        "split": config.split if hub else None,
        "revision": stream.revision if by_file else stream.spec.revision,
        "local_path": os.path.abspath(config.local_path) if local else None,
        "seed": config.seed if config.source == "synthetic" else None,
        "shard": {"mod": config.shard.mod, "rem": config.shard.rem, "by": "file" if by_file else "document",
                  "from": config.shard_origin},
        "fields": config.fields,
        "target_bytes": config.target_bytes,
        "file_bytes": None if layout.single else config.file_bytes,
        "args": identity(config, layout),
        "source_files": stream.fingerprint() if local else None,
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
    elif hub:
        manifest["hub_reader"] = "datasets"
    return manifest


def check_source_files(manifest: dict, stream: RecordStream) -> None:
    """A local source must not change under a resume: the two halves would come from different data."""
    before = manifest.get("source_files")
    if before is None:
        return
    now = stream.fingerprint()
    if now != before:
        old = {f["path"]: f for f in before}
        changed = [f["path"] for f in now if old.get(f["path"]) != f] or [f["path"] for f in before]
        raise OutputError(f"the local source changed since this bootstrap started ({changed[0]}; "
                          f"{len(before)} files then, {len(now)} now): resuming would mix two versions; "
                          "pass --force to start over")


def listed_totals(manifest: dict) -> dict:
    files = manifest["files"]
    return {"bytes": sum(f["bytes"] for f in files), "documents": sum(f["lines"] for f in files), "files": len(files)}
