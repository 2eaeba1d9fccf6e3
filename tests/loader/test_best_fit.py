"""Best-fit packing (--pack best-fit): every row starts at a document and is filled from a buffer, cropping only when
no document fits; the rows depend only on the documents (not doc batch, threads or queue), a state after any batch
resumes byte-exact (through JSON, a DataLoader's workers, a changed world size), and bad settings are one-line
errors naming what was typed."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.rows.best_fit import RAMP, BestFit, Mark, decode_taken, encode_taken
from fwe_cli.loader.shard import Shard
from tests.helpers import invoke, write_jsonl
from tests.train.corpus import doc_numbers

BYTE_EOS = 256


def _docs(lengths: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Documents of the given lengths, document i's tokens all equal to i."""
    ids = np.concatenate([np.full(n, i, dtype=np.int32) for i, n in enumerate(lengths)])
    return ids, np.array(lengths, dtype=np.int64), np.zeros(len(lengths), dtype=np.int64)


def _rows(fit: BestFit, lengths: list[int], chunk: int) -> list[list[tuple[int, int]]]:
    """The rows (each a list of (document, tokens placed)) of documents of `lengths` fed `chunk` at a time."""
    ids, lens, offs = _docs(lengths)
    pieces, start = [], 0
    for lo in range(0, len(lengths), chunk):
        hi = min(lo + chunk, len(lengths))
        end = start + int(lens[lo:hi].sum())
        pieces += list(fit.add(ids[start:end], lens[lo:hi], offs[lo:hi]))
        start = end
    pieces += list(fit.finish())
    rows, row = [], []
    for doc, take, full in pieces:
        row.append((int(doc.ids[0]), take))
        if full:
            rows.append(row)
            row = []
    return rows + ([row] if row else [])


def _cropped(rows: list, lengths: list[int]) -> tuple[int, int]:
    """(tokens, documents) the rows left out of the documents they placed."""
    lost = [lengths[doc] - take for row in rows for doc, take in row if take < lengths[doc]]
    return sum(lost), len(lost)


def test_a_row_takes_the_largest_document_that_fits_and_crops_the_shortest_only_when_none_does():
    """Row 10, the stream's 7 documents all in the buffer: a document longer than a row (12) goes first, at a row's
    start, losing only its 2 tokens over the row; then each row takes the largest that fits the room left (9 then 1,
    7 then 3, 6 then 4: every row exactly full). When nothing fits the room (2 left, documents of 5 and 6), the
    shortest is cropped."""
    lengths = [7, 6, 3, 4, 12, 9, 1]
    rows = _rows(BestFit(10, 10), lengths, chunk=2)
    assert rows == [[(4, 10)], [(5, 9), (6, 1)], [(0, 7), (2, 3)], [(1, 6), (3, 4)]]
    assert _cropped(rows, lengths) == (2, 1)
    rows = _rows(BestFit(10, 10), [8, 5, 6], chunk=3)
    assert rows == [[(0, 8), (1, 2)], [(2, 6)]]
    assert _cropped(rows, [8, 5, 6]) == (3, 1)


def test_rows_depend_only_on_the_documents_not_on_how_they_arrive():
    """The same documents fed one at a time, 7 at a time or all at once give the same rows; every row but the last
    is exactly full, and every document is placed once (whole, or cropped at a row's end)."""
    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.lognormal(5, 1.2, 3000).clip(1, 5000)]
    rows = [_rows(BestFit(512, 100), lengths, chunk) for chunk in (1, 7, 3000)]
    assert rows[0] == rows[1] == rows[2]
    assert all(sum(t for _, t in row) == 512 for row in rows[0][:-1])
    assert sorted(d for row in rows[0] for d, _ in row) == list(range(3000))


def test_a_document_is_held_at_most_while_capacity_more_are_read():
    """The age rule: a document that fits nowhere well (one token short of a row) still leaves the buffer once
    `capacity` documents were read after it, so what a resume re-reads stays near a few times capacity."""
    fit = BestFit(100, 50)
    lengths = [99] + [50] * 400
    ids, lens, offs = _docs(lengths)
    for i, (doc, _take, _full) in enumerate(fit.add(ids, lens, offs)):
        if doc.ids[0] == 0:
            break
    assert fit.read - 1 <= 50 + 1
    assert fit.mark().read <= 2 * 50 + RAMP


