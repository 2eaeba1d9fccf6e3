"""Tokenize a local source once into llm.c token shards plus a manifest, resumable after any interruption.

    from fwe_cli.tokens.run import TokenizeConfig, run_tokenize
    result = run_tokenize(TokenizeConfig(src="/data/fwe_bootstrap", out="/data/fwe_tokens", tokenizer="gpt2"))

Documents are read with the loader's own DocumentStream (same files, order and records as `--local-path SRC`),
encoded on every core (fwe_cli/tokens/encode.py), and packed whole into shards of at most `shard_tokens` tokens (a
document longer than that gets a shard of its own): a shard is closed when the next document would not fit.
After each shard the manifest records it and the `resume` of the next shard's first document, so a re-run after
Ctrl-C, kill -9 or a full disk continues there and ends byte-identical to an uninterrupted run (at most one
shard is tokenized again). Different arguments against an existing output are refused unless `force`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.errors import ConfigError, DiskSpaceError, OutputError, SourceError, os_error_line
from fwe_cli.hostinfo import usable_cores
from fwe_cli.loader.sources.token_shards import dtype_for
from fwe_cli.output.faults import Faults
from fwe_cli.output.lock import OutputLock
from fwe_cli.output.manifest_file import write_manifest
from fwe_cli.output.progress_clock import ProgressClock
from fwe_cli.tokens.encode import DocEncoder
from fwe_cli.tokens.layout import TokensLayout, tokenizer_identity
from fwe_cli.tokens.prepare import open_text_source, prepare_output, source_offset
from fwe_cli.tokens.shard_writer import ShardWriter

DEFAULT_SHARD_TOKENS = 100_000_000  # llm.c's fineweb.py


@dataclass(frozen=True)
class TokenizeConfig:
    src: str
    """Anything --local-path takes: a bootstrap directory, JSONL/TXT/parquet files, a directory or a glob."""
    out: str
    """The output directory (shards + manifest.json)."""
    tokenizer: str = "gpt2"
    """'byte', a tokenizer.json path or directory, or a Hub id ('gpt2' works offline)."""
    shard_tokens: int = DEFAULT_SHARD_TOKENS
    threads: int = 0
    """Encoding threads; 0: one per usable core."""
    backend: str = "auto"
    bad_records: str = "skip"
    force: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.shard_tokens, int) or not 1_000 <= self.shard_tokens <= 2**31 - 1:
            raise ConfigError(f"--shard-tokens must be an integer from 1000 to {2**31 - 1} (the header's int32 "
                              f"count), got {self.shard_tokens!r}")
        if not isinstance(self.threads, int) or not 0 <= self.threads <= 1024:
            raise ConfigError(f"--threads must be an integer from 0 (one per core) to 1024, got {self.threads!r}")
        if not self.src:
            raise ConfigError("the source to tokenize is missing (SRC: a bootstrap directory, files or a glob)")


def tokenize_config(src: str, out: str, tokenizer: str, shard_tokens: int | None = None, threads: int | None = None,
                    backend: str | None = None, bad_records: str | None = None, force: bool = False) -> TokenizeConfig:
    """The TokenizeConfig of command-line values, where None (a flag not given) leaves the field's default."""
    given = {"shard_tokens": shard_tokens, "threads": threads, "backend": backend, "bad_records": bad_records}
    return TokenizeConfig(src=src, out=out, tokenizer=tokenizer, force=force,
                          **{name: value for name, value in given.items() if value is not None})


