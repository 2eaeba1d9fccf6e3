"""Which reader a loader is (`Shard`: reader `rem` of `mod`, a rank or a rank x DataLoader worker, whose share of the
data sources.deal deals), where a launcher says so (`rank_from_env`: torchrun's or SLURM's variables), and a SLURM
array task's place in its array (`slurm_shard`: what `fwe bootstrap` and `fwe tokenize` split their work by)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.limits import check_limit


@dataclass(frozen=True)
class Shard:
    """A reader among readers: the loader's share is dealt by (mod, rem) (sources.deal); `fwe bootstrap`'s records
    are split by document index, record i the shard's when i % mod == rem (`owns`)."""

    mod: int = 1
    """How many readers (the data-parallel world size, times DataLoader workers)."""
    rem: int = 0
    """Which of them this is, 0 <= rem < mod (the data-parallel rank, or rank x workers + worker)."""

    def __post_init__(self) -> None:
        check_limit("shard_mod", self.mod, "shard mod")
        if not isinstance(self.rem, int) or not 0 <= self.rem < self.mod:
            raise SettingError(lambda n: f"{n('shard_rem')} must be an integer from 0 to {self.mod - 1} (one of "
                                         f"{n('shard_mod')} {self.mod} shards), got {self.rem!r}")

    def owns(self, index: int) -> bool:
        """Whether record `index` of the whole stream (every shard counted) belongs to this shard (fwe bootstrap)."""
        return index % self.mod == self.rem

    def first_owned(self, start: int) -> int:
        """The first index >= `start` this shard owns; the next ones follow every `mod` indices."""
        return start + (self.rem - start) % self.mod


# The launchers' per-process (rank, world size) variables, read when no --shard-mod/--shard-rem is given; first
# pair set wins: torchrun's are per process while SLURM_PROCID is per task (torchrun inside a SLURM job). No
# NSA_FWE_* variable sets the shard, so only the flags (shard_from 'flags') beat these.
RANK_VARS: dict[str, tuple[str, str]] = {"torchrun": ("RANK", "WORLD_SIZE"), "slurm": ("SLURM_PROCID", "SLURM_NTASKS")}


def rank_from_env(env: Mapping[str, str]) -> tuple[str, Shard] | None:
    """(launcher, Shard(world size, rank)) from the first pair of RANK_VARS with either variable set, else None.

    A blank variable counts as unset; one of a pair alone, a non-integer, a world size out of range or a rank not
    below it is a ConfigError naming both variables and what they hold."""
    for launcher, (rank_var, size_var) in RANK_VARS.items():
        raw_rank, raw_size = (env.get(var, "").strip() for var in (rank_var, size_var))
        if not raw_rank and not raw_size:
            continue
        held = f"{rank_var}={env.get(rank_var)!r}, {size_var}={env.get(size_var)!r}"
        if not raw_rank or not raw_size:
            raise ConfigError(f"{launcher} shard needs both {rank_var} and {size_var} set, got {held}")
        try:
            rank, size = int(raw_rank), int(raw_size)
        except ValueError:
            raise ConfigError(f"{rank_var} and {size_var} must be integers, got {held}") from None
        check_limit("shard_mod", size, size_var, f"{raw_size!r} ({held})")
        if not 0 <= rank < size:
            raise ConfigError(f"{rank_var} must be from 0 to {size_var} - 1, got {held}")
        return launcher, Shard(size, rank)
    return None


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
