"""Tokenize a local source once into llm.c token shards plus a manifest, resumable after any interruption.

    from fwe_cli.tokens.run import TokenizeConfig, run_tokenize
    result = run_tokenize(TokenizeConfig(src="/data/fwe_bootstrap", out="/data/fwe_tokens", tokenizer="gpt2"))

Documents are read through the source object and the loader's ordering (same files, order and records as
`--local-path SRC`), span by span (consecutive files: tokens/split.py), encoded on every core
(fwe_cli/tokens/encode.py), and packed whole into shards of at most `shard_tokens` tokens (a document longer than
that gets a shard of its own): a shard is closed when the next document would not fit, and where a span ends.
After each shard the manifest records it and the `resume` of the next shard's first document (its span, and its
position in it), so a re-run after Ctrl-C, kill -9 or a full disk continues there and ends byte-identical to an
uninterrupted run (at most one shard is tokenized again). Different arguments against an existing output are
refused unless `force`.

With a split (`split`: task I of N, from --task/--tasks, a SLURM array or torchrun) the run reads only its task's
spans into OUT/tasks/IIIII-of-NNNNN/, resumable the same way; the task that finds every task complete when it ends
merges them into OUT (tokens/merge.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Mapping

import fwe_cli
from fwe_cli.artifacts import utc_iso
from fwe_cli.errors import ConfigError, DiskSpaceError, OutputError, SettingError, SourceError, os_error_line
from fwe_cli.hostinfo import usable_cores
from fwe_cli.loader.compose.holdout import Holdout
from fwe_cli.loader.compose.mix_file import refuse_mix
from fwe_cli.loader.config import check_reading_settings
from fwe_cli.loader.files.token_shards import dtype_for
from fwe_cli.loader.remote.hub_env import hub_requests, requests_sent
from fwe_cli.loader.remote.storage_options import parse_storage_options
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.order import StreamOrder
from fwe_cli.loader.sources.position import decode, encode
from fwe_cli.loader.sources.spec import SourceSpec, held_out
from fwe_cli.output.faults import Faults
from fwe_cli.output.lock import OutputLock
from fwe_cli.output.manifest_file import write_manifest
from fwe_cli.output.progress_clock import ProgressClock
from fwe_cli.tokens.encode import DocEncoder
from fwe_cli.tokens.layout import TokensLayout, tokenizer_identity, totals
from fwe_cli.tokens.prepare import open_text_source, prepare_output, source_record
from fwe_cli.tokens.shard_writer import ShardWriter
from fwe_cli.tokens.split import SpanPlan, TaskSplit, resolve_split, task_threads

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
    split: TaskSplit = field(default_factory=TaskSplit)
    """Which task of a split run this is (tokens/split.py); one task writes `out` itself."""
    holdout: float | None = None
    """Tokenize one side of a held-out split of this fraction of the documents (compose.holdout); None: all of them."""
    holdout_split: str | None = None
    """The side: 'train' (the default with `holdout`) or 'holdout'."""
    storage_options: tuple[str, ...] = ()
    """KEY=VALUE options of the object store's filesystem for an s3:// (gs://, az://, hf://) SRC (--storage-option)."""

    def __post_init__(self) -> None:
        if not isinstance(self.shard_tokens, int) or not 1_000 <= self.shard_tokens <= 2**31 - 1:
            raise ConfigError(f"--shard-tokens must be an integer from 1000 to {2**31 - 1} (the header's int32 "
                              f"count), got {self.shard_tokens!r}")
        if not isinstance(self.threads, int) or not 0 <= self.threads <= 1024:
            raise ConfigError(f"--threads must be an integer from 0 (one per core) to 1024, got {self.threads!r}")
        if not self.src:
            raise ConfigError("the source to tokenize is missing (SRC: a bootstrap directory, files or a glob)")
        if not isinstance(self.split, TaskSplit):
            raise ConfigError(f"split must be a TaskSplit, got {self.split!r}")
        try:
            check_reading_settings(self.bad_records, Shard())
            parse_storage_options(self.storage_options)
            read = held_out(SourceSpec.of("local", local_path=self.src), self.holdout, self.holdout_split)
        except SettingError as exc:
            raise exc.naming(lambda name: "--" + name.replace("_", "-")) from None
        if read.children:  # the fraction as a number (a flag gives its text)
            object.__setattr__(self, "holdout", read.options.holdout)


def tokenize_config(src: str, out: str, tokenizer: str, shard_tokens: int | None = None, threads: int | None = None,
                    backend: str | None = None, bad_records: str | None = None, force: bool = False,
                    task: int | None = None, tasks: int | None = None,
                    env: Mapping[str, str] | None = None, holdout: float | None = None,
                    holdout_split: str | None = None, storage_options=None) -> TokenizeConfig:
    """The TokenizeConfig of command-line values, where None (a flag not given) leaves the field's default. The
    split is --task/--tasks, else the launcher's variables in `env` (default os.environ): a SLURM array's
    task, else torchrun's RANK/WORLD_SIZE (whose tasks on one node, LOCAL_WORLD_SIZE, share its cores)."""
    env = os.environ if env is None else env
    refuse_mix(env, "fwe tokenize writes the token shards of one source")
    split = resolve_split(task, tasks, env)
    if threads is None:
        threads = task_threads(split, env)
    given = {"shard_tokens": shard_tokens, "threads": threads, "backend": backend, "bad_records": bad_records,
             "holdout": holdout, "holdout_split": holdout_split,
             "storage_options": tuple(storage_options) if storage_options else None}
    return TokenizeConfig(src=src, out=out, tokenizer=tokenizer, force=force, split=split,
                          **{name: value for name, value in given.items() if value is not None})



