"""Taking a reader's state while its loader runs: the one place a State is built (state.model), cheaply, so a
trainer can take one at every step. What cannot change while a stream runs (the settings a position is matched by,
the files' summary, the plan it was dealt) is put in its JSON form once; each step adds a few small values, and each
position is encoded once (the document batch a batch begins in is usually the previous batch's).

The state holds, beside the last batch's position, the document that batch ended in (`ended`, from the pipeline's
recent batches), and with best-fit rows the stretch of the stream its buffer held (`held`: from its oldest document,
the documents read since, those taken), the batch's end being the last document read: what a change of world deals
again (state.elastic).
"""

from __future__ import annotations

from typing import Protocol

import orjson

from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.sources.deal import Ended
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.state.model import AT, DONE, FRESH, State

MEMO = 8  # positions whose JSON is kept (identity -> JSON)


class Stream(Protocol):
    """What a state is taken from of a reader's stream (stream.DocumentStream)."""

    plan: Position | None
    olds: list | None

    def identity(self) -> tuple[dict, dict | None]: ...

    def tokenizer(self) -> str: ...


class Recent(Protocol):
    """What a state is taken from of the batches the pipeline made (pipeline.recent.RecentBatches)."""

    def ended(self, position: dict | None) -> Ended | None: ...

    def after(self, position: dict | None, n: int) -> Ended | None: ...


def matching(config: LoaderConfig, tokenizer: str | None, pinned: dict) -> dict:
    """The settings a state's position only means something under, as JSON: the tokenizer, the batch's shape and
    layout, the shuffle, the packing, the epochs and the source tree as it pins itself (a Hub branch's commit)."""
    shape = {"tokenizer": tokenizer, "seq_len": config.seq_len, "batch_size": config.batch_size,
             "shuffle_seed": config.shuffle_seed,
             "shuffle_window": config.shuffle_window if config.shuffle_seed is not None else None,
             "bos": config.bos, "labels": config.labels, "pack": config.pack,
             "pack_buffer": config.pack_buffer if config.pack == "best-fit" else None, "epochs": config.epochs,
             "source": pinned}
    return orjson.loads(orjson.dumps(shape))


class Taker:
    """Takes the states of one loader's stream; `ended` and `held` are a resumed state's until a batch of its own."""

    def __init__(self, config: LoaderConfig, resumed: State | None = None):
        self.config = config
        self._ended = resumed.ended if resumed is not None else None
        self._held = resumed.held if resumed is not None else None
        self._identity: tuple | None = None
        self._fixed: tuple[dict, dict | None] | None = None
        self._memo: dict[int, tuple[Position, dict]] = {}

    def take(self, stream: Stream, recent: Recent, position: dict | None, batches: int,
             done: bool = False) -> State:
        """The state after `batches` batches, the last one's `position` (None: none yet), its stream ended or not."""
        identity = stream.identity()
        if identity is not self._identity:  # once the source has opened, the same tuple every time
            self._identity = identity
            pinned, files = identity
            self._fixed = (matching(self.config, stream.tokenizer(), pinned),
                           orjson.loads(orjson.dumps(files)) if files is not None else None)
        settings, files = self._fixed
        saved = ended = held = None
        if position is not None:
            saved = {"doc": self._json(position["doc"]), "skip": position["skip"]}
            if "pack" in position:
                saved["pack"] = position["pack"]
            ended, held = self._end(recent, position)
        plan = self._json(stream.plan)
        olds = [self._json(old) for old in stream.olds] if stream.olds is not None else None
        status = DONE if done else AT if position is not None else FRESH
        return State(self.config.shard, self.config.epoch, status, batches, settings,
                     files if position is not None else None, saved, ended, held, plan, olds)

    def _end(self, recent: Recent, position: dict) -> tuple[list | None, dict | None]:
        """(`ended`, `held`) of the batch at `position` (see the module docstring), a resumed state's while the
        pipeline holds nothing of it."""
        first = recent.ended(position)
        if first is None:
            return self._ended, self._held
        mark = position.get("pack")
        if mark is None or not mark["read"]:  # no buffer, or one that holds nothing: the batch ended in `first`
            self._ended, self._held = [self._json(first.cursor), first.delivered, first.tokens], None
            return self._ended, None
        last = recent.after(position, mark["read"] - 1)
        if last is None:
            return self._ended, self._held
        self._ended = [self._json(last.cursor), last.tokens, last.tokens]
        self._held = {"from": self._json(first.cursor), "read": mark["read"], "taken": mark["taken"]}
        return self._ended, self._held

    def _json(self, position: Position | None) -> dict | None:
        """`position.to_json()`, kept for the last few positions encoded."""
        if position is None:
            return None
        hit = self._memo.get(id(position))
        if hit is not None and hit[0] is position:
            return hit[1]
        if len(self._memo) >= MEMO:
            self._memo.clear()
        data = position.to_json()
        self._memo[id(position)] = (position, data)
        return data