def test_a_mark_restores_the_buffer_and_the_same_rows_follow():
    """After any piece that completes a batch of 4 rows, a BestFit restored from the mark and fed the documents from
    the mark's `at` on yields the same rows as the uninterrupted one."""
    rng = np.random.default_rng(1)
    lengths = [int(n) for n in rng.lognormal(4.5, 1.0, 1500).clip(1, 2000)]
    whole = _rows(BestFit(256, 64), lengths, chunk=16)
    ids, lens, offs = _docs(lengths)
    for cut in (1, 5, 40):
        fit, rows, done = BestFit(256, 64), 0, None
        for _doc, _take, full in fit.add(ids, lens, offs):
            rows += full
            if full and rows == cut * 4:
                done = orjson.loads(orjson.dumps(fit.mark().to_json()))
                break
        resumed = BestFit(256, 64, done)
        starts = np.concatenate(([0], np.cumsum(lens)))
        at = done["at"]
        tail = _docs(lengths)[0][starts[at]:]
        rest, row = [], []
        for doc, take, full in [*resumed.add(tail, lens[at:], offs[at:]), *resumed.finish()]:
            row.append((int(doc.ids[0]), take))
            if full:
                rest.append(row)
                row = []
        assert rest + ([row] if row else []) == whole[cut * 4:], cut


def test_a_bad_mark_is_a_one_line_error():
    """A mark that is not {at, read, taken}, or whose bitmap is not base64 or too short, is a ConfigError."""
    assert decode_taken(encode_taken(np.array([True, False, True])), 3).tolist() == [True, False, True]
    for bad in ({"at": 0}, {"at": -1, "read": 0, "taken": ""}, {"at": 0, "read": 9, "taken": "!!"},
                {"at": 0, "read": 64, "taken": encode_taken(np.ones(8, dtype=bool))}):
        with pytest.raises(ConfigError, match="best-fit"):
            BestFit(10, 3, bad)
    assert Mark.from_json({"at": 3, "read": 0, "taken": ""}) == Mark(3, 0, "")


def _config(**kw):
    common = dict(env={}, source="synthetic", seed=5, tokenizer="byte", seq_len=1024, batch_size=4, pack="best-fit",
                  pack_buffer=200)
    return resolve_config(**{**common, **kw})


def _take(config, n: int, state=None) -> tuple[list, dict]:
    state = None if state is None else orjson.loads(orjson.dumps(state))
    with FineWebLoader(config, state=state) as loader:
        batches = [loader.next_batch() for _ in range(n)]
        return batches, loader.state_dict()


def _same(a: list, b: list) -> bool:
    flat = (lambda x: x["input"] if isinstance(x, dict) else x)
    return len(a) == len(b) and all(np.array_equal(flat(x), flat(y)) for x, y in zip(a, b))


def test_every_row_starts_at_a_document_and_best_fit_crops_less_than_greedy():
    """With labels, boundaries and bos: every row's first position is 0 and its first token the delimiter, labels
    are the inputs shifted by one within the row, and over the same 40 batches of 4 x 4096 best-fit crops under
    0.6 x the tokens greedy crops (counted in stats, with the packing)."""
    kw = dict(labels=True, boundaries=True, bos=True, seq_len=4096)
    crops = {}
    for pack in ("greedy", "best-fit"):
        with FineWebLoader(_config(pack=pack, **kw)) as loader:
            batches = [loader.next_batch() for _ in range(40)]
            stats = loader.stats()
        crops[pack] = stats["cropped"]["tokens"] / stats["tokens_produced"]
        assert stats["cropped"]["pack"] == pack
        for batch in batches:
            assert (batch["positions"][:, 0] == 0).all() and (batch["input"][:, 0] == BYTE_EOS).all()
            assert np.array_equal(batch["labels"][:, :-1], batch["input"][:, 1:])
            assert (batch["cu_seqlens"][:, 0] == 0).all()
    assert crops["best-fit"] < 0.6 * crops["greedy"]


def test_the_same_rows_for_any_doc_batch_queue_or_threads():
    """doc batch 2 or 64, queue 1 or 16, 1 or 2 tokenizer threads, prefetch on or off: the same 30 batches."""
    reference, _ = _take(_config(), 30)
    for kw in (dict(doc_batch=2, queue_depth=1), dict(doc_batch=64, tokenizer_threads=2, queue_depth=16),
               dict(prefetch=False, doc_batch=7)):
        batches, _ = _take(_config(**kw), 30)
        assert _same(batches, reference), kw


@pytest.mark.parametrize("cut", [1, 7])
def test_a_state_after_batch_n_resumes_with_the_next_batches(cut):
    """A state saved after batch `cut` (through JSON), resumed by a loader of another doc batch: its batches are those
    of the uninterrupted run after `cut`, byte for byte, with labels and boundaries."""
    kw = dict(labels=True, boundaries=True)
    whole, _ = _take(_config(**kw), cut + 5)
    _, state = _take(_config(**kw), cut)
    assert "pack" in state["position"] and state["matching"]["pack"] == "best-fit"
    rest, _ = _take(_config(doc_batch=3, **kw), 5, state)
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(rest, whole[cut:], strict=True)
               for k in ("input", "labels", "positions", "cu_seqlens"))


