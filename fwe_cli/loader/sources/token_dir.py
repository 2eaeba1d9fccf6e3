"""A token directory (`fwe tokenize`'s output) read directly: memory-mapped llm.c shards, no tokenizer.

A token directory holds shards `fineweb_train_NNNNNN.bin` with their document indexes (fwe_cli.loader.sources.token_shards)
and a `manifest.json`: {"format": "fwe-tokens/1", "tokenizer", "vocab_hash", "vocab_size", "eot", "version",
"shards": [{"name", "tokens", "documents", "sha256", "bytes"}], "complete"}.

The text path's token stream is, per document, ids(doc) + [eos]. In a shard every document is preceded by eot, so
for consecutive documents i..j-1 that stream is tokens[off[i]+1 : off[j]] + [eos]: the next document's leading eot
is the previous one's trailing eos. `iter_token_docs` yields Documents whose `ids` are views into the shard (the
order/shard/shuffle code is the text path's); `iter_token_chunks` serves a stream read in order (one shard, no
shuffle) as one slice + one eos per chunk of many documents, with the same resume positions.

Positions: (file number in the epoch's order, documents of that file read).

`--local-path` may also name the bootstrap a token directory was made from (`fwe bootstrap --tokenize T` writes
OUT/tokens/): with --tokenizer T, and while those shards are complete and made from the bootstrap as it is now, the
shards are read instead of the text (the batches are the same) and a note says so.
"""

from __future__ import annotations

import os
import warnings
from typing import Iterator

import numpy as np

from fwe_cli.errors import ConfigError, FweNotice, InputError, SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.base import Order
from fwe_cli.loader.sources.file_sources import LocalPath
from fwe_cli.loader.sources.local_files import (
    MANIFEST_NAME, bootstrap_manifest_path, check_regular_file, manifest_problem, no_text, read_manifest,
    resolve_files,
)
from fwe_cli.loader.sources.token_shards import (
    INDEX_SUFFIX, TOKENS_FORMAT, ShardFormatError, read_header, read_shard,
)
from fwe_cli.loader.tokenization.names import same_name
from fwe_cli.output.verify import listed_file_problems

BACKEND = "token-shards"
BOOTSTRAP_TOKENS = "tokens"  # OUT/tokens/ beside a bootstrap's parts (OUT.tokens/ beside a single-file bootstrap)


def token_manifest(path: str | None) -> dict | None:
    """The parsed manifest when `path` is a token directory (a manifest whose format is TOKENS_FORMAT), else None.
    A manifest that cannot be read beside token shards is the token directory's, damaged: SourceError naming it."""
    if not path or not os.path.isfile(os.path.join(path, MANIFEST_NAME)):
        return None
    try:
        manifest = read_manifest(path, "token manifest")
    except SourceError:
        if any(name.endswith(INDEX_SUFFIX) for name in os.listdir(path)):
            raise
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == TOKENS_FORMAT else None


def bootstrap_tokens(path: str) -> str | None:
    """The token directory `fwe bootstrap --tokenize` made beside the bootstrap at `path`, if there is one."""
    if bootstrap_manifest_path(path) is None:
        return None
    tokens = os.path.join(path, BOOTSTRAP_TOKENS) if os.path.isdir(path) else f"{path}.{BOOTSTRAP_TOKENS}"
    return tokens if os.path.isdir(tokens) else None


def recorded_tokenizer(manifest: dict) -> str | None:
    """The --tokenizer the shards were made with, as `fwe tokenize` records it ({"tokenizer": {"name": ...}})."""
    entry = manifest.get("tokenizer")
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) and name else None


