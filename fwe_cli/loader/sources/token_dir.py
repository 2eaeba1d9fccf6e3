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
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from fwe_cli.errors import ConfigError, InputError, SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.local_files import MANIFEST_NAME, check_regular_file, manifest_problem, read_manifest
from fwe_cli.loader.sources.token_shards import ShardFormatError, read_shard
from fwe_cli.output.verify import listed_file_problems

FORMAT = "fwe-tokens/1"
BACKEND = "token-shards"


def token_manifest(path: str | None) -> dict | None:
    """The parsed manifest when `path` is a token directory (a manifest whose format is FORMAT), else None."""
    if not path or not os.path.isfile(os.path.join(path, MANIFEST_NAME)):
        return None
    try:
        manifest = read_manifest(path)
    except SourceError:
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == FORMAT else None


def recorded_tokenizer(manifest: dict) -> str | None:
    """The --tokenizer the shards were made with, as `fwe tokenize` records it ({"tokenizer": {"name": ...}})."""
    entry = manifest.get("tokenizer")
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) and name else None


def same_tokenizer(given: str, recorded: str) -> bool:
    """Whether a --tokenizer names the one a token directory was made with (a Hub alias, or the same file)."""
    from fwe_cli.loader.tokenization.doc_tokenizer import HUB_ALIASES  # no tokenizers import: a plain dict

    if HUB_ALIASES.get(given, given) == HUB_ALIASES.get(recorded, recorded):
        return True
    return os.path.exists(given) and os.path.exists(recorded) and os.path.samefile(given, recorded)


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

    def check(self, tokenizer: str) -> None:
        """ConfigError (one line, naming both) unless `tokenizer` is the one the shards were made with."""
        if not same_tokenizer(tokenizer, self.name):
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
    return manifest_problem({"files": manifest["shards"]})


def resolve_shards(tokens: ShardTokens, allow_partial: bool = False, verify_parts: bool = False) -> list[str]:
    """The shard paths of a token directory, checked as a bootstrap's parts are: refused when incomplete (unless
    `allow_partial`), each shard a regular file of the size its manifest records (and, with `verify_parts`, the
    sha256); InputError naming a shard that differs."""
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
    problems = listed_file_problems(path, listed, rehash=verify_parts)
    if problems:
        named = "; ".join(f"{os.path.join(path, p['name'])}: {p['problem']}" for p in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise InputError(f"token directory {path} changed after it was written: {named}{more}; tokenize it again")
    for file in files:
        check_regular_file(file)
    if not files:
        raise SourceError(f"token directory {path} holds no shards")
    return files


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
                      sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, dict, int]]:
    """(ids, the first document's `resume`, documents) per chunk of consecutive documents of one epoch read in order
    (one shard, no shuffle): ids = one slice of the shard + one eos, int32. Chunks end at document boundaries, each
    about `next(sizes)` tokens (one document at least); `resume` is what sources.order gives that document."""
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
            yield ids, {"epoch": epoch, "index": index, "at": at, "k": 0}, j - i
            index, at, i = index + j - i, (number, j), j
