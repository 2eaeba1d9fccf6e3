"""The settings of one `fwe bootstrap`: a frozen, validated config and the flag-style constructor.

Sizes: 1 GB = 10**9 bytes, 1 MB = 10**6 bytes (what `df -H` and the Hub's file sizes use).

    cfg = bootstrap_config(out="/data/fwe_bootstrap", gb=5, source="hub")
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.compose.mix_file import refuse_mix
from fwe_cli.loader.config import Shard, check_reading_settings
from fwe_cli.loader.files.bootstrap_format import Layout
from fwe_cli.loader.limits import check_limit
from fwe_cli.loader.remote.object_store import is_url
from fwe_cli.loader.remote.storage_options import parse_storage_options
from fwe_cli.loader.shard import slurm_shard
from fwe_cli.loader.sources.registry import source_class
from fwe_cli.loader.sources.spec import SOURCE_FLAGS, SourceSpec

FIELDS = ("text", "all")
GB = 10**9
MB = 10**6
DEFAULT_FILE_MB = 256
# Each checkpoint fsyncs, so frequent ones cost throughput; 64 MB keeps nearly all of it while bounding what a kill -9
# throws away to a moment's work (figures: runbooks/bootstrap.md, "Why these sizes").
DEFAULT_CHECKPOINT_MB = 64


@dataclass(frozen=True)
class BootstrapConfig:
    """One bootstrap: what to copy, where, how much."""

    out: str
    """Output directory, or a path ending in .jsonl for one single file (manifest beside it)."""
    target_bytes: int
    """Stop after the record that brings the JSONL written to this many bytes (or when the source ends)."""
    source: SourceSpec = field(default_factory=SourceSpec)
    """What to copy: the Hub (native reader: download the parquet files, convert on all cores; datasets: streaming),
    local files (JSONL/TXT/parquet file, directory, glob, or a bootstrap) or the synthetic source; or one side of a
    held-out split of one of them (--holdout, --holdout-split: `split_of`)."""
    shard: Shard = field(default_factory=Shard)
    """Several nodes stage disjoint parts: Hub (native reader) file i goes to node i % mod; for the other sources
    and the datasets reader, record i."""
    shard_origin: str = "default"
    """Where `shard` came from: 'flags', 'slurm' (SLURM_ARRAY_TASK_*) or 'default' (recorded in the manifest)."""
    workers: int | None = None
    """Native Hub reader: conversion processes (None: threads of this process; 0: the calling thread)."""
    downloads: int = 2
    """Native Hub reader: files downloading, or waiting to be converted, beside the one being converted."""
    fields: str = "text"
    """'text' writes {"text", "id"} per line; 'all' keeps every field (a local JSONL line is copied as is)."""
    file_bytes: int = 256 * MB
    """Roll to a new part after this many bytes (directory layout only)."""
    bad_records: str = "skip"
    """A malformed source record: 'skip' (counted in the manifest) or 'error' (stop, naming file and line)."""
    checkpoint_bytes: int = 64 * MB
    """fsync and record a resume point every this many bytes; a kill -9 redoes at most this much."""
    force: bool = False
    """Replace an existing output (ours only) instead of resuming it or refusing different arguments."""
    storage_options: tuple[str, ...] = ()
    """KEY=VALUE options of the object store's filesystem for an s3:// (gs://, az://, hf://) --source or --out
    (--storage-option; remote.storage_options), as the loader's."""

    def __post_init__(self) -> None:
        if not self.out:
            raise ConfigError("out must name a directory or a .jsonl file, got none")
        for name in ("target_bytes", "file_bytes", "checkpoint_bytes"):
            check_limit(name, getattr(self, name))
        if not isinstance(self.source, SourceSpec):
            raise ConfigError(f"source must be a SourceSpec, got {self.source!r}")
        check_reading_settings(self.bad_records, self.shard)
        object.__setattr__(self, "storage_options", tuple(self.storage_options))
        parse_storage_options(self.storage_options)
        if self.workers is not None:
            check_limit("workers", self.workers, "--workers")
        check_limit("downloads", self.downloads, "--downloads")
        if self.fields not in FIELDS:
            raise ConfigError(f"fields must be 'text' or 'all', got {self.fields!r}")
        read, split = split_of(self.source)
        if split and source_class(read).copies_whole_files:
            raise ConfigError("fwe bootstrap --holdout copies record by record, and the native Hub reader copies whole "
                              "parquet files: add --hub-reader datasets (the same rows, streamed)")
        if read.options.where is not None and source_class(read).copies_whole_files:
            raise ConfigError("--where is not applied by the native Hub bootstrap, which copies whole parquet files: "
                              "give --hub-reader datasets (it filters each row), or bootstrap with --fields all and "
                              "read the bootstrap with --where")
        local_path = read.to_json().get("local_path")
        if local_path is not None and not is_url(local_path):
            src, out = os.path.abspath(local_path), os.path.abspath(self.out)
            if out == src or out.startswith(src.rstrip(os.sep) + os.sep):
                raise ConfigError(f"--out {self.out} is inside the source --local-path {local_path}: "
                                  "the output would become part of its own input")


