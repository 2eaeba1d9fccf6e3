"""The document-level shard of a loader (data-parallel rank among world size)."""

from __future__ import annotations

from dataclasses import dataclass

from fwe_cli.errors import SettingError
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
