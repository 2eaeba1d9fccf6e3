"""FineWebLoader: the public iterator over packed batches, with prefetch, warmup, timeouts and stats.

    with FineWebLoader(config) as loader:
        loader.warmup()                 # optional; also done automatically when warmup_batches > 0
        for batch in loader:            # np.int32 [batch_size, seq_len] (torch tensor with as_torch)
            ...
        stats = loader.stats()
        state = loader.state_dict()     # resume: FineWebLoader(config, state=state) (see fwe_cli.loader.state)
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
import warnings
from typing import Iterator

from fwe_cli.errors import ConfigError, EndOfData, FweError, LoaderError, LoaderTimeout
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.flow.prefetch import ProducerFailed, ThreadPrefetcher
from fwe_cli.loader.flow.stages import WaitBook, rounded
from fwe_cli.loader.pipeline.producer import Pipeline
from fwe_cli.loader.pipeline.quantiles import Quantiles
from fwe_cli.loader.pipeline.telemetry import Heartbeat
from fwe_cli.loader.remote import job_ranks
from fwe_cli.loader.remote.transient import RetryScope, scoped
from fwe_cli.loader.sources.spec import SourceSpec
from fwe_cli.loader.state.check import Resumed, check_states
from fwe_cli.loader.state.model import State
from fwe_cli.loader.state.taking import Taker
from fwe_cli.loader.tokenization.names import described

# A fallback waits at most this long for the failed producer before the synthetic one starts: a caller's time
# limit for the first batch with synthetic_on_fail is its timeout, this, and the timeout again.
FALLBACK_JOIN_S = 1.0


class FineWebLoader:
    """Packed batches of a config's documents; with `state` (a `state_dict()`), from right after its last batch."""

    def __init__(self, config: LoaderConfig, state: dict | None = None):
        if config.as_torch and importlib.util.find_spec("torch") is None:  # imported later, beside the source
            raise ConfigError("as_torch needs torch installed: pip install 'fwe[torch]'")
        resumed = check_states(state, config) if state is not None else Resumed(config)
        config = self.config = resumed.config
        self.heartbeat = Heartbeat(config.heartbeat_dir, config.rank)
        self.created = time.perf_counter()
        self.first_batch_s: float | None = None
        self.fallback: dict | None = None
        self.warmup_report: dict | None = None
        self.fetch_s = Quantiles()  # every wait's seconds, in a structure that does not grow with the steps
        self.waits = WaitBook()  # each wait's split by producer stage and the queue fill it found (flow.stages)
        self._steps = 0
        self._closed = False
        self._returns_by: float | None = None  # while a wait is in progress: the latest moment it returns (returns_by)
        # this loader's Hub retries (on any of its threads, which start in its scope) go to its heartbeat and end
        # within its timeout (the observer holds the heartbeat, not self: an unclosed loader is still collected)
        heartbeat = self.heartbeat
        self._retries = RetryScope(lambda event: heartbeat.emit("fineweb_hub_retry", **event),
                                   budget_s=config.loader_timeout)
        if config.source.lists_hub_files():  # under torch.distributed, rank 0 lists the Hub for every rank
            job_ranks.join_ranks(config.loader_timeout)
        self._start(resumed)

    # -- lifecycle ---------------------------------------------------------------------------------
    def _start(self, resumed: Resumed) -> None:
        config = resumed.config
        self._position = resumed.position  # of the last batch the consumer received (its state)
        self._taken = 0  # batches this pipeline handed over (its second one opens the source's read-ahead)
        self._done = resumed.done  # its stream ended (a state of one that was done resumes ended)
        self._taker = Taker(config, resumed.state)
        with scoped(self._retries):  # the producer thread starts in this loader's retry scope, and so its own threads
            self.pipeline = Pipeline(config, on_progress=self._progress, start=resumed.position,
                                     expect_files=resumed.files, plan=resumed.plan, olds=resumed.olds)
            producing = config.prefetch and not self._done
            self._prefetcher = ThreadPrefetcher(lambda: iter(self.pipeline), config.queue_depth,
                                                clock=self.pipeline.clock) if producing else None
        self._inline: Iterator | None = None if producing else (b for b in ()) if self._done else iter(self.pipeline)

    def _progress(self, info: dict) -> None:
        self.heartbeat.emit("fineweb_progress", step=self._steps, **info)

    def close(self, join_timeout: float = 1.0, abandon_encodes: bool = False) -> None:
        """Stop the producer and join its thread, then the source's writes for the next start (the first batches
        kept), the two within `join_timeout`, then the tokenizer threads once their encode in flight is done, unless
        `abandon_encodes`. Safe to call twice. A producer blocked inside a hung source read cannot be interrupted: a
        daemon thread, it is reported by `producer_alive` and does not keep the process from exiting."""
        if self._closed:
            return
        self._closed = True
        self._stop_producer(join_timeout, abandon_encodes)
        self.heartbeat.close()

    def _stop_producer(self, join_timeout: float, abandon_encodes: bool = False) -> None:
        """Stop this pipeline's producer and the source's writes (at most `join_timeout` for both) and, unless
        abandoned or the producer is stuck, its tokenizer threads."""
        ends = time.perf_counter() + join_timeout
        self.pipeline.close()  # a producer waiting on the source's read-ahead wakes and ends
        if self._prefetcher is not None:
            self._prefetcher.close(timeout=join_timeout)
        elif self._inline is not None:
            self._inline.close()  # type: ignore[union-attr]
        self.pipeline.documents.wait_for_writes(max(0.0, ends - time.perf_counter()))
        if not abandon_encodes and not self.producer_alive:
            self.pipeline.join_workers()

    def __enter__(self) -> "FineWebLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def producer_alive(self) -> bool:
        return self._prefetcher is not None and self._prefetcher.thread.is_alive()

    # -- warmup ------------------------------------------------------------------------------------
    def warmup(self, timeout: float | None = None) -> dict:
        """Wait up to warmup_timeout (and at most `timeout` seconds) for warmup_batches queued batches; report
        requested/filled/wait_ms."""
        requested = self.config.warmup_batches
        t0 = time.perf_counter()
        wait = self.config.warmup_timeout if timeout is None else max(0.0, min(timeout, self.config.warmup_timeout))
        outer = self._returns_by
        if outer is None:  # called by itself, not by next_batch (which has published its own moment)
            self._returns_by = t0 + wait
        filled = 0
        try:
            if requested and self._prefetcher is not None:
                filled = self._prefetcher.wait_filled(requested, wait)
        finally:
            self._returns_by = outer
        self.warmup_report = {"requested": requested, "filled": min(filled, requested),
                              "wait_ms": round((time.perf_counter() - t0) * 1000, 3)}
        self.heartbeat.emit("fineweb_loader_warmup", step=0, **self.warmup_report)
        return self.warmup_report

    # -- iteration ---------------------------------------------------------------------------------
    def __iter__(self) -> "FineWebLoader":
        return self

    def _fetch(self, timeout: float, limit: str | None = None):
        """The next (batch, position) within `timeout` seconds; EndOfData after the last. `limit`: how the
        LoaderTimeout message states the limit (default: `timeout` itself)."""
        try:
            if self._prefetcher is None:
                with scoped(self._retries):  # the producer runs on this thread
                    return next(self._inline)  # type: ignore[arg-type]
            return self._prefetcher.get(timeout)
        except StopIteration:
            self._done = True
            raise EndOfData("the loader's data ended (its last epoch)") from None
        except TimeoutError:
            which = "first batch" if self._steps == 0 else f"batch {self._steps + 1}"
            stage = self.pipeline.stage
            limit = limit or f"{timeout:g} s"
            raise LoaderTimeout(f"no {which} within {limit}; producer stuck at: {stage}", stage=stage) from None
        except ProducerFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, FweError):
                raise cause
            raise LoaderError(f"loader producer failed while {self.pipeline.stage}: {exc}") from cause

    def __next__(self):
        try:
            return self.next_batch()
        except EndOfData:
            raise StopIteration from None

    @property
    def returns_by(self) -> float | None:
        """While `next_batch` (or `warmup`) waits: the latest time.perf_counter() moment it returns by (a synthetic
        fallback included); None between calls. A watchdog that can only end the process fires only after it."""
        return self._returns_by

    def next_batch(self, timeout: float | None = None, deadline: float | None = None):
        """The next batch, waiting at most `timeout` seconds (default loader_timeout) and never past `deadline` (a
        time.perf_counter() moment, e.g. a limit for several batches); the limits bind with prefetch only (without
        it the read runs in this thread).

        With synthetic_on_fail, a first batch that fails or times out falls back to synthetic data (loudly: a
        warning, a heartbeat event, `fallback` in stats), and the fallback's first batch gets the same limit again
        (even past `deadline`: the caller sees `fallback` set and may give the batches after it a new one).
        Raises EndOfData after the last batch (plain iteration just ends), LoaderTimeout naming the producer's
        stage, or the producer's own error (a FweError as is, anything else as LoaderError with the cause
        chained)."""
        if self._closed:
            raise EndOfData("the loader is closed")
        called = time.perf_counter()
        limit = self.config.loader_timeout if timeout is None else timeout
        stated = f"{limit:g} s"
        if deadline is not None and deadline - called < limit:
            limit = max(0.0, deadline - called)
            stated = f"{round(limit, 3):g} s (the caller's deadline)"
        ends = called + limit
        can_fall_back = self._steps == 0 and self.config.synthetic_on_fail and self.fallback is None
        # a fallback first waits for the failed producer (its tokenizer, then its thread: FALLBACK_JOIN_S each)
        self._returns_by = ends + (2 * FALLBACK_JOIN_S + limit if can_fall_back else 0.0)
        try:
            if self._steps == 0 and self.warmup_report is None and self.config.warmup_batches:
                self.warmup(ends - time.perf_counter())
            if self._taken == 1:  # a consumer back for more than a first batch: reading ahead pays off now
                self.pipeline.documents.read_ahead_now()
            began = self.waits.begin(self.pipeline.clock, self._prefetcher)
            try:
                batch, self._position, segment = self._fetch(max(0.0, ends - time.perf_counter()), stated)
            except FweError as exc:
                if not can_fall_back:
                    self.heartbeat.emit("fineweb_loader_error", step=self._steps, error=str(exc))
                    raise
                batch, self._position, segment = self._fall_back(exc, limit)
        finally:
            self._returns_by = None
        dt, by_stage, fill = self.waits.end(began, self.pipeline.clock)
        self._steps += 1
        self._taken += 1
        self.pipeline.recent.release_before(self._position)
        self.fetch_s.add(dt)
        source = self.pipeline.documents.opened
        fields = source.on_batch(segment, self._steps, dt, self.heartbeat.emit) if source is not None else {}
        if self._steps == 1:
            self.first_batch_s = time.perf_counter() - self.created
            shard = self.config.shard
            self.heartbeat.emit("fineweb_loader_ready", step=0, dt=round(self.first_batch_s, 6),
                                shard=[shard.mod, shard.rem], shard_from=self.config.shard_from)
        self.heartbeat.fetch(self._steps, dt, **fields, queue_fill=fill, wait_s_by_stage=rounded(by_stage))
        return batch

    def _fall_back(self, exc: FweError, limit: float):
        """Switch to synthetic data after the first batch failed with `exc`; the synthetic first batch within `limit`."""
        reason = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"fwe: FALLING BACK TO SYNTHETIC DATA — real source failed: {reason}", RuntimeWarning,
                      stacklevel=3)
        self.heartbeat.emit("fineweb_loader_error", step=0, error=reason)
        self.heartbeat.emit("fineweb_loader_fallback", step=0, reason=reason, source_from=self.config.source.kind)
        old = self.config
        loaded = self.pipeline.loaded_tokenizer(timeout=FALLBACK_JOIN_S)  # the run's own, unless it failed
        tokenizer = loaded.name if loaded is not None else "byte"
        self._stop_producer(FALLBACK_JOIN_S, abandon_encodes=True)
        self.fallback = {"reason": reason, "from_source": old.source.kind, "to_source": "synthetic",
                         "tokenizer": tokenizer}
        self._start(Resumed(dataclasses.replace(old, source=SourceSpec("synthetic"), tokenizer=tokenizer,
                                                shuffle_seed=None, grow=False)))
        self._returns_by = time.perf_counter() + limit
        return self._fetch(limit)

    # -- resume ------------------------------------------------------------------------------------
    def state(self) -> State:
        """Where this loader is (state.model.State): fresh, after the last batch it returned, or done."""
        p = self.pipeline
        return self._taker.take(p.documents, p.recent, self._position, self._steps, self._done)

    def state_dict(self) -> dict:
        """Where this loader is, as JSON (`state()`'s): `FineWebLoader(config, state=...)` (or `load_state_dict`)
        continues right after the last batch this loader returned (ends at once after its last)."""
        return self.state().to_json()

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state` (a `state_dict()`), as `FineWebLoader(config, state=state)` would: the producer
        restarts right after that state's last batch, and the batch after it is this loader's first again (its
        first-batch time, warmup and the source's read-ahead gate start over). ConfigError naming the setting when
        the state was saved under another one; LoaderError on a closed loader."""
        if self._closed:
            raise LoaderError("load_state_dict on a closed loader: make a new FineWebLoader(config, state=state)")
        resumed = check_states(state, self.config)
        self._stop_producer(FALLBACK_JOIN_S)
        self.config = resumed.config
        self._steps, self.first_batch_s, self.warmup_report = 0, None, None
        self.created = time.perf_counter()
        self._start(resumed)

    # -- stats -------------------------------------------------------------------------------------
    def stats(self) -> dict:
        """Counters and latencies so far (JSON-able)."""
        p = self.pipeline
        tok = p.tokenizer
        fetch = self.fetch_s.percentiles_ms()
        tokenize_s, by_backend = p.encoded()
        return {
            "steps": self._steps, "first_batch_s": self.first_batch_s,
            "fetch_p50_ms": fetch["p50"], "fetch_p95_ms": fetch["p95"], "fetch_p99_ms": fetch["p99"],
            "fetch_max_ms": fetch["max"], "docs": p.docs, "tokens_produced": p.tokens, "batches_produced": p.batches,
            "tokenize_s": round(tokenize_s, 6), "tokenizer_threads": p.threads, "cropped": p.cropped(),
            "stage": p.stage,
            "tokenizer": None if tok is None else dict(described(tok), docs_by_backend=by_backend),
            "source": p.documents.describe(), "warmup": self.warmup_report, "fallback": self.fallback,
            **p.documents.figures(p.docs, p.tokens),
            "producer_alive": self.producer_alive,
            **self.waits.stats(p.clock),  # mean queue fill; the waits and the producer's time by stage (flow.stages)
        }
