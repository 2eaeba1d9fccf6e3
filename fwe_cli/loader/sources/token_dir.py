"""A token directory (`fwe tokenize`'s output) read directly: memory-mapped llm.c shards, no tokenizer.

A token directory holds shards `fineweb_train_NNNNNN.bin` with their document indexes (fwe_cli.loader.sources.token_shards)
and a `manifest.json`: {"format": "fwe-tokens/1", "tokenizer", "vocab_hash", "vocab_size", "eot", "version",
"shards": [{"name", "tokens", "documents", "sha256", "bytes"}], "complete"}.

The text path's token stream is, per document, ids(doc) + [eos]. In a shard every document is preceded by eot, so
for consecutive documents i..j-1 that stream is tokens[off[i]+1 : off[j]] + [eos]: the next document's leading eot
is the previous one's trailing eos. `iter_token_docs` yields Documents whose `ids` are views into the shard (the
order/shard/shuffle code is the text path's); `iter_token_chunks` serves a stream read in order (one shard, no
shuffle) as one slice + one eos per chunk of many documents, with the same resume positions.

Positions: `TokenPosition` (the shard's number in the epoch's order, documents of that shard read).

`--local-path` may also name the bootstrap a token directory was made from (`fwe bootstrap --tokenize T` writes
OUT/tokens/): with --tokenizer T, and while those shards are complete and made from the bootstrap as it is now, the
shards are read instead of the text (the batches are the same) and a note says so.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from fwe_cli.errors import ConfigError, FweNotice, InputError
from fwe_cli.loader.documents import Document, PlaceName
from fwe_cli.loader.sources.base import Order
from fwe_cli.loader.sources.file_sources import LocalPath
from fwe_cli.loader.sources.local_files import no_text, resolve_files
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.token_manifest import ShardTokens, bootstrap_tokens, resolve_shards, token_manifest
from fwe_cli.loader.sources.token_shards import TOKENS_FORMAT, ShardFormatError, read_shard


@dataclass(frozen=True, slots=True)
class TokenPosition(Position, name="token_shard"):
    """Just after document `document` (counted from 1) of shard `file` (its place in the epoch's order)."""

    file: int
    document: int


def _open(path: str, documents: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, offsets with the end appended) of a shard, memory-mapped; InputError naming it when damaged."""
    try:
        tokens, offsets = read_shard(path)
    except ShardFormatError as exc:
        raise InputError(f"{exc}; tokenize it again") from exc
    if len(offsets) != documents:
        raise InputError(f"{path}: its index lists {len(offsets)} documents, the manifest {documents}; tokenize it "
                         "again")
    return tokens, np.append(np.asarray(offsets, dtype=np.int64), len(tokens))


def _counts(files: list[str], tokens: ShardTokens) -> list[int]:
    by_name = {e["name"]: e["documents"] for e in tokens.manifest["shards"]}
    return [by_name[os.path.basename(f)] for f in files]


def iter_token_docs(files: list[str], tokens: ShardTokens,
                    start: TokenPosition | None = None) -> Iterator[tuple[Document, TokenPosition]]:
    """(document, position after it) for every document of the shards `files` in order, from `start`; a
    document's `ids` are a view into its memory-mapped shard (no copy)."""
    first, skip = (start.file, start.document) if start is not None else (0, 0)
    for number, count in enumerate(_counts(files, tokens)):
        if number < first:
            continue
        data, offsets = _open(files[number], count)
        path = files[number]
        for i in range(skip if number == first else 0, count):
            yield Document(text="", id=PlaceName(f"{path}#{i}"), ids=data[offsets[i] + 1:offsets[i + 1]]), \
                TokenPosition(number, i + 1)


def iter_token_chunks(files: list[str], tokens: ShardTokens, epoch: int, start: dict | None,
                      sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, dict, np.ndarray]]:
    """(ids, the first document's `resume`, each document's tokens) per chunk of consecutive documents of one epoch
    read in order (one shard, no shuffle): ids = one slice of the shard + one eos, int32. Chunks end at document
    boundaries, each about `next(sizes)` tokens (one document at least); `resume` is what sources.order gives that
    document."""
    at = (start or {}).get("at")
    first, skip = (at.file, at.document) if at is not None else (0, 0)
    index = int((start or {}).get("index", 0))
    eos = tokens.eos_id
    for number, count in enumerate(_counts(files, tokens)):
        if number < first:
            continue
        data, offsets = _open(files[number], count)
        i = skip if number == first else 0
        while i < count:
            j = int(np.searchsorted(offsets, offsets[i] + next(sizes), side="right")) - 1
            j = min(max(j, i + 1), count)
            lo, hi = int(offsets[i]) + 1, int(offsets[j])
            ids = np.empty(hi - lo + 1, dtype=np.int32)
            ids[:-1] = data[lo:hi]
            ids[-1] = eos
            yield ids, {"epoch": epoch, "index": index, "at": at, "k": 0}, np.diff(offsets[i:j + 1])
            index, at, i = index + j - i, TokenPosition(number, j), j