class ShardTokens:
    """What the pipeline needs of a tokenizer, from a token directory's manifest: nothing is loaded or parsed."""

    backend = BACKEND
    backend_reason = "pre-tokenized shards: no tokenizer loaded"
    source = "manifest"
    check_s = None

    def __init__(self, path: str, manifest: dict):
        problem = _shape_problem(manifest)
        if problem:
            raise SourceError(f"{os.path.join(path, MANIFEST_NAME)} is not a token directory manifest ({problem})")
        self.path = path
        self.manifest = manifest
        self.name = recorded_tokenizer(manifest)
        self.vocab_size = manifest["vocab_size"]
        self.eos_id = manifest["eot"]

    def matches(self, tokenizer: str) -> bool:
        """Whether `tokenizer` gives the ids the shards hold: the same vocabulary hash (a tokenizer.json's model,
        merges, added tokens, normalizer and pre-tokenizer: GPT-2 built offline and the Hub's are the same), or, for
        a manifest that records none, the same name or file."""
        recorded = self.manifest["tokenizer"].get("vocab_hash")
        if isinstance(recorded, str):
            from fwe_cli.loader.tokenization.doc_tokenizer import tokenizer_vocabulary_hash

            return tokenizer_vocabulary_hash(tokenizer) == recorded
        if same_name(tokenizer, self.name):
            return True
        return os.path.exists(tokenizer) and os.path.exists(self.name) and os.path.samefile(tokenizer, self.name)

    def check(self, tokenizer: str) -> None:
        """ConfigError (one line, naming both) unless `tokenizer` is the one the shards were made with."""
        if not self.matches(tokenizer):
            raise ConfigError(f"{self.path} was tokenized with {self.name!r}, not --tokenizer {tokenizer!r}: pass "
                              f"--tokenizer {self.name}, or tokenize the text again with {tokenizer!r}")


def _shape_problem(manifest: dict) -> str | None:
    for key in ("vocab_size", "eot", "version"):
        if not isinstance(manifest.get(key), int) or isinstance(manifest.get(key), bool):
            return f"no integer {key!r}"
    if recorded_tokenizer(manifest) is None or not isinstance(manifest.get("shards"), list):
        return "no 'tokenizer' name or 'shards'"
    if not all(isinstance(e, dict) and isinstance(e.get("documents"), int) for e in manifest["shards"]):
        return "a shard without a document count"
    indexes = [{"name": e["index"], "bytes": e.get("index_bytes", 0)} for e in manifest["shards"] if "index" in e]
    return manifest_problem({"files": manifest["shards"]}) or manifest_problem({"files": indexes})


def resolve_shards(tokens: ShardTokens, allow_partial: bool = False, verify_parts: bool = False) -> list[str]:
    """The shard paths of a token directory, checked as a bootstrap's parts are: refused when incomplete (unless
    `allow_partial`), each shard a regular file of the size its manifest records (and, with `verify_parts`, the
    sha256), its header of the manifest's version and token count, its index of the recorded size and sha256;
    InputError naming a shard (or index) that differs."""
    path, manifest = tokens.path, tokens.manifest
    if not manifest.get("complete") and not allow_partial:
        raise SourceError(f"token directory {path} is incomplete (manifest says complete=false): finish it by "
                          "re-running `fwe tokenize` with the same arguments, or pass --allow-partial to read what "
                          "is there")
    listed = {"files": manifest["shards"]}
    if verify_parts and not all(isinstance(e.get("sha256"), str) for e in manifest["shards"]):
        raise SourceError(f"{os.path.join(path, MANIFEST_NAME)} records no sha256 for some shards: they cannot be "
                          "verified")
    files = [os.path.join(path, entry["name"]) for entry in manifest["shards"]]
    # an index is small (8 bytes a document): its recorded sha256 is checked always, a shard's with verify_parts
    indexes = {"files": [{"name": e["index"], "bytes": e["index_bytes"], "sha256": e.get("index_sha256")}
                         for e in manifest["shards"] if isinstance(e.get("index"), str)
                         and isinstance(e.get("index_bytes"), int) and isinstance(e.get("index_sha256"), str)]}
    problems = listed_file_problems(path, listed, rehash=verify_parts) + listed_file_problems(path, indexes, True)
    if problems:
        named = "; ".join(f"{os.path.join(path, p['name'])}: {p['problem']}" for p in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise InputError(f"token directory {path} changed after it was written: {named}{more}; tokenize it again")
    for file, entry in zip(files, manifest["shards"]):
        check_regular_file(file)
        _check_header(file, manifest["version"], entry.get("tokens"))
    if not files:
        raise SourceError(f"token directory {path} holds no shards")
    return files


def _check_header(path: str, version: int, tokens: int | None) -> None:
    """InputError naming the shard unless its 1 KiB header is one of the manifest's version and token count (read
    for every shard as the directory opens: a damaged shard late in the stream fails the start, not step 10,000)."""
    try:
        found, count = read_header(path)
    except ShardFormatError as exc:
        raise InputError(f"{exc}; tokenize it again") from exc
    if found != version or (tokens is not None and count != tokens):
        raise InputError(f"{path}: its header says version {found} and {count} tokens, the manifest version {version} "
                         f"and {tokens} tokens; tokenize it again")


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
                    start: tuple | None = None) -> Iterator[tuple[Document, tuple]]:
    """(document, position after it) for every document of the shards `files` in order, from `start`; a
    document's `ids` are a view into its memory-mapped shard (no copy)."""
    first, skip = start or (0, 0)
    for number, count in enumerate(_counts(files, tokens)):
        if number < first:
            continue
        data, offsets = _open(files[number], count)
        path = files[number]
        for i in range(skip if number == first else 0, count):
            yield Document(text="", id=f"{path}#{i}", ids=data[offsets[i] + 1:offsets[i + 1]]), (number, i + 1)


