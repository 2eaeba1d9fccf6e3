"""Failures are loud and bounded: producer errors reach the consumer, hangs time out, threads never leak. (How a hang
ends the `fwe smoke` process, by the loader's deadline or the watchdog: tests/cli/test_smoke_cmd.py.)"""

import threading
import traceback

import orjson
import pytest

from fwe_cli.loader import FineWebLoader, LoaderError, LoaderTimeout, SourceError, resolve_config
from fwe_cli.loader.documents import Document
from fwe_cli.loader.stream import DocumentStream
from tests.helpers import invoke


def fwe_threads():
    return [t for t in threading.enumerate() if t.name.startswith("fwe-") and t.is_alive()]


def exploding_stream(after):
    def __iter__(self):
        for i in range(after):
            yield Document(text=f"document number {i} " * 50, id=str(i))
        raise RuntimeError("disk went away")

    return __iter__


@pytest.mark.parametrize("prefetch,raised", [(True, LoaderError), (False, RuntimeError)])
def test_producer_error_is_raised_in_consumer_with_cause(monkeypatch, prefetch, raised):
    """An exception mid-stream surfaces in the consumer (chained, traceback intact) — never a silent end."""
    monkeypatch.setattr(DocumentStream, "__iter__", exploding_stream(30))
    cfg = resolve_config(env={}, source="synthetic", seq_len=64, batch_size=2, doc_batch=4, prefetch=prefetch)
    got = 0
    with FineWebLoader(cfg) as loader:
        with pytest.raises(raised, match="disk went away") as info:
            for _ in loader:
                got += 1
    assert got > 0  # it really failed mid-stream, not at the start
    err = info.value
    assert type(err) is raised
    if prefetch:
        assert isinstance(err.__cause__, RuntimeError)
        frames = "".join(traceback.format_tb(err.__cause__.__traceback__))
        assert 'raise RuntimeError("disk went away")' in frames  # the producer's own frame survives


def test_fwe_error_from_source_keeps_its_type(tmp_path):
    """A SourceError in the producer (strict bad record) reaches the consumer as SourceError naming file:line."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"text": "fine"}\n' * 3 + b"{not json\n")
    cfg = resolve_config(env={}, local_path=str(path), bad_records="error", seq_len=4)
    with FineWebLoader(cfg) as loader, pytest.raises(SourceError, match="bad JSON") as info:
        list(loader)
    assert f"{path}:4" in str(info.value)


def test_no_thread_outlives_close(synthetic_jsonl):
    """After close (mid-stream, queue full), no fwe thread this loader started is alive (those of other loaders in
    this process, before it, are left as they were)."""
    before = set(fwe_threads())
    cfg = resolve_config(env={}, source="synthetic", seq_len=64, queue_depth=2, warmup_batches=2, tokenizer_threads=2)
    loader = FineWebLoader(cfg)
    next(loader)
    assert loader.warmup()["filled"] == 2  # the queue is full again: the producer is blocked on put
    assert set(fwe_threads()) > before
    loader.close()
    assert set(fwe_threads()) <= before
    assert not loader.producer_alive


def test_hanging_source_raises_timeout_naming_stage(tmp_path, synthetic_jsonl, monkeypatch):
    """A source whose read blocks forever gives LoaderTimeout naming the stuck stage."""
    release = threading.Event()

    def blocked_read(files, pieces, at, bad, strict, filtered=None):
        release.wait()  # a read that never returns (until the test lets it go, so the daemon thread can finish)
        yield from ()

    monkeypatch.setattr("fwe_cli.loader.files.text.read_local", blocked_read)
    cfg = resolve_config(env={}, local_path=str(synthetic_jsonl), loader_timeout=0.5)
    loader = FineWebLoader(cfg)
    try:
        with pytest.raises(LoaderTimeout, match="^no first batch within 0.5 s; producer stuck at: ") as info:
            next(loader)
        assert "reading first document" in info.value.stage
    finally:
        release.set()
        loader.close(join_timeout=0.1)


def test_synthetic_on_fail_falls_back_loudly_and_records_it(tmp_path):
    """With synthetic_on_fail, a failing first batch falls back to synthetic data, warns, and says so in stats."""
    cfg = resolve_config(env={}, local_path=str(tmp_path / "missing.jsonl"), synthetic_on_fail=True, seq_len=32)
    with pytest.warns(RuntimeWarning, match="FALLING BACK TO SYNTHETIC"):
        with FineWebLoader(cfg) as loader:
            batch = next(loader)
            stats = loader.stats()
    assert batch.shape == (1, 32)
    assert stats["fallback"]["from_source"] == "local" and "missing.jsonl" in stats["fallback"]["reason"]
    assert stats["source"]["kind"] == "synthetic"


def test_without_fallback_missing_file_is_clear_error(tmp_path):
    """Without synthetic_on_fail, a missing file is a SourceError saying so, never synthetic data."""
    cfg = resolve_config(env={}, local_path=str(tmp_path / "missing.jsonl"))
    with FineWebLoader(cfg) as loader, pytest.raises(SourceError, match="no such file"):
        next(loader)


def test_smoke_synthetic_on_fail_is_recorded_in_artifact(tmp_path):
    """The fallback is never silent: the artifact and the --json object carry it (the same object), and stderr says
    so."""
    with pytest.warns(RuntimeWarning, match="FALLING BACK TO SYNTHETIC"):
        result = invoke("smoke", "--local-path", str(tmp_path / "nope.jsonl"), "--synthetic-on-fail", "--json",
                        "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    output = orjson.loads(result.stdout)
    assert output["fallback"]["from_source"] == "local"
    assert orjson.loads(open(output["artifact"], "rb").read()) == output
    assert "FALLBACK" in result.stderr
