"""The held-out split (`--holdout F --holdout-split train|holdout`, compose.holdout): a document's side is a pure
function of its id (of its text where it has none), so the two sides are disjoint, together the whole stream, and the
same for any shard, shuffle, file order, Q, doc batch, threads or resume; a state saved inside the split resumes it
exactly. The rule is restated here from its documentation (blake2b, 8 bytes, big-endian, below F * 2**64): changing
it would move every user's evaluation set."""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.compose.holdout import HoldoutOptions
from fwe_cli.loader.sources.spec import SOURCE_FLAGS, SourceSpec, held_out
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.measure.smoke import SmokeRun, read_resume_state
from tests.helpers import write_jsonl
from tests.loader.token_dirs import write_token_dir

DOCS = 10_000
SHAPE = dict(tokenizer="byte", seq_len=256, batch_size=2)


def held(key: str, fraction: float) -> bool:
    """The documented rule, written out: blake2b-64 of the key's UTF-8, as a fraction of 2**64, below `fraction`."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < fraction


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    """10,000 short documents with ids, in one JSONL file."""
    records = [{"text": f"document {i}: " + " ".join(random.Random(i).choices("abcdefgh", k=12)), "id": f"doc-{i}"}
               for i in range(DOCS)]
    return write_jsonl(tmp_path_factory.mktemp("holdout") / "docs.jsonl", records)


def config(path, side=None, fraction=0.1, **settings):
    return resolve_config(env={}, local_path=str(path), holdout=fraction, holdout_split=side, **SHAPE, **settings)


def ids(cfg) -> list[str]:
    return [doc.id for doc in DocumentStream(cfg)]


def test_the_sides_are_disjoint_and_give_every_document_on_each_shard_shuffled(docs):
    """--holdout 0.1 on 3 shards, shuffled: the 6 streams (2 sides x 3 shards) hold each of the 10,000 documents
    exactly once, and the held-out ones are exactly those the documented rule holds out."""
    seen: dict[tuple[str, int], list[str]] = {}
    for side in ("train", "holdout"):
        for rem in range(3):
            seen[side, rem] = ids(config(docs, side, shard_mod=3, shard_rem=rem, shuffle_seed=5, shuffle_window=500))
    every = [doc_id for stream in seen.values() for doc_id in stream]
    assert len(every) == len(set(every)) == DOCS
    held_out_ids = {doc_id for rem in range(3) for doc_id in seen["holdout", rem]}
    assert held_out_ids == {f"doc-{i}" for i in range(DOCS) if held(f"doc-{i}", 0.1)}
    assert all(len(seen[side, rem]) > 0 for side, rem in seen)


def test_the_held_out_share_of_10000_documents_is_the_fraction(docs):
    """The held-out side of 10,000 documents is 0.1 +- 0.01 of them; a smaller fraction's set lies inside it."""
    tenth = set(ids(config(docs, "holdout")))
    assert 0.09 * DOCS <= len(tenth) <= 0.11 * DOCS
    assert set(ids(config(docs, "holdout", fraction=0.05))) < tenth


def test_a_document_without_an_id_is_held_out_by_its_text(tmp_path):
    """TXT lines have no id (fwe names them file:line): the held-out lines are the same when the lines are moved to
    other files in another order, and they are those whose text the rule holds out."""
    lines = [f"line {i} of plain text" for i in range(2000)]
    (tmp_path / "one.txt").write_text("\n".join(lines) + "\n")
    moved = lines[::-1]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.txt").write_text("\n".join(moved[:700]) + "\n")
    (tmp_path / "other" / "b.txt").write_text("\n".join(moved[700:]) + "\n")

    def held_texts(path) -> set[str]:
        return {doc.text for doc in DocumentStream(config(path, "holdout", fraction=0.2))}

    assert held_texts(tmp_path / "one.txt") == held_texts(tmp_path / "other") == \
        {line for line in lines if held(line, 0.2)}


def test_a_stream_resumed_inside_the_split_continues_exactly(docs):
    """A document's `resume` (its position inside the split, shard 2 of 3, shuffled) reopens the stream at that
    document: the rest is the uninterrupted stream's rest, at several points."""
    cfg = config(docs, "holdout", shard_mod=3, shard_rem=2, shuffle_seed=3, shuffle_window=64)
    whole = list(DocumentStream(cfg))
    for k in (1, 17, 100, len(whole) - 1):
        rest = [doc.id for doc in DocumentStream(cfg, start=whole[k].resume)]
        assert rest == [doc.id for doc in whole[k:]]


