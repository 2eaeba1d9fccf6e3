"""What a `fwe tokenize` run starts from: a fresh output, a resume, a finished output, or a refusal.

A resume must read the same source files (path, size, modification time) with the same tokenizer (spec and
vocabulary sha256) into shards of the same size: anything else would mix two outputs in one, so it is refused
(exit 8) naming what differs, unless --force (the decision is fwe_cli/output/prepare.py's; what differs is said
here). Called with the output's lock held: it may delete files.
"""

from __future__ import annotations

import os

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.loader.sources.token_shards import HEADER_INTS, MAGIC, TOKENS_FORMAT
from fwe_cli.output import prepare
from fwe_cli.tokens.layout import TokensLayout

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
    old, then = manifest.get("tokenizer") or {}, manifest.get("source") or {}
    out = prepare.differences(
        {"tokenizer": old.get("name"), "shard_tokens": manifest.get("shard_tokens"), "source": then.get("path")},
        {"tokenizer": identity["name"], "shard_tokens": config.shard_tokens, "source": source["path"]},
        {"source": ("source", str)})
    if old.get("name") == identity["name"] and old.get("vocab_sha256") != identity["vocab_sha256"]:
        out.append(f"tokenizer {identity['name']!r}'s vocabulary differs (tokenizer.json sha256 "
                   f"{str(old.get('vocab_sha256'))[:12]}… there, {identity['vocab_sha256'][:12]}… now)")
    if then.get("path") == source["path"] and then.get("files") != source["files"]:
        old_files = {f["path"]: f for f in then.get("files") or []}
        changed = [f["path"] for f in source["files"] if old_files.get(f["path"]) != f] or [source["path"]]
        out.append(f"the source changed since ({changed[0]}; {len(old_files)} files then, "
                   f"{len(source['files'])} now)")
    return out


def prepare_output(config, layout: TokensLayout, identity: dict, source: dict) -> dict:
    """The manifest to continue from (a fresh one for a new output or with --force), after removing the files a
    killed run left that the manifest does not list; OutputError for an output this run must not touch."""
    manifest = prepare.prepare_output(layout, config.force,
                                      lambda manifest: _differences(manifest, config, identity, source))
    return manifest or fresh_manifest(config, identity, source)
