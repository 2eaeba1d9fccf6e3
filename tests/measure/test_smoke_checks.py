"""`fwe smoke`'s checks of the batches it pulls (shape, dtype, id range, separators) are made as the batches come, so a
smoke of many batches keeps O(1) of them (all of them only to save them: --save-batches)."""

import weakref

import numpy as np

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.measure.smoke import SEPARATOR_CHECK_MIN_TOKENS, BatchChecks, SmokeRun

EOS = 256


def _verdicts(checks: list[dict]) -> dict[str, bool]:
    return {check["name"]: check["ok"] for check in checks}


def test_checks_made_batch_by_batch_find_each_fault():
    """Good batches pass every check; a batch of another shape (named by its number), another dtype, an id past the
    vocabulary, and no separator in enough tokens each fail their own check and only it."""
    good = BatchChecks((2, 4))
    for n in range(3):
        good.add(np.full((2, 4), n, dtype=np.int32), EOS)
    good.add(np.array([[1, EOS, 2, 3], [4, 5, 6, 7]], dtype=np.int32), EOS)
    assert _verdicts(good.checks(257, EOS)) == {"shape": True, "dtype": True, "id_range": True, "separators": True}
    assert good.batches == 4 and good.tokens == 32 and good.separators == 1

    bad = BatchChecks((2, 4))
    bad.add(np.zeros((2, 4), dtype=np.int32), EOS)
    bad.add(np.zeros((1, 4), dtype=np.int32), EOS)  # batch 1: another shape
    bad.add(np.zeros((2, 4), dtype=np.int64), EOS)
    bad.add(np.array([[0, 0, 0, 300], [0, 0, 0, 0]], dtype=np.int32), EOS)
    checks = {check["name"]: check for check in bad.checks(257, EOS)}
    assert _verdicts(checks.values()) == {"shape": False, "dtype": False, "id_range": False, "separators": True}
    assert "wrong in batches [1]" in checks["shape"]["detail"] and "int64" in checks["dtype"]["detail"]
    assert "[0, 300]" in checks["id_range"]["detail"]

    rows = SEPARATOR_CHECK_MIN_TOKENS // 1024
    none = BatchChecks((rows, 1024))
    none.add(np.zeros((rows, 1024), dtype=np.int32), EOS)
    assert _verdicts(none.checks(257, EOS))["separators"] is False


def test_many_wrong_shapes_are_counted_and_the_first_named():
    """A stream of batches all of the wrong shape: the check names the first ten and counts the rest, not a list as
    long as the run."""
    checks = BatchChecks((1, 4))
    for _ in range(25):
        checks.add(np.zeros((1, 3), dtype=np.int32), EOS)
    shape = checks.checks(257, EOS)[0]
    assert shape["ok"] is False and shape["detail"].endswith("wrong in batches [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] and 15 more")


def test_batches_before_the_tokenizer_are_held_until_its_end_of_document_id_is_known():
    """A warm Hub start hands over its kept batches before the tokenizer loads: their separators are counted once an
    end-of-document id is known (a later batch's, or the one the checks are made with), none is lost."""
    checks = BatchChecks((1, 4))
    checks.add(np.array([[EOS, 1, EOS, 2]], dtype=np.int32), None)
    checks.add(np.array([[3, EOS, 4, 5]], dtype=np.int32), None)
    assert checks.separators == 0
    checks.add(np.array([[6, 7, 8, EOS]], dtype=np.int32), EOS)
    assert checks.separators == 4
    late = BatchChecks((1, 4))
    late.add(np.array([[EOS, 1, 2, 3]], dtype=np.int32), None)
    assert "1 document separators" in late.checks(257, EOS)[3]["detail"]


def _watch_batches(monkeypatch) -> tuple[list, list]:
    """Weak references to every batch a loader hands over, and how many of them were alive when that loader was
    first closed (right after the last one was pulled, while the smoke still runs)."""
    handed, alive_at_close, watched_loaders = [], [], []
    next_batch, close = FineWebLoader.next_batch, FineWebLoader.close

    def watched(self, *args, **kwargs):
        batch = next_batch(self, *args, **kwargs)
        handed.append(weakref.ref(batch))
        if not watched_loaders:
            watched_loaders.append(weakref.ref(self))
        return batch

    def closing(self, *args, **kwargs):
        if not alive_at_close and watched_loaders and watched_loaders[0]() is self:
            alive_at_close.append(sum(ref() is not None for ref in handed))
        return close(self, *args, **kwargs)

    monkeypatch.setattr(FineWebLoader, "next_batch", watched)
    monkeypatch.setattr(FineWebLoader, "close", closing)
    return handed, alive_at_close


def test_a_smoke_keeps_none_of_its_batches_unless_it_saves_them(monkeypatch, tmp_path):
    """500 batches: without save_path at most one is alive when the last has been pulled, and the checks still ran
    over all of them; with save_path every one is kept and saved."""
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=16, batch_size=1)
    handed, alive_at_close = _watch_batches(monkeypatch)
    result, failure = SmokeRun(config).finish(batches=500)
    assert failure is None and result["ok"] is True and result["batches"] == 500 and result["tokens"] == 8000
    assert len(handed) == 500 and alive_at_close[0] <= 1
    assert "ids in [" in {c["name"]: c for c in result["checks"]}["id_range"]["detail"]

    monkeypatch.undo()
    handed, alive_at_close = _watch_batches(monkeypatch)
    saved = tmp_path / "batches.npz"
    result, failure = SmokeRun(config).finish(batches=50, save_path=str(saved))
    assert failure is None and alive_at_close[0] == 50
    with np.load(saved) as data:
        assert data["batches"].shape == (50, 1, 16)