def _batches(path, side: str, **settings) -> np.ndarray:
    with FineWebLoader(config(path, side, **settings)) as loader:
        return np.stack([batch.copy() for batch in loader])


def test_the_held_out_batches_are_the_same_for_other_q_doc_batch_and_threads(docs):
    """The held-out side's batches (read to the end) are the same bytes for Q 2, doc batch 1, 1 thread and Q 16, doc
    batch 64, 2 threads; their documents (byte tokens between end-of-text 256) are the held-out stream's, in order."""
    small = _batches(docs, "holdout", queue_depth=2, doc_batch=1, tokenizer_threads=1)
    large = _batches(docs, "holdout", queue_depth=16, doc_batch=64, tokenizer_threads=2)
    assert np.array_equal(small, large)
    flat = small.ravel()
    ends = np.flatnonzero(flat == 256)
    texts = [bytes(flat[a + 1:b].astype(np.uint8)).decode() for a, b in zip([-1, *ends[:-1]], ends)]
    expected = [doc.text for doc in DocumentStream(config(docs, "holdout"))]
    assert len(texts) > 0.9 * len(expected) and texts == expected[:len(texts)]


def test_smoke_saves_a_state_inside_the_split_and_resumes_it_exactly(docs, tmp_path):
    """fwe smoke's Python path over the training side: 3 batches and a saved state (its position its child's cursor),
    then a run resumed from it with another doc batch and Q gives the next 4 batches of an
    uninterrupted 7-batch run; the result's source record counts what the split kept and removed."""
    cfg = config(docs, "train", shuffle_seed=1, shuffle_window=8)
    whole, failure = SmokeRun(cfg).finish(7, save_path=str(tmp_path / "whole.npz"))
    assert failure is None
    assert whole["source"]["kind"] == "holdout" and whole["source"]["documents_removed"] > 0
    assert whole["source"]["documents_kept"] > whole["source"]["documents_removed"]
    first, failure = SmokeRun(cfg).finish(3, save_state=str(tmp_path / "state.json"))
    assert failure is None
    state = read_resume_state(str(tmp_path / "state.json"))
    assert state["position"]["doc"]["type"] == "cursor"  # the split's cursor is its child's
    assert state["position"]["doc"]["window"]["end_at"]["type"] == "file"
    resumed = config(docs, "train", shuffle_seed=1, shuffle_window=8, doc_batch=5, queue_depth=4)
    rest, failure = SmokeRun(resumed, state).finish(4, save_path=str(tmp_path / "rest.npz"))
    assert failure is None and rest["resumed_from"]["batches"] == 3
    assert np.array_equal(np.load(tmp_path / "rest.npz")["batches"], np.load(tmp_path / "whole.npz")["batches"][3:])


@pytest.mark.parametrize("change", [{"fraction": 0.2}, {"side": "holdout"}])
def test_a_state_saved_over_another_split_is_refused(docs, tmp_path, change):
    """A state saved over --holdout 0.1 (train) is refused by a loader over another fraction or the other side,
    naming the setting: resuming would mix the two sides."""
    _, failure = SmokeRun(config(docs, "train")).finish(2, save_state=str(tmp_path / "state.json"))
    assert failure is None
    state = orjson.loads((tmp_path / "state.json").read_bytes())
    other = config(docs, change.get("side", "train"), fraction=change.get("fraction", 0.1))
    with pytest.raises(ConfigError, match=r"source\.holdout(_split)?="):
        SmokeRun(other, state).loader.close()


def test_a_token_directory_is_refused(tmp_path):
    """A token directory keeps neither ids nor text: the split refuses it, saying to split the text instead."""
    write_token_dir(tmp_path / "toks", [f"text {i}" for i in range(20)])
    with pytest.raises(ConfigError, match="token ids.*fwe tokenize --holdout"):
        list(DocumentStream(config(tmp_path / "toks", "train")))


def test_the_flags_wrap_the_stream_in_the_split():
    """--holdout wraps whatever the other flags name (a bootstrap continued from the Hub included), --holdout-split
    defaulting to train; its JSON names each setting as its flag does; no fraction, no split."""
    assert {"holdout", "holdout_split"} <= set(SOURCE_FLAGS)
    spec = SourceSpec.from_flags({"local_path": "/data/b", "tail": "hub", "holdout": 0.01})
    assert spec.to_json() == {"kind": "holdout", "holdout": 0.01, "holdout_split": "train", "children": [
        {"kind": "head_tail", "children": [{"kind": "local", "local_path": "/data/b", "where": None}]}]}
    assert SourceSpec.from_json(spec.to_json()) == spec
    leaf = SourceSpec.of("synthetic", seed=3)
    assert held_out(leaf) is leaf
    assert held_out(leaf, "0.5", "holdout") == SourceSpec.of("holdout", leaf, holdout=0.5, holdout_split="holdout")