def _next_document(text, saved: dict | None):
    """The `resume` of the document a shard starts with (its cursor), as the manifest holds it, checked to be one of
    the source `text`'s."""
    if saved is None:
        return None
    cursor = decode(saved)
    text.check_resume(cursor)
    return cursor


class _Run:
    def __init__(self, config: TokenizeConfig, on_progress, should_stop, faults: Faults):
        self.config, self.on_progress, self.should_stop, self.faults = config, on_progress, should_stop, faults
        self.layout = TokensLayout.for_out(config.split.out(config.out))
        self.clock = ProgressClock()
        self.done_bytes = 0
        self.plan: SpanPlan | None = None
        self.text = None  # the source read (open_text_source), once opened
        self.requests_from = requests_sent()  # the Hub requests of this run (a tokenizer's download): by kind

    def run(self) -> dict:
        layout = self.layout
        if os.path.lexists(layout.out) and not os.path.isdir(layout.out):
            raise OutputError(f"--out {layout.out} exists and is not a directory; token shards go into a directory")
        from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer

        tokenizer = load_tokenizer(self.config.tokenizer, self.config.backend)
        with OutputLock(layout):
            text = self.text = open_text_source(self.config.src, self.config.bad_records == "error",
                                                self.config.holdout, self.config.holdout_split,
                                                self.config.storage_options)
            identity = tokenizer_identity(tokenizer, self.config.tokenizer)
            source = source_record(text)
            self.plan = SpanPlan.of(source["files"], self.config.shard_tokens, self.config.split)
            manifest = prepare_output(self.config, layout, identity, text, source, self.plan.record(self.config.split))
            self.manifest = manifest
            self.start_tokens = manifest["totals"]["tokens"]
            outcome = "already_complete" if manifest["complete"] else self._resume(tokenizer, identity, text)
        result = self.result(outcome, self.start_tokens)
        if self.config.split.tasks > 1 and manifest["complete"]:
            from fwe_cli.tokens.merge import merge_when_done

            merged = merge_when_done(self.config.out, self.config.split.tasks, self.faults)
            result["merge"] = {key: value for key, value in merged.items() if key != "manifest"}
        return result

    def _resume(self, tokenizer, identity: dict, text) -> str:
        """Continue the output from its manifest's resume point to the end of this task's spans."""
        manifest, layout = self.manifest, self.layout
        getattr(tokenizer, "wait_upgrade", lambda timeout: None)(60.0)  # tiktoken once proven identical
        manifest["runs"].append({"started": utc_iso(), "resumed_from_shards": len(manifest["shards"]),
                                 "backend": getattr(tokenizer, "backend", "byte")})
        write_manifest(layout, manifest, before_rename=lambda: self.faults.reached("manifest-tmp"))
        try:
            return self._tokenize(tokenizer, identity, text)
        except DiskSpaceError as exc:
            raise DiskSpaceError(f"disk full while writing {layout.out}: {exc}") from exc
        except OSError as exc:  # writes to the output raise OutputError (output/os_errors.py): the source's
            raise SourceError(os_error_line("read source", str(exc.filename or self.config.src), exc)) from None

    def _tokenize(self, tokenizer, identity: dict, text) -> str:
        from fwe_cli.loader.sources.bad_records import BadRecords

        config, manifest, plan = self.config, self.manifest, self.plan
        resume = manifest["resume"] or {}
        text.bad = BadRecords(**(resume.get("bad_records") or {"count": 0, "examples": []}))
        self.encoder = DocEncoder(tokenizer, config.threads or usable_cores(), dtype_for(identity["version"]))
        self.version = identity["version"]
        self.progress(force=True)
        first = int(resume.get("span", plan.first))
        for span in range(first, plan.end):
            start = _next_document(text, resume.get("next")) if span == first else None
            if self._span(text, span, start) == "interrupted":
                return "interrupted"
        if not manifest["shards"] and config.split.tasks == 1:
            raise SourceError(f"{config.src} produced no documents ({text.bad.count} bad records): nothing to "
                              "tokenize")
        manifest.update(complete=True, finished=utc_iso(), resume=None, bad_records=text.bad.to_dict())
        manifest["runs"][-1].update(finished=utc_iso(), outcome="source exhausted",
                                    encoded_by_backend=self.encoder.by_backend)
        write_manifest(self.layout, manifest, before_rename=lambda: self.faults.reached("manifest-tmp"))
        self.progress(force=True)
        return "source exhausted"

    def _span(self, text, span: int, start: dict | None) -> str:
        """Tokenize span `span` from document `start` (None: its first) into shards, the last one closed at its end;
        'interrupted' when `should_stop` said so."""
        docs = text.stream(StreamOrder(Shard(), 1, None, 1), start, self.plan.share(span))
        shards, limit = self.manifest["shards"], self.config.shard_tokens
        writer: ShardWriter | None = None
        try:
            for batch in self.encoder.batches(docs, lambda: text.bad.count):
                first = first_pos = position = 0  # first document (and token) of the batch not yet in a writer
                for i, n in enumerate(batch.lengths.tolist()):
                    if writer is None:
                        writer = ShardWriter(self.layout.shard_path(len(shards)), self.version)
                    held = writer.tokens + position - first_pos
                    if held and held + n > limit:  # the shard is closed before the document that does not fit
                        writer.add(batch.tokens[first_pos:position], batch.lengths[first:i])
                        self._finish(writer, text, {"span": span, "next": batch.resumes[i]}, batch.bad_before[i])
                        writer = ShardWriter(self.layout.shard_path(len(shards)), self.version)
                        first, first_pos = i, position
                    position += n
                writer.add(batch.tokens[first_pos:position], batch.lengths[first:])
                self.done_bytes = self.plan.done_bytes(span, batch.resumes[-1])
                if self.faults.active:
                    self.faults.reached("tokens-batch")
                if self.should_stop():
                    writer.abandon()
                    writer = None
                    return "interrupted"
                self.progress()
            if writer is not None and writer.documents:  # a span's last shard ends with it
                following = {"span": span + 1, "next": None} if span + 1 < self.plan.end else None
                self._finish(writer, text, following, text.bad.count)
                writer = None
        finally:
            if writer is not None:
                writer.abandon()
        return "span done"

    def _finish(self, writer: ShardWriter, text, following: dict | None, bad_before: int) -> None:
        """Make the shard final, list it, and record where the next shard starts (`following`: its span and first
        document; None after the last shard, when the completion records the end)."""
        manifest = self.manifest
        entry = writer.finish(before_rename=lambda: self.faults.reached("shard-fsynced"),
                              after_rename=lambda: self.faults.reached("shard-renamed"))
        manifest["shards"].append(entry)
        manifest["totals"] = totals(manifest["shards"])
        if following is not None:
            examples = text.bad.to_dict()["examples"][:bad_before]
            following = dict(following, next=following["next"] and encode(following["next"]))
            manifest["resume"] = {**following, "shards": len(manifest["shards"]),
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
                          "source_bytes_done": self.done_bytes, "source_bytes": self.plan.task_bytes,
                          "tokens_per_s": round(done / elapsed, 1) if elapsed > 0 else 0.0})

    def holdout_figures(self) -> dict | None:
        """The held-out split read, with the documents this run's reading kept and passed over; None without one."""
        text = self.text
        if not isinstance(text, Holdout):
            return None
        options = text.spec.options
        return {"holdout": options.holdout, "holdout_split": options.holdout_split, "documents_kept": text.kept,
                "documents_removed": text.removed}

    def result(self, outcome: str, start_tokens: int) -> dict:
        seconds = self.clock.elapsed()
        manifest = self.manifest
        done = manifest["totals"]["tokens"] - start_tokens
        encoder = getattr(self, "encoder", None)
        return {"ok": bool(manifest["complete"]), "complete": bool(manifest["complete"]), "outcome": outcome,
                "output": self.layout.out, "manifest_path": self.layout.manifest_path,
                "split": self.config.split.describe(),
                "tokenizer": manifest["tokenizer"], "shards": len(manifest["shards"]), **manifest["totals"],
                "tokens_this_run": done, "seconds": round(seconds, 3),
                "tokens_per_s": round(done / seconds, 1) if seconds > 0 else 0.0,
                "resumed_from_tokens": start_tokens, "bad_records": manifest.get("bad_records"),
                "holdout": self.holdout_figures(),
                "encoded_by_backend": encoder.by_backend if encoder else {},
                "per_document_fallbacks": encoder.fallbacks if encoder else 0,
                "hub_requests": hub_requests(since=self.requests_from),
                "fwe_version": fwe_cli.__version__, "manifest": manifest}


def run_tokenize(config: TokenizeConfig, on_progress: Callable[[dict], None] = lambda info: None,
                 should_stop: Callable[[], bool] = lambda: False, faults: Faults | None = None) -> dict:
    """Create, resume or confirm the token output `config` describes; returns a result dict (see `_Run.result`).

    `on_progress` gets {tokens, shards, documents, elapsed_s, source_bytes_done, source_bytes (its total),
    tokens_per_s} about twice a second; `should_stop` is polled after every document batch: when true, the shard being
    written is dropped (the manifest already points at its start) and the outcome is 'interrupted'. Raises
    DiskSpaceError (resumable), OutputError, SourceError, TokenizerError or ConfigError."""
    return _Run(config, on_progress, should_stop, faults or Faults.from_env()).run()
