"""What a `fwe tokenize` run starts from: a fresh output, a resume, a finished output, or a refusal.

A resume must read the same source files (path, size, modification time) with the same tokenizer (spec and
vocabulary sha256) into shards of the same size: anything else would mix two outputs in one, so it is refused
(exit 8) naming what differs, unless --force. Called with the output's lock held: it may delete files.
"""

from __future__ import annotations

import os

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.bootstrap.output_errors import remove_output
from fwe_cli.errors import OutputError
from fwe_cli.loader.sources.token_shards import HEADER_INTS, MAGIC, TOKENS_FORMAT
from fwe_cli.tokens.layout import TokensLayout, load_manifest, shard_problems

_PLAIN = (".jsonl", ".json", ".txt", ".ndjson")  # formats whose resume offset is a byte offset of the file


def source_fingerprint(src: str) -> tuple[list[str], dict]:
    """(the files `src` names, in reading order, as the loader lists them; the manifest's `source` record)."""
    from fwe_cli.loader.sources.local_files import resolve_files

    files = resolve_files(src)
    listed = []
    for path in files:
        info = os.stat(path)
        listed.append({"path": os.path.abspath(path), "bytes": info.st_size, "mtime_ns": info.st_mtime_ns})
    return files, {"kind": "local", "path": os.path.abspath(src), "files": listed,
                   "bytes": sum(f["bytes"] for f in listed)}


def source_offset(resume: dict | None, source: dict) -> int:
    """Source bytes before a document (progress only: exact for plain JSONL/TXT, file-granular otherwise)."""
    at = (resume or {}).get("at")
    if not at:
        return 0
    number, offset = int(at[0]), int(at[1]) if len(at) > 1 else 0
    files = source["files"]
    before = sum(f["bytes"] for f in files[:number])
    if number < len(files) and files[number]["path"].endswith(_PLAIN):
        before += min(offset, files[number]["bytes"])
    return before


def fresh_manifest(config, identity: dict, source: dict) -> dict:
    return {
        "format": TOKENS_FORMAT, "complete": False, "fwe_version": fwe_cli.__version__,
        "tokenizer": {k: identity[k] for k in ("name", "vocab_sha256", "vocab_size", "eot", "eot_token", "source")},
        "vocab_size": identity["vocab_size"], "eot": identity["eot"],
        "version": identity["version"], "dtype": identity["dtype"], "shard_tokens": config.shard_tokens,
        "header": {"magic": MAGIC, "ints": HEADER_INTS, "eot_before_each_document": True},
        "source": source, "shards": [], "totals": {"tokens": 0, "documents": 0, "shards": 0, "bytes": 0},
        "bad_records": {"count": 0, "examples": []}, "started": utc_iso(), "finished": None, "runs": [],
        "resume": {"next": None, "shards": 0, "bad_records": {"count": 0, "examples": []}},
    }


def _differences(manifest: dict, config, identity: dict, source: dict) -> list[str]:
    out = []
    old = manifest.get("tokenizer") or {}
    if old.get("name") != identity["name"]:
        out.append(f"--tokenizer {old.get('name')!r} there, {identity['name']!r} now")
    elif old.get("vocab_sha256") != identity["vocab_sha256"]:
        out.append(f"tokenizer {identity['name']!r}'s vocabulary differs (tokenizer.json sha256 "
                   f"{str(old.get('vocab_sha256'))[:12]}… there, {identity['vocab_sha256'][:12]}… now)")
    if manifest.get("shard_tokens") != config.shard_tokens:
        out.append(f"--shard-tokens {manifest.get('shard_tokens')} there, {config.shard_tokens} now")
    then = manifest.get("source") or {}
    if then.get("path") != source["path"]:
        out.append(f"source {then.get('path')} there, {source['path']} now")
    elif then.get("files") != source["files"]:
        old_files = {f["path"]: f for f in then.get("files") or []}
        changed = [f["path"] for f in source["files"] if old_files.get(f["path"]) != f] or [source["path"]]
        out.append(f"the source changed since ({changed[0]}; {len(old_files)} files then, "
                   f"{len(source['files'])} now)")
    return out


def prepare_output(config, layout: TokensLayout, identity: dict, source: dict) -> dict:
    """The manifest to continue from (a fresh one for a new output or with --force), after removing the files a
    killed run left that the manifest does not list; OutputError for an output this run must not touch."""
    remove_output(layout.manifest_path + ".tmp")
    if config.force:
        for path, _number in layout.own_files():
            remove_output(path)
        return fresh_manifest(config, identity, source)
    manifest = load_manifest(layout)
    if manifest is None:
        if layout.own_files() or layout.has_foreign_files():
            raise OutputError(f"{layout.out} exists and is not an fwe token output (no manifest.json): choose a "
                              "new or empty --out, or pass --force to write there anyway")
        return fresh_manifest(config, identity, source)
    diffs = _differences(manifest, config, identity, source)
    if diffs:
        raise OutputError(f"{layout.out} holds tokens made with different arguments ({'; '.join(diffs)}): re-run "
                          "with the original ones to resume it, pass --force to replace it, or choose another --out")
    problems = shard_problems(layout, manifest, rehash=False)
    if problems:
        first = problems[0]
        raise OutputError(f"token output {layout.out} is damaged: {first['name']} {first['problem']} "
                          f"({len(problems)} file(s) in all; `fwe tokenize --verify` lists them); pass --force to "
                          "start over")
    if not manifest["complete"]:
        listed = {name for s in manifest["shards"] for name in (s["name"], s["index"])}
        for path, _number in layout.own_files():
            if _number is not None and os.path.basename(path) not in listed:
                remove_output(path)  # a partial file, or a shard renamed after the last manifest was written
    return manifest
