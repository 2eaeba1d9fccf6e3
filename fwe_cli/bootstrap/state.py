"""Deciding what a bootstrap run starts from: a fresh output, a resume, a finished output, or a refusal.

What decides a bootstrap's bytes (its `identity`: the arguments a resume must match), the fresh manifest and the
source to read from, and the check that a local source did not change under a resume; the decision itself is
fwe_cli/output/prepare.py's. Used by fwe_cli/bootstrap/run.py; nothing here writes data.
"""

from __future__ import annotations

import dataclasses
import os

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.bootstrap.config import BootstrapConfig, split_of
from fwe_cli.errors import OutputError
from fwe_cli.loader.files.bootstrap_format import FORMAT, Layout
from fwe_cli.loader.remote.object_store import local_or_url
from fwe_cli.loader.remote.storage_options import parse_storage_options
from fwe_cli.loader.sources import registry
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.loader.sources.records import Records
from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec
from fwe_cli.output import prepare


def identity(config: BootstrapConfig, layout: Layout) -> dict:
    """The arguments that decide the output bytes; a resume must match them exactly. The source's are the fields its
    kind reads (path, repository and reader, or seed), and a held-out split's settings."""
    read, split = split_of(config.source)
    args: dict = {"source": read.kind, "shard": {"mod": config.shard.mod, "rem": config.shard.rem},
                  "fields": config.fields, "target_bytes": config.target_bytes, "bad_records": config.bad_records}
    if not layout.single:
        args["file_bytes"] = config.file_bytes
    args.update(where_from(config))
    args.update(split)  # holdout, holdout_split: absent for a bootstrap of the whole source
    if args.get("local_path") is not None:
        args["local_path"] = local_or_url(args["local_path"])
    return args


def where_from(config: BootstrapConfig) -> dict:
    """Where the source's documents are, as a bootstrap records it: its kind's options, but the Hub revision, which
    the manifest pins itself."""
    read, _ = split_of(config.source)
    return {k: v for k, v in dataclasses.asdict(read.options).items() if k != "revision"}


# identity key -> (flag, how to show a value)
_FLAGS = {
    "target_bytes": ("--gb", lambda v: f"{v / 1e9:g}"),
    "file_bytes": ("--file-mb", lambda v: f"{v / 1e6:g}"),
    "shard": ("--shard-mod/--shard-rem", lambda v: f"{v['mod']}/{v['rem']}" if isinstance(v, dict) else repr(v)),
    "holdout": ("--holdout", str),
    "holdout_split": ("--holdout-split", str),
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
    """None for a fresh start (after --force cleanup); else the existing manifest to resume or confirm. A complete
    bootstrap asked for a larger --gb (and not at the end of its source) is reopened to go on from where it stopped:
    its parts stay, new ones follow.

    Called with the output's lock held (fwe_cli/output/lock.py): it may delete files."""
    now = identity(config, layout)
    extended: list[dict] = []

    def differences_from(manifest: dict) -> list[str]:
        recorded = _recorded_args(manifest)
        if _extends(manifest, config, layout):
            extended.append(manifest)
            recorded = dict(recorded, target_bytes=now["target_bytes"])
        return prepare.differences(recorded, now, _FLAGS)

    manifest = prepare.prepare_output(layout, config.force, differences_from)
    if config.force or (manifest is not None and manifest["complete"]):
        _remove_downloads(layout)  # for a complete one: killed after the manifest said so, before the folder went
    return _reopened(manifest, config) if extended and manifest is not None else manifest


def _extends(manifest: dict, config: BootstrapConfig, layout: Layout) -> bool:
    """Whether `config` asks a complete bootstrap for more than it holds, from a source it has not read to its end."""
    return (bool(manifest.get("complete")) and manifest.get("next") is not None and not layout.single
            and config.target_bytes > manifest["totals"]["bytes"])


def _reopened(manifest: dict, config: BootstrapConfig) -> dict:
    """A complete manifest turned into one that resumes at its next document, into a new part, for the new target."""
    totals = manifest["totals"]
    resume = {"part": len(manifest["files"]), "part_bytes": 0, "part_lines": 0, "bytes": totals["bytes"],
              "documents": totals["documents"], "position": manifest["next"], "bad_records": manifest["bad_records"]}
    return dict(manifest, complete=False, finished=None, target_bytes=config.target_bytes, resume=resume,
                args=dict(manifest["args"], target_bytes=config.target_bytes))


def _recorded_args(manifest: dict) -> dict:
    old = dict(manifest.get("args", {}))
    if "dataset" in old:  # a Hub bootstrap made before the native reader existed read through datasets
        old.setdefault("hub_reader", "datasets")
    return old


def _remove_downloads(layout: Layout) -> None:
    from fwe_cli.bootstrap.hub_download import remove_tree

    remove_tree(layout.download_dir)


def open_source(config: BootstrapConfig, layout: Layout, manifest: dict | None):
    """The opened records to copy from, at the manifest's resume point if any: a source's Records, or for a source
    whose files bootstrap downloads (the native Hub reader) a HubFileStream (both give position(), bad, and (record,
    line) pairs). A Hub source is read at the commit the manifest pins (a new run: the commit the Hub names now)."""
    resume = manifest["resume"] if manifest else None
    options = ReadOptions(strict=config.bad_records == "error",
                          storage_options=parse_storage_options(config.storage_options))
    pinned = manifest.get("revision") if manifest else None
    source = registry.open_source(_at_revision(config.source, pinned) if pinned else config.source, options)
    if source.copies_whole_files:
        from fwe_cli.bootstrap.hub_stream import open_hub_files

        return open_hub_files(config, layout.download_dir, manifest)
    if manifest is None and (latest := source.latest_revision()) is not None:
        source = registry.open_source(_at_revision(config.source, latest), options)
    return source.records(config.shard, start=resume["position"] if resume else None, all_fields=config.fields == "all",
                          bad=BadRecords(**resume["bad_records"]) if resume else None).open()


def _at_revision(spec: SourceSpec, revision: str) -> SourceSpec:
    """`spec` reading the Hub at `revision` (the source under a held-out split)."""
    read, split = split_of(spec)
    if split:
        return spec.with_children((read.with_options(revision=revision),))
    return spec.with_options(revision=revision)


def fresh_manifest(config: BootstrapConfig, layout: Layout, stream) -> dict:
    """The manifest of a new run reading `stream` (a source's Records, or the native Hub reader's HubFileStream)."""
    where = where_from(config)  # the options of the source's kind; the others are recorded as null
    read, split = split_of(config.source)
    native = getattr(stream, "manifest_fields", None)
    by_file = native is not None
    manifest = {
        "format": FORMAT,
        "complete": False,
        "fwe_version": fwe_cli.__version__,
        "layout": "single-file" if layout.single else "directory",
        "source": read.kind,
        "holdout": split or None,
        "dataset": where.get("dataset"),
        "config": where.get("name"),
        "split": where.get("split"),
        "revision": stream.revision,
        "local_path": local_or_url(where["local_path"]) if "local_path" in where else None,
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