def test_the_variable_sets_the_fraction_and_the_flag_beats_it():
    """NSA_FWE_HOLDOUT sets the fraction for every loader of the process (an evaluation loader then names only its
    side); a --holdout flag wins over it."""
    env = {"NSA_FWE_HOLDOUT": " 0.05 "}
    evaluation = resolve_config(env=env, source="synthetic", holdout_split="holdout").source
    assert evaluation.kind == "holdout" and evaluation.options == HoldoutOptions(0.05, "holdout")
    assert resolve_config(env=env, source="synthetic").source.options.holdout_split == "train"
    assert resolve_config(env=env, source="synthetic", holdout=0.2).source.options.holdout == 0.2


BAD = [
    ({"holdout": 1}, "holdout must be a fraction from 0 up to .* got 1"),
    ({"holdout": -0.1}, "got -0.1"),
    ({"holdout": "abc"}, "holdout must be a fraction .* got 'abc'"),
    ({"holdout": "nan"}, "got 'nan'"),
    ({"holdout": True}, "got True"),
    ({"holdout": 0.1, "holdout_split": "eval"}, "holdout_split must be train or holdout .* got 'eval'"),
    ({"holdout_split": "holdout"}, "holdout_split holdout reads one side .* give its fraction with holdout"),
    ({"holdout": 0.1, "split": "holdout"}, "split names a Hub dataset's split .* holdout_split holdout"),
    ({"local_path": "x", "split": "holdout"}, "split names a Hub dataset's split"),
]


@pytest.mark.parametrize("given,message", BAD, ids=[str(given) for given, _ in BAD])
def test_a_bad_split_setting_is_one_config_error_naming_it(given, message):
    """Each bad value is a ConfigError (exit 2) whose one line names the setting and what was given."""
    with pytest.raises(ConfigError, match=message) as caught:
        SourceSpec.from_flags(given)
    assert "\n" not in str(caught.value)


def test_the_hub_is_split_by_its_rows_ids(hub_env):
    """Over the test Hub (native reader): the two sides are disjoint, together they are the Hub's stream in its
    order, and the held-out rows are those whose ids the rule holds out."""
    def hub_ids(**split) -> list[str]:
        stream = DocumentStream(resolve_config(env={}, source="hub", tokenizer="byte", **split))
        try:
            return [doc.id for doc in stream]
        finally:
            stream.close()

    whole = hub_ids()
    train, held_out_ids = hub_ids(holdout=0.1), hub_ids(holdout=0.1, holdout_split="holdout")
    assert len(whole) > 1000 and not set(train) & set(held_out_ids)
    assert sorted(train + held_out_ids, key=whole.index) == whole
    assert held_out_ids == [doc_id for doc_id in whole if held(doc_id, 0.1)]


class _FakeDist:
    """torch.distributed as join_ranks sees it: an initialised job of 2 ranks with gloo; records the groups made."""

    def __init__(self):
        self.group = type("group", (), {"WORLD": object()})
        self.made: list[str] = []

    is_available = is_initialized = is_gloo_available = staticmethod(lambda: True)
    get_world_size = staticmethod(lambda: 2)

    def new_group(self, backend: str, timeout):
        self.made.append(backend)
        return object()


def test_a_split_of_the_native_hub_joins_the_jobs_ranks(monkeypatch):
    """Under torch.distributed, a loader over the split of the native Hub reader makes fwe's group of ranks (so rank
    0 resolves the listing for all and every rank reads the same commit), as one over the Hub itself does."""
    from fwe_cli.loader.remote import job_ranks

    dist = _FakeDist()
    torch = type("torch", (), {"distributed": dist})
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    for source, made in (({"source": "synthetic"}, []), ({"source": "hub", "holdout": 0.1}, ["gloo"])):
        monkeypatch.setattr(job_ranks, "_joined", (None, None))
        FineWebLoader(resolve_config(env={}, prefetch=False, **source)).close()  # (nothing read: no prefetch)
        assert dist.made == made
