"""Where a token output's files live, its manifest, and what decides whether a re-run may resume it.

    OUT/manifest.json                    format "fwe-tokens/1": the record of truth (see runbooks/tokens.md)
    OUT/fineweb_train_000000.bin         shards, llm.c's names and format (fwe_cli/loader/files/token_shards.py)
    OUT/fineweb_train_000000.idx.npy     each shard's document index
    OUT/*.partial                        a shard or index being written (never read; removed by the next run)
    OUT/.fwe-tokens.lock                 held by the run writing OUT (fwe_cli/output/lock.py)
    OUT/tasks/00003-of-00016/            task 3 of 16 of a split run (fwe_cli/tokens/split.py): a token output of
                                         its own, whose shards the merge links into OUT (fwe_cli/tokens/merge.py)

A shard is listed in the manifest only once it and its index are whole, fsynced and renamed; the manifest is
replaced atomically after each shard (fwe_cli/output/manifest_file.py write_manifest) with the source position of
the next shard's first document, so a re-run continues from the last listed shard.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import ClassVar

from fwe_cli.loader.files.token_shards import INDEX_SUFFIX, TOKENS_FORMAT, dtype_for, version_for
from fwe_cli.loader.tokenization.names import BYTE, BYTE_DESCRIPTION, vocabulary_hash
from fwe_cli.output.kind import OutputKind
from fwe_cli.output.os_errors import on_output
from fwe_cli.output.verify import verify_output

MANIFEST_NAME = "manifest.json"
LOCK_NAME = ".fwe-tokens.lock"
TASKS_DIR = "tasks"  # the outputs of a split run's tasks, inside the output they merge into
SHARD_PREFIX = "fineweb_train_"
PARTIAL_SUFFIX = ".partial"
_OWN_RE = re.compile(rf"^{SHARD_PREFIX}(\d{{6,}})(\.bin|{re.escape(INDEX_SUFFIX)})({re.escape(PARTIAL_SUFFIX)})?$")


def _shards_problem(manifest: dict) -> str | None:
    """Why a token manifest's `shards` cannot be trusted (None when each names its shard and index and their sizes)."""
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not all(isinstance(s, dict) and isinstance(s.get("name"), str)
                                               and _OWN_RE.match(s["name"]) and isinstance(s.get("bytes"), int)
                                               and isinstance(s.get("index"), str) and _OWN_RE.match(s["index"])
                                               and isinstance(s.get("index_bytes"), int) for s in shards):
        return "its shards need a shard name and a byte count each"
    return None


def _listed_files(manifest: dict) -> list[dict]:
    """Every listed shard and its index, as {name, bytes, sha256}."""
    entries = []
    for shard in manifest["shards"]:
        entries.append({"name": shard["name"], "bytes": shard["bytes"], "sha256": shard.get("sha256")})
        entries.append({"name": shard["index"], "bytes": shard["index_bytes"], "sha256": shard.get("index_sha256")})
    return entries


TOKENS = OutputKind(format=TOKENS_FORMAT, what="token output", command="fwe tokenize", shape_problem=_shards_problem,
                    listed=_listed_files)


@dataclass(frozen=True)
class TokensLayout:
    """The paths of one token output (a directory; an fwe_cli.output OutputLayout)."""

    kind: ClassVar[OutputKind] = TOKENS
    out: str

    @classmethod
    def for_out(cls, out: str) -> "TokensLayout":
        return cls(out=os.path.abspath(out))

    @property
    def directory(self) -> str:
        return self.out

    @property
    def manifest_path(self) -> str:
        return os.path.join(self.out, MANIFEST_NAME)

    @property
    def lock_path(self) -> str:
        return os.path.join(self.out, LOCK_NAME)

    @staticmethod
    def shard_name(index: int) -> str:
        return f"{SHARD_PREFIX}{index:06d}.bin"

    def shard_path(self, index: int) -> str:
        return os.path.join(self.out, self.shard_name(index))

    def own_files(self) -> list[tuple[str, int | None]]:
        """(path, shard number or None for the manifest and its temporary) of every file of ours that exists."""
        found: list[tuple[str, int | None]] = []
        for path in (self.manifest_path, self.manifest_path + ".tmp"):
            if os.path.isfile(path):
                found.append((path, None))
        if os.path.isdir(self.out):
            with on_output("list", self.out):
                names = sorted(os.listdir(self.out))
            found += [(os.path.join(self.out, n), int(m.group(1))) for n in names if (m := _OWN_RE.match(n))]
        return found

    def has_foreign_files(self) -> bool:
        if not os.path.isdir(self.out):
            return False
        ours = {os.path.basename(path) for path, _ in self.own_files()} | {LOCK_NAME, TASKS_DIR}
        with on_output("list", self.out):
            return any(name not in ours for name in os.listdir(self.out))

    def stale_files(self, manifest: dict) -> list[str]:
        """Shards and indexes `manifest` does not list: temporary ones, or renamed after it was last written."""
        listed = {name for shard in manifest["shards"] for name in (shard["name"], shard["index"])}
        return [path for path, number in self.own_files()
                if number is not None and os.path.basename(path) not in listed]


def totals(shards: list[dict]) -> dict:
    """A manifest's `totals` of its listed shards."""
    return {"tokens": sum(s["tokens"] for s in shards), "documents": sum(s["documents"] for s in shards),
            "shards": len(shards), "bytes": sum(s["bytes"] + s["index_bytes"] for s in shards)}


def tokenizer_identity(tokenizer, spec: str) -> dict:
    """What decides the ids: the spec, the vocabulary hash (tokenization.names: what decides the ids, so GPT-2 built
    offline and the Hub's hash alike) and the sha256 of the tokenizer.json bytes (of the byte tokenizer's description
    for 'byte'), the vocabulary size, the end-of-text id, and the shard dtype that follows from the size."""
    path = getattr(tokenizer, "path", None)
    if spec == BYTE:
        data = None
    else:
        if path is None:
            from fwe_cli.loader.tokenization.doc_tokenizer import resolve_tokenizer_file

            path = resolve_tokenizer_file(spec)
        with open(path, "rb") as handle:
            data = handle.read()
    version = version_for(tokenizer.vocab_size)
    return {"name": spec, "vocab_hash": vocabulary_hash(data),
            "vocab_sha256": hashlib.sha256(BYTE_DESCRIPTION if data is None else data).hexdigest(),
            "vocab_size": int(tokenizer.vocab_size), "eot": int(tokenizer.eos_id),
            "eot_token": getattr(tokenizer, "eos_token", None), "source": getattr(tokenizer, "source", "builtin"),
            "version": version, "dtype": dtype_for(version).name}


def verify_tokens(out: str) -> dict:
    """Re-hash every shard and index against the manifest: `ok` means complete and every file matches."""
    return verify_output(TokensLayout.for_out(out), lambda manifest: {
        "shards_checked": len(manifest["shards"]), "tokens": sum(s["tokens"] for s in manifest["shards"])})
