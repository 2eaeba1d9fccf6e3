"""A mix's schedule delivered: each stage's share of the tokens within 0.005 of its plan and each tenth of a ramp
within 0.01, on 1 rank and on each of 3; a state saved at 20 points across its stages and ramps resumes byte for
byte; two ranks saved mid-ramp and resumed by three deliver every document once, the schedule going on at the step
they stopped at. The sources' documents are made of one letter each (byte tokenizer): every token says its source."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.sources.position import decode
from fwe_cli.loader.tokenization.names import BYTE_EOS_ID
from tests.helpers import check_resumes_at, write_jsonl
from tests.loader.delivered import each_document_once, pieces

LETTERS = b"abc"
# constant 3:1:0 to step 100, a ramp to 1:1:2 to step 500, constant 0:1:1 to step 600, then held
SCHEDULE = [{"until_step": 100, "weights": {"a": 3, "b": 1}},
            {"until_step": 500, "weights": {"a": 1, "b": 1, "c": 2}, "ramp": "linear"},
            {"until_step": 600, "weights": {"b": 1, "c": 1}}]


def letter_sources(tmp_path, docs: int = 2000, stop: str = "cycle") -> str:
    """Three JSONL sources (ids a, b, c), document i of each `5 + i % 26` bytes of its letter, and a mix file of
    them with SCHEDULE."""
    entries = []
    for letter in LETTERS.decode():
        path = write_jsonl(tmp_path / f"{letter}.jsonl", [{"text": letter * (5 + i % 26)} for i in range(docs)])
        entries.append({"id": letter, "local_path": str(path), "stop": stop})
    mix = tmp_path / "mix.json"
    mix.write_bytes(orjson.dumps({"sources": entries, "schedule": SCHEDULE}))
    return str(mix)


def planned(step: int) -> np.ndarray:
    """The shares in force at `step`, worked out here from SCHEDULE's numbers (not by the loader's code)."""
    const1, ramp_to, const3 = np.array([3, 1, 0]) / 4, np.array([1, 1, 2]) / 4, np.array([0, 1, 1]) / 2
    if step < 100:
        return const1
    if step < 500:
        return const1 + (ramp_to - const1) * (step - 100) / 400
    return const3


def per_step(batches: list[np.ndarray]) -> np.ndarray:
    """[steps, sources]: each batch's tokens of each source (an end-of-text token counted with its document)."""
    flat = np.concatenate([b.reshape(-1) for b in batches]).astype(np.int64)
    owner = np.full(flat.shape, -1)
    for i, letter in enumerate(LETTERS):
        owner[flat == letter] = i
    eos = np.flatnonzero(flat == BYTE_EOS_ID)
    owner[eos] = owner[eos - 1]
    rows = owner.reshape(len(batches), -1)
    return np.stack([(rows == i).sum(1) for i in range(len(LETTERS))], axis=1)


def gaps(counts: np.ndarray, lo: int, hi: int) -> float:
    """The largest gap between a source's share of steps [lo, hi) and the mean of its planned shares there."""
    got = counts[lo:hi].sum(0) / counts[lo:hi].sum()
    plan = np.mean([planned(s) for s in range(lo, hi)], axis=0)
    return float(np.abs(got - plan).max())


@pytest.mark.parametrize("ranks", [1, 3])
def test_each_stage_and_each_tenth_of_a_ramp_holds_its_planned_share_on_every_rank(tmp_path, ranks):
    """700 steps of 8 x 32 tokens on each rank: every stage's share within 0.005 of its plan, every tenth of the
    ramp within 0.01, and after the last stage its weights held."""
    mix = letter_sources(tmp_path)
    for rem in range(ranks):
        config = resolve_config(env={}, mix=mix, tokenizer="byte", seq_len=32, batch_size=8, shard_mod=ranks,
                                shard_rem=rem)
        with FineWebLoader(config) as loader:
            counts = per_step([loader.next_batch().copy() for _ in range(700)])
        for lo, hi in ((0, 100), (100, 500), (500, 600), (600, 700)):
            assert gaps(counts, lo, hi) < 0.005, (rem, lo, hi, gaps(counts, lo, hi))
        for decile in range(10):
            lo = 100 + 40 * decile
            assert gaps(counts, lo, lo + 40) < 0.01, (rem, decile, gaps(counts, lo, lo + 40))
        assert counts[:95, 2].sum() == 0 and counts[505:, 0].sum() == 0  # a weight of 0 is never read


