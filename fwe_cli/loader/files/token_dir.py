"""A token directory (`fwe tokenize`'s output) read directly: memory-mapped llm.c shards, no tokenizer.

A token directory holds shards `fineweb_train_NNNNNN.bin` with their document indexes (files.token_shards)
and a `manifest.json`: {"format": "fwe-tokens/1", "tokenizer", "vocab_hash", "vocab_size", "eot", "version",
"shards": [{"name", "tokens", "documents", "sha256", "bytes"}], "complete"}.

The text path's token stream is, per document, ids(doc) + [eos]. In a shard every document is preceded by eot, so
for consecutive documents i..j-1 that stream is tokens[off[i]+1 : off[j]] + [eos]: the next document's leading eot
is the previous one's trailing eos. `read_token_docs` yields Documents whose `ids` are views into the shard (the
dealing and shuffle code is the text path's, a document anchored where its tokens begin); `read_token_chunks` serves
a stream read unshuffled as one slice + one eos per chunk of many documents, with the same resume positions.

Positions: `TokenPosition` (the shard's number in the listing, documents of that shard read).

`--local-path` may also name the bootstrap a token directory was made from (`fwe bootstrap --tokenize T` writes
OUT/tokens/): with --tokenizer T, and while those shards are complete and made from the bootstrap as it is now, the
shards are read instead of the text (the batches are the same) and a note says so.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from fwe_cli.errors import ConfigError, FweNotice, InputError
from fwe_cli.loader.documents import Document, PlaceName
from fwe_cli.loader.files.listing import no_text, resolve_files
from fwe_cli.loader.files.text import LocalPath
from fwe_cli.loader.files.token_manifest import bootstrap_tokens, resolve_shards, shard_tokens, token_manifest
from fwe_cli.loader.files.token_shards import HEADER_BYTES, TOKENS_FORMAT, ShardFormatError, read_shard
from fwe_cli.loader.sources.order import leaf_chunks
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.units import Piece, Unit
from fwe_cli.loader.tokenization.pretokenized import ShardTokens


@dataclass(frozen=True, slots=True)
class TokenPosition(Position, name="token_shard", version=2):
    """Just after document `document` (counted from 1) of shard `file` (its number in the listing)."""

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


class _Shards:
    """The shards read so far, memory-mapped (each opened once), with where each document's tokens begin in its file
    (its anchor, sources.units)."""

    def __init__(self, files: list[str], tokens: ShardTokens):
        self.files, self.counts = files, _counts(files, tokens)
        self._open: dict[int, tuple] = {}

    def __getitem__(self, number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tokens, offsets with the end appended, each document's anchor in bytes) of shard `number`."""
        if number not in self._open:
            data, offsets = _open(self.files[number], self.counts[number])
            self._open = {number: (data, offsets, HEADER_BYTES + offsets[:-1] * data.dtype.itemsize)}
        return self._open[number]

    def documents(self, piece: Piece, at: TokenPosition | None) -> tuple[int, int]:
        """The documents [first, end) of the piece's shard anchored in it, after `at` (of that shard) when given."""
        anchors = self[piece.file][2]
        first = int(np.searchsorted(anchors, piece.lo, side="left"))
        end = int(np.searchsorted(anchors, piece.hi, side="left"))
        return (max(first, at.document) if at is not None and at.file == piece.file else first), end


def read_token_docs(shards: _Shards, pieces: list[Piece],
                    at: TokenPosition | None) -> Iterator[tuple[Document, TokenPosition, int]]:
    """(document, position after it, its anchor on the line) for the documents of `pieces`, those of the first
    piece's shard after `at`; a document's `ids` are a view into its memory-mapped shard (no copy)."""
    for number, piece in enumerate(pieces):
        data, offsets, anchors = shards[piece.file]
        path = shards.files[piece.file]
        first, end = shards.documents(piece, at if number == 0 else None)
        for i in range(first, end):
            yield Document(text="", id=PlaceName(f"{path}#{i}"), ids=data[offsets[i] + 1:offsets[i + 1]]), \
                TokenPosition(piece.file, i + 1), piece.on_line(int(anchors[i]))


def read_token_chunks(shards: _Shards, pieces: list[Piece], at: TokenPosition | None, eos: int,
                      sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, Callable]]:
    """(ids, each document's tokens, each one's anchor on the line, its position after it by number) per chunk of
    consecutive documents of `pieces` (from `at`, as read_token_docs): ids = one slice of the shard + one eos,
    int32. Chunks end at document boundaries, each about `next(sizes)` tokens (one document at least)."""
    for number, piece in enumerate(pieces):
        data, offsets, anchors = shards[piece.file]
        i, end = shards.documents(piece, at if number == 0 else None)
        while i < end:
            j = int(np.searchsorted(offsets, offsets[i] + next(sizes), side="right")) - 1
            j = min(max(j, i + 1), end)
            lo, hi = int(offsets[i]) + 1, int(offsets[j])
            ids = np.empty(hi - lo + 1, dtype=np.int32)
            ids[:-1] = data[lo:hi]
            ids[-1] = eos
            yield ids, np.diff(offsets[i:j + 1]), piece.line + anchors[i:j] - piece.lo, \
                (lambda k, i=i, file=piece.file: TokenPosition(file, i + k + 1))
            i = j


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
        if made_from != parts.fingerprint() or not shard_tokens(tokens_dir, manifest).matches(options.tokenizer):
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
            tokens = shard_tokens(self.path, token_manifest(self.path) or {})
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

    def units(self) -> list[Unit]:
        return [Unit(number, 0, os.path.getsize(path)) for number, path in enumerate(self.files)]

    def _shards(self) -> _Shards:
        if self.__dict__.get("_read") is None:
            self._read = _Shards(self.files, self.pretokenized())
        return self._read

    def read(self, pieces: list[Piece], at: TokenPosition | None) -> Iterator[tuple[Document, TokenPosition, int]]:
        return read_token_docs(self._shards(), pieces, at)

    def token_chunks(self, order, start, sizes: Iterator[int]):
        """The reader's documents read unshuffled, in chunks (sources.order.leaf_chunks)."""
        eos = self.pretokenized().eos_id
        return leaf_chunks(self, order, start, lambda pieces, at: read_token_chunks(self._shards(), pieces, at, eos,
                                                                                    sizes))

    def describe(self) -> dict:
        moved = self.path != self.spec.options.local_path
        return dict(super().describe(), format=TOKENS_FORMAT, **({"read_from": self.path} if moved else {}))

    def records(self, shard, start=None, all_fields=False, bad=None):
        raise no_text(self.path)