def iter_token_chunks(files: list[str], tokens: ShardTokens, epoch: int, start: dict | None,
                      sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, dict, np.ndarray]]:
    """(ids, the first document's `resume`, each document's tokens) per chunk of consecutive documents of one epoch
    read in order (one shard, no shuffle): ids = one slice of the shard + one eos, int32. Chunks end at document
    boundaries, each about `next(sizes)` tokens (one document at least); `resume` is what sources.order gives that
    document."""
    at = (start or {}).get("at")
    at = tuple(at) if at is not None else None
    first, skip = at or (0, 0)
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
            index, at, i = index + j - i, (number, j), j


class TokenDir(LocalPath):
    """A token directory (or the bootstrap it was made from, see the module docstring): documents are views into
    its shards; the pipeline's tokenizer is its manifest (`pretokenized`), and none is loaded."""

    reads_tokens = True

    @classmethod
    def found(cls, spec, options) -> "TokenDir | None":
        if token_manifest(spec.local_path) is not None:
            return cls(spec, options, spec.local_path)
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
        tokens_dir = bootstrap_tokens(spec.local_path) if options.tokenizer else None
        manifest = token_manifest(tokens_dir) if tokens_dir else None
        if manifest is None or not manifest.get("complete"):
            return None
        parts = LocalPath(spec, options)
        parts.files = resolve_files(spec.local_path, allow_partial=options.allow_partial)
        made_from = (manifest.get("source") or {}).get("files")
        if made_from != parts.fingerprint() or not ShardTokens(tokens_dir, manifest).matches(options.tokenizer):
            return None
        return tokens_dir

    def __init__(self, spec, options, path: str | None = None):
        super().__init__(spec, options)
        self.path = path or spec.local_path
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
        return resolve_shards(self.pretokenized(), self.options.allow_partial, self.options.verify_parts)

    def documents(self, epoch: int, at: tuple | None, order: Order) -> Iterator[tuple[Document, tuple]]:
        return iter_token_docs(order(self.files, epoch), self.pretokenized(), at)

    def token_chunks(self, epoch: int, start: dict | None,
                     sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, dict, np.ndarray]]:
        """The epoch read in order (one shard, no shuffle): see `iter_token_chunks`."""
        return iter_token_chunks(self.files, self.pretokenized(), epoch, start, sizes)

    def describe(self) -> dict:
        moved = self.path != self.spec.local_path
        return dict(super().describe(), format=TOKENS_FORMAT, **({"read_from": self.path} if moved else {}))

    def records(self, shard, start=None, all_fields=False, bad=None):
        raise no_text(self.path)