def test_a_state_of_another_packing_or_buffer_is_refused_naming_it():
    """A greedy state given to a best-fit loader, and a best-fit state given to one of another buffer, are refused
    naming the setting and both values; nothing is read."""
    _, greedy = _take(_config(pack="greedy"), 2)
    with pytest.raises(ConfigError, match="saved with pack='greedy', this loader has pack='best-fit'"):
        FineWebLoader(_config(), state=greedy)
    _, best = _take(_config(), 2)
    with pytest.raises(ConfigError, match="saved with pack_buffer=200, this loader has pack_buffer=300"):
        FineWebLoader(_config(pack_buffer=300), state=best)


def test_the_end_of_the_data_empties_the_buffer_and_no_document_is_lost(tmp_path):
    """A small file read to its end: the buffer is emptied into the last rows, so every document but those of the
    final partial batch (2 rows of 64: at most 6 of these) begins in some row, each once, whole or cropped."""
    texts = [f"<{i:03d}>" + "x" * (5 + (i * 37) % 90) + f"</{i:03d}>" for i in range(300)]
    path = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    config = resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=64, batch_size=2,
                            pack="best-fit", pack_buffer=40, boundaries=True)
    with FineWebLoader(config) as loader:
        batches = list(loader)
    begun = sum(int((b["positions"] == 0).sum()) for b in batches)  # a document's first token is at position 0
    numbers = doc_numbers(np.concatenate([b["input"].reshape(-1) for b in batches]))  # (those not cropped into
    assert len(numbers) == len(set(numbers)) <= begun and 300 - 6 <= begun <= 300  # their tag)


def _begun(batches: list) -> tuple[list[int], int]:
    """(the numbers of the documents begun in the batches' rows, in order; how many more begun were cropped before
    their 5-token tag ended), read from the tokens at position 0."""
    numbers, short = [], 0
    for batch in batches:
        for ids, positions in zip(batch["input"], batch["positions"]):
            starts = [*np.flatnonzero(positions == 0).tolist(), len(ids)]
            for lo, hi in zip(starts, starts[1:]):
                if hi - lo >= 5:
                    numbers.append(int(bytes(ids[lo + 1:lo + 4].tolist())))
                else:
                    short += 1
    return numbers, short


def test_a_changed_world_size_reads_every_document_at_least_once(tmp_path):
    """2 readers stop after some batches; 3 readers continue from both states: every document begins in some row
    over the two worlds (but those of the new readers' final partial batches), none lost; the documents a best-fit
    buffer had taken past its oldest held one are read again, at most its span (about 3 x buffer) per old reader."""
    texts = [f"<{i:03d}>" + "y" * (5 + (i * 53) % 70) + f"</{i:03d}>" for i in range(600)]
    path = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    base = resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=64, batch_size=2, pack="best-fit",
                          pack_buffer=30, boundaries=True)
    batches, states = [], []
    for rank, taken in enumerate([20, 35]):
        taken_batches, state = _take(base.replace(shard=Shard(2, rank)), taken)
        batches += taken_batches
        states.append(state)
    for rank in range(3):
        with FineWebLoader(base.replace(shard=Shard(3, rank)), state=orjson.loads(orjson.dumps(states))) as loader:
            batches += list(loader)
    numbers, short = _begun(batches)
    assert len(set(numbers)) + short >= 600 - 3 * 6  # (a final partial batch of 2 rows of 64 holds at most 6)
    assert len(numbers) - len(set(numbers)) <= 2 * (3 * 30 + RAMP)


def test_cli_pack_flags_refuse_bad_values_in_one_line(tmp_path):
    """`fwe smoke` with --pack of another name, --pack-buffer 0, NSA_FWE_PACK of another name, or --align-rows with
    --pack best-fit: exit 2 and one line naming the value; --pack best-fit --json reports the crops."""
    for args, env, needle in ((["--pack", "bestfit"], {}, "--pack must be one of stream, greedy, best-fit; got "
                                                          "'bestfit'"),
                              (["--pack-buffer", "0"], {}, "--pack-buffer must be an integer from 1"),
                              ([], {"NSA_FWE_PACK": "tight"}, "NSA_FWE_PACK must be one of"),
                              (["--align-rows", "--pack", "best-fit"], {}, "--align-rows is --pack greedy")):
        result = invoke("smoke", "--source", "synthetic", "--tokenizer", "byte", *args, env=env)
        assert result.exit_code == 2 and needle in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    result = invoke("smoke", "--source", "synthetic", "--tokenizer", "byte", "--seq-len", "512", "--batch", "2",
                    "--batches", "3", "--pack", "best-fit", "--json", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    cropped = orjson.loads(result.stdout)["loader"]["cropped"]
    assert cropped["pack"] == "best-fit" and cropped["tokens"] > 0
