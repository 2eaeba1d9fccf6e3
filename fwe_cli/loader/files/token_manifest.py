"""A token directory's manifest (`fwe tokenize`'s output: fwe_cli.loader.files.token_dir reads the shards): what it
says (`shard_tokens`: the tokenizer, its vocabulary and end-of-text id, so no tokenizer is loaded:
tokenization.pretokenized), and its shards checked against it before any is read (`resolve_shards`), as a
bootstrap's parts are.
"""

from __future__ import annotations

import os

from fwe_cli.errors import InputError, SourceError
from fwe_cli.loader.files.listing import (
    MANIFEST_NAME,
    bootstrap_manifest_path,
    check_regular_file,
    manifest_problem,
    read_manifest,
)
from fwe_cli.loader.files.token_shards import INDEX_SUFFIX, TOKENS_FORMAT, ShardFormatError, read_header
from fwe_cli.loader.tokenization.pretokenized import ShardTokens
from fwe_cli.output.verify import listed_file_problems

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


def shard_tokens(path: str, manifest: dict) -> ShardTokens:
    """The tokenizer the token directory at `path` was made with, as its `manifest` says (SourceError naming the
    manifest when it is not one of a token directory)."""
    problem = _shape_problem(manifest)
    if problem:
        raise SourceError(f"{os.path.join(path, MANIFEST_NAME)} is not a token directory manifest ({problem})")
    return ShardTokens(path, manifest, recorded_tokenizer(manifest))


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
