"""The settings of one `fwe bootstrap`: a frozen, validated config and the flag-style constructor.

Sizes: 1 GB = 10**9 bytes, 1 MB = 10**6 bytes (what `df -H` and the Hub's file sizes use).

    cfg = bootstrap_config(out="/data/fwe_bootstrap", gb=5, source="hub")
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from fwe_cli.loader.config import LoaderConfig, Shard, check_source_settings
from fwe_cli.errors import ConfigError
from fwe_cli.bootstrap.manifest import Layout

FIELDS = ("text", "all")
GB = 10**9
MB = 10**6
DEFAULT_FILE_MB = 256
# Each checkpoint fsyncs, so frequent ones cost throughput; 64 MB keeps nearly all of it while bounding what a kill -9
# throws away to a moment's work (figures: runbooks/bootstrap.md, "Why these sizes").
DEFAULT_CHECKPOINT_MB = 64
_DEFAULTS = LoaderConfig.__dataclass_fields__


@dataclass(frozen=True)
class BootstrapConfig:
    """One bootstrap: what to copy, where, how much."""

    out: str
    """Output directory, or a path ending in .jsonl for one single file (manifest beside it)."""
    target_bytes: int
    """Stop after the record that brings the JSONL written to this many bytes (or when the source ends)."""
    source: str = "hub"
    """'hub' (datasets streaming), 'local' (files) or 'synthetic' (built in, offline)."""
    local_path: str | None = None
    """For source 'local': JSONL/TXT/parquet file, directory, glob, or a bootstrap directory."""
    dataset: str = _DEFAULTS["dataset"].default
    """For source 'hub': dataset repository id."""
    name: str | None = _DEFAULTS["name"].default
    """For source 'hub': dataset config name."""
    split: str = _DEFAULTS["split"].default
    """For source 'hub': split."""
    seed: int = 0
    """For source 'synthetic': the stream's seed."""
    shard: Shard = field(default_factory=Shard)
    """Keep only record i with i % mod == rem, so several nodes stage disjoint parts."""
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

    def __post_init__(self) -> None:
        if not self.out:
            raise ConfigError("out must name a directory or a .jsonl file, got none")
        for name in ("target_bytes", "file_bytes", "checkpoint_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive number of bytes, got {value!r}")
        check_source_settings(self.source, self.local_path, self.bad_records, self.shard)
        if self.fields not in FIELDS:
            raise ConfigError(f"fields must be 'text' or 'all', got {self.fields!r}")
        if self.source == "local":
            src, out = os.path.abspath(self.local_path), os.path.abspath(self.out)
            if out == src or out.startswith(src.rstrip(os.sep) + os.sep):
                raise ConfigError(f"--out {self.out} is inside the source --local-path {self.local_path}: "
                                  "the output would become part of its own input")


def _size(name: str, value: float, unit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{name} must be a number > 0, got {value!r}")
    return max(1, int(round(value * unit)))


def bootstrap_config(out: str, gb: float | None = None, target_bytes: int | None = None,
                     file_mb: float | None = None, checkpoint_mb: float | None = None,
                     source: str | None = None, local_path: str | None = None,
                     shard_mod: int | None = None, shard_rem: int | None = None, **settings) -> BootstrapConfig:
    """Build a BootstrapConfig from flag-style values (None = not given): --gb or a byte count, sizes in MB,
    --local-path implying source 'local', and --file-mb refused for a single-file output."""
    if (gb is None) == (target_bytes is None):
        raise ConfigError("give the size to stage as --gb (or target_bytes), exactly once")
    target = _size("--gb", gb, GB) if gb is not None else _size("target bytes", target_bytes, 1)
    if file_mb is not None and Layout.for_out(out).single:
        raise ConfigError(f"--file-mb applies to a directory output; {out} is a single .jsonl file")
    values = {k: v for k, v in settings.items() if v is not None}
    if source is not None or local_path is not None:
        values["source"] = source or "local"
    if local_path is not None:
        values["local_path"] = local_path
    if shard_mod is not None or shard_rem is not None:
        values["shard"] = Shard(1 if shard_mod is None else shard_mod, 0 if shard_rem is None else shard_rem)
    return BootstrapConfig(
        out=out, target_bytes=target,
        file_bytes=_size("--file-mb", DEFAULT_FILE_MB if file_mb is None else file_mb, MB),
        checkpoint_bytes=_size("--checkpoint-mb", DEFAULT_CHECKPOINT_MB if checkpoint_mb is None else checkpoint_mb, MB),
        **values,
    )