class _Run:
    def __init__(self, config: TokenizeConfig, on_progress, should_stop, faults: Faults):
        self.config, self.on_progress, self.should_stop, self.faults = config, on_progress, should_stop, faults
        self.layout = TokensLayout.for_out(config.out)
        self.clock = ProgressClock()
        self.done_bytes = 0

    def run(self) -> dict:
        layout = self.layout
        if os.path.lexists(layout.out) and not os.path.isdir(layout.out):
            raise OutputError(f"--out {layout.out} exists and is not a directory; token shards go into a directory")
        from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer

        tokenizer = load_tokenizer(self.config.tokenizer, self.config.backend)
        with OutputLock(layout):
            text = open_text_source(self.config.src)
            identity = tokenizer_identity(tokenizer, self.config.tokenizer)
            manifest = prepare_output(self.config, layout, identity, text)
            self.manifest = manifest
            if manifest["complete"]:
                return self.result("already_complete", manifest["totals"]["tokens"])
            getattr(tokenizer, "wait_upgrade", lambda timeout: None)(60.0)  # tiktoken once proven identical
            manifest["runs"].append({"started": utc_iso(), "resumed_from_shards": len(manifest["shards"]),
                                     "backend": getattr(tokenizer, "backend", "byte")})
            write_manifest(layout, manifest, before_rename=lambda: self.faults.reached("manifest-tmp"))
            self.start_tokens = manifest["totals"]["tokens"]
            try:
                outcome = self._tokenize(tokenizer, identity)
            except DiskSpaceError as exc:
                raise DiskSpaceError(f"disk full while writing {layout.out}: {exc}") from exc
            except OSError as exc:  # writes to the output raise OutputError (output/os_errors.py): the source's
                raise SourceError(os_error_line("read source", str(exc.filename or self.config.src), exc)) from None
            return self.result(outcome, self.start_tokens)

    def _tokenize(self, tokenizer, identity: dict) -> str:
        from fwe_cli.loader.config import resolve_config
        from fwe_cli.loader.sources.bad_records import BadRecords
        from fwe_cli.loader.sources.stream import DocumentStream

        config, manifest = self.config, self.manifest
        resume = manifest["resume"] or {}
        loader_config = resolve_config(env={}, local_path=config.src, tokenizer=config.tokenizer,
                                       bad_records=config.bad_records)
        bad = resume.get("bad_records") or {"count": 0, "examples": []}
        stream = DocumentStream(loader_config, start=resume.get("next"), expect=manifest["source"]["files"],
                                bad=BadRecords(**bad))
        threads = config.threads or usable_cores()
        encoder = DocEncoder(tokenizer, threads, dtype_for(identity["version"]))
        self.encoder = encoder
        shards = manifest["shards"]
        writer: ShardWriter | None = None
        limit = config.shard_tokens
        self.progress(force=True)
        try:
            for batch in encoder.batches(stream, lambda: stream.bad.count):
                first = first_pos = position = 0  # first document (and token) of the batch not yet in a writer
                for i, n in enumerate(batch.lengths.tolist()):
                    if writer is None:
                        writer = ShardWriter(self.layout.shard_path(len(shards)), identity["version"])
                    held = writer.tokens + position - first_pos
                    if held and held + n > limit:  # the shard is closed before the document that does not fit
                        writer.add(batch.tokens[first_pos:position], batch.lengths[first:i])
                        self._finish(writer, stream, batch.resumes[i], batch.bad_before[i])
                        writer = ShardWriter(self.layout.shard_path(len(shards)), identity["version"])
                        first, first_pos = i, position
                    position += n
                writer.add(batch.tokens[first_pos:position], batch.lengths[first:])
                self.done_bytes = source_offset(batch.resumes[-1], self.manifest["source"])
                if self.faults.active:
                    self.faults.reached("tokens-batch")
                if self.should_stop():
                    writer.abandon()
                    writer = None
                    return "interrupted"
                self.progress()
            if writer is not None and writer.documents:
                self._finish(writer, stream, None, None)
                writer = None
        finally:
            if writer is not None:
                writer.abandon()
        if not shards:
            raise SourceError(f"{config.src} produced no documents ({stream.bad.count} bad records): nothing to "
                              "tokenize")
        manifest.update(complete=True, finished=utc_iso(), resume=None, bad_records=stream.bad.to_dict())
        manifest["runs"][-1].update(finished=utc_iso(), outcome="source exhausted",
                                    encoded_by_backend=encoder.by_backend)
        write_manifest(self.layout, manifest, before_rename=lambda: self.faults.reached("manifest-tmp"))
        self.progress(force=True)
        return "source exhausted"

    def _finish(self, writer: ShardWriter, stream, next_resume: dict | None, bad_before: int | None) -> None:
        """Make the shard final, list it, and record where the next shard starts."""
        manifest = self.manifest
        entry = writer.finish(before_rename=lambda: self.faults.reached("shard-fsynced"),
                              after_rename=lambda: self.faults.reached("shard-renamed"))
        manifest["shards"].append(entry)
        manifest["totals"] = totals(manifest["shards"])
        if next_resume is not None:
            examples = stream.bad.to_dict()["examples"][:bad_before]
            manifest["resume"] = {"next": next_resume, "shards": len(manifest["shards"]),
                                  "bad_records": {"count": bad_before, "examples": examples}}
            write_manifest(self.layout, manifest, before_rename=lambda: self.faults.reached("manifest-tmp"))
        self.progress(force=True)

    def progress(self, force: bool = False) -> None:
        elapsed = self.clock.due(force)
        if elapsed is None:
            return
        done = self.manifest["totals"]["tokens"] - self.start_tokens
        self.on_progress({"tokens": self.manifest["totals"]["tokens"], "shards": len(self.manifest["shards"]),
                          "documents": self.manifest["totals"]["documents"], "elapsed_s": round(elapsed, 3),
                          "source_bytes_done": self.done_bytes, "source_bytes": self.manifest["source"]["bytes"],
                          "tokens_per_s": round(done / elapsed, 1) if elapsed > 0 else 0.0})

    def result(self, outcome: str, start_tokens: int) -> dict:
        seconds = self.clock.elapsed()
        manifest = self.manifest
        done = manifest["totals"]["tokens"] - start_tokens
        encoder = getattr(self, "encoder", None)
        return {"ok": bool(manifest["complete"]), "complete": bool(manifest["complete"]), "outcome": outcome,
                "output": self.layout.out, "manifest_path": self.layout.manifest_path,
                "tokenizer": manifest["tokenizer"], "shards": len(manifest["shards"]), **manifest["totals"],
                "tokens_this_run": done, "seconds": round(seconds, 3),
                "tokens_per_s": round(done / seconds, 1) if seconds > 0 else 0.0,
                "resumed_from_tokens": start_tokens, "bad_records": manifest.get("bad_records"),
                "encoded_by_backend": encoder.by_backend if encoder else {},
                "per_document_fallbacks": encoder.fallbacks if encoder else 0,
                "fwe_version": fwe_cli.__version__, "manifest": manifest}


def totals(shards: list[dict]) -> dict:
    return {"tokens": sum(s["tokens"] for s in shards), "documents": sum(s["documents"] for s in shards),
            "shards": len(shards), "bytes": sum(s["bytes"] + s["index_bytes"] for s in shards)}


def run_tokenize(config: TokenizeConfig, on_progress: Callable[[dict], None] = lambda info: None,
                 should_stop: Callable[[], bool] = lambda: False, faults: Faults | None = None) -> dict:
    """Create, resume or confirm the token output `config` describes; returns a result dict (see `_Run.result`).

    `on_progress` gets {tokens, shards, documents, elapsed_s, source_bytes_done, source_bytes (its total),
    tokens_per_s} about twice a
    second; `should_stop` is polled after every document batch: when true, the shard being written is dropped (the
    manifest already points at its start) and the outcome is 'interrupted'. Raises DiskSpaceError (resumable),
    OutputError, SourceError, TokenizerError or ConfigError."""
    return _Run(config, on_progress, should_stop, faults or Faults.from_env()).run()