def staging_for(url: str) -> str:
    """Where `fwe bootstrap --out URL` stages the bootstrap before uploading it (bootstrap.bucket): a folder of
    data/fwe_staging (under the current directory) named by the URL, so a re-run finds and resumes it."""
    import hashlib

    return os.path.join("data", "fwe_staging", hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16])


def split_of(spec: SourceSpec) -> tuple[SourceSpec, dict]:
    """The source a bootstrap copies from, and the settings of the held-out split it keeps one side of ({} for none:
    the whole source)."""
    if spec.kind == "holdout":
        return spec.children[0], dataclasses.asdict(spec.options)
    return spec, {}


def _size(name: str, value: float, unit: int, limit: str) -> int:
    """`value` in `unit`s as bytes, after checking it against LIMITS[limit] (finite, > 0, at most the maximum)."""
    check_limit(limit, value, name)
    return max(1, int(round(value * unit)))


def bootstrap_config(out: str, gb: float | None = None, target_bytes: int | None = None,
                     file_mb: float | None = None, checkpoint_mb: float | None = None,
                     source: str | None = None, local_path: str | None = None,
                     shard_mod: int | None = None, shard_rem: int | None = None, env=None,
                     **settings) -> BootstrapConfig:
    """Build a BootstrapConfig from flag-style values (None = not given): --gb or a byte count, sizes in MB,
    --local-path implying source 'local', and --file-mb refused for a single-file output. The shard comes from
    --shard-mod/--shard-rem, else from a SLURM array's variables in `env` (default os.environ), else none."""
    env = os.environ if env is None else env
    refuse_mix(env, "fwe bootstrap copies one source")
    if (gb is None) == (target_bytes is None):
        raise ConfigError("give the size to stage as --gb (or target_bytes), exactly once")
    target = _size("--gb", gb, GB, "gb") if gb is not None else _size("target bytes", target_bytes, 1, "target_bytes")
    if file_mb is not None and Layout.for_out(out).single:
        raise ConfigError(f"--file-mb applies to a directory output; {out} is a single .jsonl file")
    values = {k: v for k, v in settings.items() if v is not None and k not in SOURCE_FLAGS}
    spec = {k: v for k, v in settings.items() if v is not None and k in SOURCE_FLAGS}
    if source is not None and is_url(source):  # --source s3://bucket/prefix: a bucket staged on this disk
        source, local_path = None, source
    if source is not None:
        spec["source"] = source
    if local_path is not None:
        spec["local_path"] = local_path
    try:
        values["source"] = SourceSpec.from_flags(spec)
    except SettingError as exc:  # named as bootstrap's flags are
        raise exc.naming(lambda name: "--" + name.replace("_", "-")) from None
    if shard_mod is not None or shard_rem is not None:
        values["shard"] = Shard(1 if shard_mod is None else shard_mod, 0 if shard_rem is None else shard_rem)
        values["shard_origin"] = "flags"
    elif (slurm := slurm_shard(env)) is not None:
        values["shard"], values["shard_origin"] = slurm, "slurm"
    return BootstrapConfig(
        out=out, target_bytes=target,
        file_bytes=_size("--file-mb", DEFAULT_FILE_MB if file_mb is None else file_mb, MB, "file_mb"),
        checkpoint_bytes=_size("--checkpoint-mb", DEFAULT_CHECKPOINT_MB if checkpoint_mb is None else checkpoint_mb, MB,
                               "checkpoint_mb"),
        **values,
    )
