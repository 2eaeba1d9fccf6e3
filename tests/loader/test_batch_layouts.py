"""What a batch is for a trainer: inputs with next-token labels that lose no token, document boundaries (per-token
positions and per-row cu_seqlens) consistent with the separators, llm.c's delimiter before each document, and rows
that start at a document start."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.rows.packing import Packer
from tests.helpers import write_jsonl

BYTE_EOS = 256


def take(config, n: int, state=None) -> tuple[list, dict]:
    """(n batches as numpy, the state after them) from a fresh loader (the state sent through JSON)."""
    state = None if state is None else orjson.loads(orjson.dumps(state))
    with FineWebLoader(config, state=state) as loader:
        batches = [loader.next_batch() for _ in range(n)]
        return batches, loader.state_dict()


def test_labels_are_the_inputs_shifted_by_one_and_no_token_is_lost_or_repeated():
    """Over 1,000 consecutive batches: labels[:, :-1] == input[:, 1:] in every batch, and the rows' inputs in order
    followed by the last label are exactly the stream a loader without labels gives."""
    common = dict(env={}, source="synthetic", seed=3, tokenizer="byte", seq_len=16, batch_size=4, queue_depth=16)
    batches, _ = take(resolve_config(labels=True, **common), 1000)
    assert all(np.array_equal(b["labels"][:, :-1], b["input"][:, 1:]) for b in batches)
    ours = np.concatenate([b["input"].reshape(-1) for b in batches] + [batches[-1]["labels"][-1, -1:]])
    plain, _ = take(resolve_config(**common), 1001)
    assert np.array_equal(ours, np.concatenate([b.reshape(-1) for b in plain])[:len(ours)])


@pytest.mark.parametrize("at", [1, 7, 30])
def test_labels_resume_exactly_at_any_batch(at):
    """A state saved after batch `at` of a labels stream resumes with the next batch, inputs and labels, byte for
    byte, under another queue depth and doc batch."""
    common = dict(env={}, source="synthetic", seed=5, tokenizer="byte", seq_len=64, batch_size=2, labels=True)
    whole, _ = take(resolve_config(**common), at + 5)
    _, state = take(resolve_config(doc_batch=3, queue_depth=2, **common), at)
    rest, _ = take(resolve_config(doc_batch=64, queue_depth=7, **common), 5, state)
    for a, b in zip(whole[at:], rest, strict=True):
        assert np.array_equal(a["input"], b["input"]) and np.array_equal(a["labels"], b["labels"])


def _segments_check(batches: list[dict], bos: bool, delimiter: int) -> None:
    """Positions restart at 0 exactly after each end-of-text (or, with bos, exactly at each delimiter) and count up
    by one otherwise, across rows and batches; each row's cu_seqlens are its segment starts, then T."""
    tokens = np.concatenate([b["input"].reshape(-1) for b in batches])
    positions = np.concatenate([b["positions"].reshape(-1) for b in batches])
    starts = tokens == delimiter if bos else np.concatenate(([True], tokens[:-1] == delimiter))
    assert np.array_equal(positions == 0, starts)
    assert np.array_equal(positions[1:][~starts[1:]], positions[:-1][~starts[1:]] + 1)
    for batch in batches:
        for row_positions, bounds in zip(batch["positions"], batch["cu_seqlens"]):
            width = len(row_positions)
            cuts = sorted({0, *np.flatnonzero(row_positions == 0).tolist()})
            assert bounds.tolist() == cuts + [width] * (width + 1 - len(cuts))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(0, 90), min_size=1, max_size=40), seq_len=st.integers(1, 40),
       batch_size=st.integers(1, 4), bos=st.booleans(), labels=st.booleans())
def test_positions_and_cu_seqlens_follow_the_separators(tmp_path_factory, lengths, seq_len, batch_size, bos, labels):
    """Property over random documents (empty ones included) and shapes: the boundaries agree with the separators."""
    path = tmp_path_factory.mktemp("docs") / "docs.jsonl"
    write_jsonl(path, [{"text": "ab c"[i % 4] * n} for i, n in enumerate(lengths)])
    config = resolve_config(env={}, local_path=str(path), tokenizer="byte", seq_len=seq_len, batch_size=batch_size,
                            boundaries=True, bos=bos, labels=labels, doc_batch=3, epochs=3)
    with FineWebLoader(config) as loader:
        batches = list(loader)
    if batches:
        _segments_check(batches, bos, BYTE_EOS)


def test_bos_with_gpt2_is_llm_c_s_stream(gpt2_tokenizer_json):
    """With --bos and GPT-2 the token stream is llm.c's fineweb.py convention read independently: for each document
    <|endoftext|> (50256) then tiktoken's GPT-2 encoding of its text (encode_ordinary), documents in order."""
    from scripts.bench.check_gpt2_offline import gpt2_reference_encoding

    records = [synthetic_record(9, i) for i in range(60)]
    reference = gpt2_reference_encoding()
    expected = np.concatenate([[50256, *reference.encode_ordinary(r["text"])] for r in records])
    config = resolve_config(env={}, source="synthetic", seed=9, tokenizer=gpt2_tokenizer_json, seq_len=512,
                            batch_size=4, bos=True, boundaries=True)
    n = len(expected) // (512 * 4)
    batches, _ = take(config, n)
    stream = np.concatenate([b["input"].reshape(-1) for b in batches])
    assert np.array_equal(stream, expected[:len(stream)])
    _segments_check(batches, True, 50256)


def test_aligned_rows_start_at_documents_and_count_what_is_cropped():
    """With align_rows every row starts at a document start (position 0; with bos, its delimiter), the stats count
    the cropped tokens, and a state resumes exactly."""
    common = dict(env={}, source="synthetic", seed=4, tokenizer="byte", seq_len=256, batch_size=4, align_rows=True,
                  boundaries=True, bos=True, labels=True)
    with FineWebLoader(resolve_config(**common)) as loader:
        batches = [loader.next_batch() for _ in range(12)]
        cropped = loader.stats()["cropped"]
    for batch in batches:
        assert (batch["positions"][:, 0] == 0).all() and (batch["input"][:, 0] == BYTE_EOS).all()
        assert np.array_equal(batch["labels"][:, :-1], batch["input"][:, 1:])
    assert cropped["documents"] > 0 and cropped["tokens"] > 0
    _, state = take(resolve_config(**common), 5)
    rest, _ = take(resolve_config(doc_batch=2, **common), 7, state)
    assert all(np.array_equal(a["input"], b["input"]) for a, b in zip(batches[5:], rest, strict=True))


def test_a_packer_with_labels_carries_one_token_into_the_next_window():
    """Unit: two windows of B*T + 1 tokens share one token, and `add` counts it as the next batch's (a resume there
    starts with it)."""
    packer = Packer(seq_len=3, batch_size=2, labels=True)
    out = list(packer.add(np.arange(20, dtype=np.int32)))
    assert [position["skip"] for _, position in out] == [6, 12, 18]
    assert out[0][0]["input"].tolist() == [[0, 1, 2], [3, 4, 5]] and out[0][0]["labels"].tolist() == [[1, 2, 3],
                                                                                                        [4, 5, 6]]
    assert out[1][0]["input"][0, 0] == 6