CUTS = (1, 3, 6, 9, 10, 11, 13, 16, 20, 24, 27, 29, 30, 31, 34, 37, 39, 40, 41, 47)


def test_a_state_saved_at_20_points_across_stages_and_ramps_resumes_byte_for_byte(tmp_path):
    """A constant stage, two ramps, a constant stage, then its weights held: states saved after each of 20 batches
    (inside a stage, at each boundary, inside the ramps, past the last stage), carried as JSON, resume under another
    Q and doc batch with the uninterrupted run's next 6 batches, byte for byte."""
    mix = letter_sources(tmp_path, docs=400)
    schedule = [{"until_step": 10, "weights": {"a": 1, "b": 1}},
                {"until_step": 30, "weights": {"a": 1, "c": 3}, "ramp": "linear"},
                {"until_step": 40, "weights": {"b": 2, "c": 1}, "ramp": "linear"},
                {"until_step": 45, "weights": {"a": 1}}]
    data = orjson.loads(open(mix, "rb").read())
    open(mix, "wb").write(orjson.dumps(dict(data, schedule=schedule)))
    check_resumes_at(resolve_config(env={}, mix=mix, tokenizer="byte", seq_len=16, batch_size=4), CUTS, 6)


def test_two_ranks_saved_mid_ramp_resume_on_three_with_every_document_once(tmp_path):
    """Two ranks read a scheduled mix of one-token batches into its ramp and save their states, each inside a
    document of the source that ends the mix; three ranks resume from all of them and read to the end. Every
    document of that source comes once (one cut by the change: its start on an old rank, its rest on a new one),
    every other document read comes whole and once, and the new world's clocks begin at the step the old ranks
    reached (the furthest of them)."""
    texts = {letter: [f"{letter}{i:03d}" + letter * (i % (9 if letter == "a" else 5)) for i in range(n)]
             for letter, n in (("a", 60), ("b", 900))}
    a, b = (write_jsonl(tmp_path / f"{letter}.jsonl", [{"text": t} for t in texts[letter]]) for letter in "ab")
    mix = tmp_path / "mix.json"
    mix.write_bytes(orjson.dumps({"sources": [{"id": "a", "local_path": str(a)}, {"id": "b", "local_path": str(b)}],
                                  "schedule": [{"until_step": 100, "weights": {"a": 1, "b": 3}},
                                               {"until_step": 900, "weights": {"a": 3, "b": 1}, "ramp": "linear"}]}))
    shape = dict(tokenizer="byte", seq_len=1, batch_size=1, doc_batch=3)
    old, states = [], []
    for rem, cut in ((0, 250), (1, 320)):
        with FineWebLoader(resolve_config(env={}, mix=str(mix), shard_mod=2, shard_rem=rem, **shape)) as loader:
            tokens = [int(loader.next_batch()[0, 0]) for _ in range(cut)]
            while not pieces(tokens)[1].startswith("a"):  # stopped inside a document of a (the one that ends the mix)
                tokens.append(int(loader.next_batch()[0, 0]))
            old.append(tokens)
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    steps = max(len(tokens) for tokens in old)
    new = []
    for rem in range(3):
        with FineWebLoader(resolve_config(env={}, mix=str(mix), shard_mod=3, shard_rem=rem, **shape),
                           state=states) as loader:
            tokens = [int(loader.next_batch()[0, 0])]
            cursor = decode(loader.state_dict()["position"]["doc"])
            assert cursor.origin.step == cursor.step == steps  # the schedule goes on at the step the world left
            tokens += [int(batch[0, 0]) for batch in loader]
        new.append(tokens)
    each_document_once(texts["a"], old, new, maybe=texts["b"])