class TokenDir(LocalPath):
    """A token directory (or the bootstrap it was made from, see the module docstring): documents are views into
    its shards; the pipeline's tokenizer is its manifest (`pretokenized`), and none is loaded."""

    reads_tokens = True
    position_type = TokenPosition

    @classmethod
    def reader_for(cls, spec, options) -> "TokenDir | None":
        if token_manifest(spec.options.local_path) is not None:
            return cls(spec, options, spec.options.local_path)
        tokens_dir = cls._fresh_tokens(spec, options)
        if tokens_dir is None:
            return None
        warnings.warn(f"fwe: reading {tokens_dir}, the token shards made from this bootstrap with --tokenizer "
                      f"{options.tokenizer}: no tokenizer runs, and the batches are the text's", FweNotice,
                      stacklevel=2)
        return cls(spec, options, tokens_dir)

    @classmethod
    def _fresh_tokens(cls, spec, options) -> str | None:
        """The bootstrap's tokens/ when --tokenizer is the one they were made with and they are complete and made
        from the bootstrap's parts as they are now (a bootstrap extended since holds documents they lack)."""
        if spec.options.where is not None:  # a filtered bootstrap is read as text: its tokens hold every document
            return None
        tokens_dir = bootstrap_tokens(spec.options.local_path) if options.tokenizer else None
        manifest = token_manifest(tokens_dir) if tokens_dir else None
        if manifest is None or not manifest.get("complete"):
            return None
        parts = LocalPath(spec, options)
        parts.files = resolve_files(spec.options.local_path, allow_partial=options.allow_partial)
        made_from = (manifest.get("source") or {}).get("files")
        if made_from != parts.fingerprint() or not ShardTokens(tokens_dir, manifest).matches(options.tokenizer):
            return None
        return tokens_dir

    def __init__(self, spec, options, path: str | None = None):
        super().__init__(spec, options)
        self.path = path or spec.options.local_path
        """The token directory read: --local-path, or the tokens/ of the bootstrap it names."""
        self.tokens: ShardTokens | None = None

    def pretokenized(self) -> ShardTokens:
        """The manifest's eos id and vocab size, after checking that --tokenizer (when given) made the shards."""
        if self.tokens is None:
            tokens = ShardTokens(self.path, token_manifest(self.path) or {})
            if self.options.tokenizer is not None:
                tokens.check(self.options.tokenizer)
            self.tokens = tokens
        return self.tokens

    def default_tokenizer(self) -> str:
        return self.pretokenized().name

    def list_files(self) -> list[str]:
        if self.where is not None:
            raise ConfigError(f"--where filters records by their fields; {self.path} is a token directory (token ids, "
                              "no fields): filter the text it was made from, or drop --where")
        return resolve_shards(self.pretokenized(), self.options.allow_partial, self.options.verify_parts)

    def documents(self, epoch: int, at: TokenPosition | None,
                  order: Order) -> Iterator[tuple[Document, TokenPosition]]:
        return iter_token_docs(order(self.files, epoch), self.pretokenized(), at)

    def token_chunks(self, epoch: int, start: dict | None,
                     sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, dict, np.ndarray]]:
        """The epoch read in order (one shard, no shuffle): see `iter_token_chunks`."""
        return iter_token_chunks(self.files, self.pretokenized(), epoch, start, sizes)

    def describe(self) -> dict:
        moved = self.path != self.spec.options.local_path
        return dict(super().describe(), format=TOKENS_FORMAT, **({"read_from": self.path} if moved else {}))

    def records(self, shard, start=None, all_fields=False, bad=None):
        raise no_text(self.path)
