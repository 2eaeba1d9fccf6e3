"""The document-level shard of a loader (data-parallel rank among world size), and a SLURM array task's place in its
array (`slurm_shard`: what `fwe bootstrap` and `fwe tokenize` split their work by)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.limits import check_limit


@dataclass(frozen=True)
class Shard:
    """Document-level shard: document i of the stream belongs to this shard when i % mod == rem."""

    mod: int = 1
    """How many shards the stream is split into (world size of the data-parallel group)."""
    rem: int = 0
    """Which of them this is, 0 <= rem < mod (the data-parallel rank)."""

    def __post_init__(self) -> None:
        check_limit("shard_mod", self.mod, "shard mod")
        if not isinstance(self.rem, int) or not 0 <= self.rem < self.mod:
            raise SettingError(lambda n: f"{n('shard_rem')} must be an integer from 0 to {self.mod - 1} (one of "
                                         f"{n('shard_mod')} {self.mod} shards), got {self.rem!r}")

    def owns(self, index: int) -> bool:
        """Whether document `index` of the whole stream (every shard counted) belongs to this shard."""
        return index % self.mod == self.rem

    def first_owned(self, start: int) -> int:
        """The first index >= `start` this shard owns; the next ones follow every `mod` indices."""
        return start + (self.rem - start) % self.mod


SLURM_COUNT, SLURM_ID, SLURM_MIN = "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN"


def slurm_shard(env: Mapping[str, str], flags: str = "--shard-mod/--shard-rem") -> Shard | None:
    """Shard(SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) in a SLURM array job, else None;
    ConfigError for values that are not one task of the array, naming the `flags` that set it instead."""
    if not env.get(SLURM_COUNT) or not env.get(SLURM_ID):
        return None
    try:
        count, task, low = int(env[SLURM_COUNT]), int(env[SLURM_ID]), int(env.get(SLURM_MIN) or 0)
    except ValueError:
        raise ConfigError(f"{SLURM_COUNT}={env[SLURM_COUNT]!r}, {SLURM_ID}={env[SLURM_ID]!r}: not integers") from None
    if not 0 <= task - low < count:
        raise ConfigError(f"{SLURM_ID}={task} is not within {low}..{low + count - 1} ({SLURM_MIN}, {SLURM_COUNT}): "
                          f"give {flags} instead")
    return Shard(count, task - low)
