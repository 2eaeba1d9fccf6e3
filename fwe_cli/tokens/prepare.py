"""What a `fwe tokenize` run starts from: a fresh output, a resume, a finished output, or a refusal.

A resume must read the same source files (path, size, modification time: the source's fingerprint) with the same
tokenizer (spec and vocabulary hash) into shards of the same size, as the same task of the same split (tokens/split.py):
anything else would mix two outputs in one, so it is refused (exit 8) naming what differs, unless --force (the
decision is fwe_cli/output/prepare.py's; what differs is said here). Called with the output's lock held: it may
delete files.
"""

from __future__ import annotations

import os

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.loader.files.token_shards import HEADER_INTS, MAGIC, TOKENS_FORMAT
from fwe_cli.loader.remote.object_store import local_or_url
from fwe_cli.output import prepare
from fwe_cli.tokens.layout import TokensLayout


def open_text_source(src: str, strict: bool = False, holdout: float | None = None,
                     holdout_split: str | None = None, storage_options: tuple[str, ...] = ()):
    """The local source `--local-path SRC` names (files here, or an object store's URL read with `storage_options`),
    opened (its files listed and checked): what fwe tokenize reads, with `strict` a malformed record stops it
    (--bad-records error); with `holdout`, one side of a held-out split of it (compose.holdout). A token directory
    has no text to tokenize: SourceError saying so."""
    from fwe_cli.loader.files.listing import no_text
    from fwe_cli.loader.remote.storage_options import parse_storage_options
    from fwe_cli.loader.sources.registry import open_source
    from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec, held_out

    source = open_source(held_out(SourceSpec.of("local", local_path=src), holdout, holdout_split),
                         ReadOptions(strict=strict, storage_options=parse_storage_options(storage_options)))
    if files_read(source).reads_tokens:
        raise no_text(src)
    source.open(lambda stage: None)
    return source


def files_read(source):
    """The local source whose files `source` (open_text_source's) reads: itself, or the one its split reads."""
    return source.children[0] if source.children else source


def source_record(source) -> dict:
    """The manifest's `source` record: where, and the files as they are (the source's fingerprint), and the side of a
    held-out split read (`holdout`, `holdout_split`), if any."""
    files = files_read(source).fingerprint()
    record = {"kind": "local", "path": local_or_url(files_read(source).spec.options.local_path), "files": files,
              "bytes": sum(f["bytes"] for f in files)}
    if source.children:
        record["holdout"] = {"holdout": source.spec.options.holdout, "holdout_split": source.spec.options.holdout_split}
    return record


def fresh_manifest(config, identity: dict, source: dict, split: dict) -> dict:
    return {
        "format": TOKENS_FORMAT, "complete": False, "fwe_version": fwe_cli.__version__,
        "tokenizer": {k: identity[k] for k in ("name", "vocab_hash", "vocab_sha256", "vocab_size", "eot", "eot_token",
                                               "source")},
        "vocab_size": identity["vocab_size"], "eot": identity["eot"],
        "version": identity["version"], "dtype": identity["dtype"], "shard_tokens": config.shard_tokens,
        "header": {"magic": MAGIC, "ints": HEADER_INTS, "eot_before_each_document": True},
        "source": source, "split": split, "shards": [],
        "totals": {"tokens": 0, "documents": 0, "shards": 0, "bytes": 0},
        "bad_records": {"count": 0, "examples": []}, "started": utc_iso(), "finished": None, "runs": [],
        "resume": {"span": split["spans"][0], "next": None, "shards": 0, "bad_records": {"count": 0, "examples": []}},
    }


SPLIT_NAMED = {"source": ("source", str), "task": ("--task", str), "tasks": ("--tasks", str),
               "span_bytes": ("span_bytes (shards end where spans of files end)", str),
               "holdout": ("--holdout/--holdout-split", lambda v: "none" if v is None else
                           f"{v['holdout']:g}/{v['holdout_split']}")}


def _differences(manifest: dict, config, identity: dict, text, source: dict, split: dict) -> list[str]:
    old, then, path = manifest.get("tokenizer") or {}, manifest.get("source") or {}, source["path"]
    was = manifest.get("split") or {}
    out = prepare.differences(
        {"tokenizer": old.get("name"), "shard_tokens": manifest.get("shard_tokens"), "source": then.get("path"),
         "holdout": then.get("holdout"), **{key: was[key] for key in ("task", "tasks", "span_bytes") if key in was}},
        {"tokenizer": identity["name"], "shard_tokens": config.shard_tokens, "source": path,
         "holdout": source.get("holdout"), **{key: split[key] for key in ("task", "tasks", "span_bytes")}},
        SPLIT_NAMED)
    # the ids are the same when the vocabulary is (GPT-2 built offline and fetched from the Hub); an output made before
    # the vocabulary hash was recorded is compared by its tokenizer.json's bytes
    key = "vocab_hash" if "vocab_hash" in old else "vocab_sha256"
    if old.get("name") == identity["name"] and old.get(key) != identity[key]:
        out.append(f"tokenizer {identity['name']!r}'s vocabulary differs ({key} {str(old.get(key))[:12]}… there, "
                   f"{identity[key][:12]}… now)")
    change = files_read(text).changed(then.get("files")) if then.get("path") == path else None
    if change is not None:
        out.append(f"the source changed since ({change})")
    return out


def prepare_output(config, layout: TokensLayout, identity: dict, text, source: dict, split: dict) -> dict:
    """The manifest to continue from (a fresh one for a new output or with --force), after removing the files a
    killed run left that the manifest does not list; OutputError for an output this run must not touch. `text`: the
    opened source (open_text_source), `source` its record (source_record), `split` this task's (SpanPlan.record)."""
    manifest = prepare.prepare_output(layout, config.force,
                                      lambda manifest: _differences(manifest, config, identity, text, source, split))
    return manifest or fresh_manifest(config, identity, source, split)
