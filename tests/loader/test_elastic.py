"""Elastic resume: the states every rank of a world of 4 saved restore at 3 or 6 ranks so that, over both phases,
every document is delivered exactly once, token for token, the new world's streams are the same on every run, and
states that are not one world of one run are refused naming what differs."""

from __future__ import annotations

import orjson
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from tests.helpers import write_jsonl
from tests.loader.delivered import each_document_once, pieces

DOCS = [f"<{i:03d}>" + "abcdefghij"[: i % 10] * (1 + i % 4) + f"</{i:03d}>" for i in range(90)]


@pytest.fixture()
def corpus(tmp_path):
    return write_jsonl(tmp_path / "docs.jsonl", [{"text": text} for text in DOCS])


def _config(corpus, world: int, rank: int, **kw):
    # one token a batch: no final partial batch, so nothing of the source is left undelivered at its end
    return resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=1, batch_size=1,
                          shard_mod=world, shard_rem=rank, **kw)


def _tokens(loader, limit: int | None = None) -> list[int]:
    out = []
    for batch in loader:
        out.append(int(batch[0, 0]))
        if limit is not None and len(out) == limit:
            break
    return out


def _first_phase(corpus, steps: list[int], **kw) -> tuple[list[list[int]], list[dict]]:
    """4 ranks each take their number of one-token batches and save their state (through JSON, as a checkpoint)."""
    streams, states = [], []
    for rank, limit in enumerate(steps):
        with FineWebLoader(_config(corpus, 4, rank, **kw)) as loader:
            streams.append(_tokens(loader, limit))
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    return streams, states


@pytest.mark.parametrize("world", [3, 6])
@pytest.mark.parametrize("shuffle", [None, 11])
def test_four_ranks_resume_as_another_world_delivering_each_document_once(corpus, world, shuffle):
    """Ranks that took different numbers of batches, some ending inside a document: the new world's ranks, each given
    every old state, deliver the rest of the source, each document (or its rest) exactly once; twice the same."""
    kw = {} if shuffle is None else {"shuffle_seed": shuffle, "shuffle_window": 8}
    first, states = _first_phase(corpus, [57, 40, 73, 12], **kw)

    def second_phase() -> list[list[int]]:
        streams = []
        for rank in range(world):
            with FineWebLoader(_config(corpus, world, rank, **kw), state=states) as loader:
                streams.append(_tokens(loader))
        return streams

    second = second_phase()
    each_document_once(DOCS, first, second)
    assert second == second_phase()


def test_a_world_resumed_again_before_the_epoch_ends_still_delivers_each_document_once(corpus):
    """4 ranks, then 3 take a few batches and save, then 2 finish: the plan a changed world saves composes."""
    first, states = _first_phase(corpus, [30, 31, 29, 44])
    middle, middle_states = [], []
    for rank, limit in enumerate([50, 21, 38]):
        with FineWebLoader(_config(corpus, 3, rank), state=states) as loader:
            middle.append(_tokens(loader, limit))
            middle_states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    last = []
    for rank in range(2):
        with FineWebLoader(_config(corpus, 2, rank), state=middle_states) as loader:
            last.append(_tokens(loader))
    closed, begun = [], []
    for stream in first + middle:
        done, rest = pieces(stream)
        closed += done
        begun += [rest] if rest else []
    for stream in last:
        closed += pieces(stream)[0]
    text = "".join(sorted(closed)) + "".join(begun)
    assert sorted(text) == sorted("".join(DOCS))  # every character of the source, once


def test_states_that_are_not_one_world_of_one_run_are_refused_naming_what(corpus):
    """A rank's state missing, a state saved with another seq_len, or a list mixing worlds: one ConfigError each,
    naming the shard ranks or the field."""
    _, states = _first_phase(corpus, [5, 5, 5, 5])
    with pytest.raises(ConfigError, match="each reader 0..3 of one world once"):
        FineWebLoader(_config(corpus, 3, 0), state=states[:3] + [states[0]])
    other = resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=2, batch_size=1, shard_mod=4,
                           shard_rem=1)
    with FineWebLoader(other) as loader:
        next(iter(loader))
        odd = orjson.loads(orjson.dumps(loader.state_dict()))
    with pytest.raises(ConfigError, match="seq_len"):
        FineWebLoader(_config(corpus, 3, 0), state=[states[0], odd, states[2], states[3]])


def test_smoke_resumes_every_ranks_state_by_glob_at_another_world_size(corpus, tmp_path):
    """`fwe smoke --save-state 'state_{rank}.json'` under 2 launcher ranks, then `--resume-state 'state_*.json'`
    under 3: each new rank starts from its share (exit 0); a glob naming nothing is a usage error naming it."""
    from tests.helpers import invoke

    args = ("smoke", "--local-path", str(corpus), "--tokenizer", "byte", "--seq-len", "16", "--batch", "1",
            "--artifacts-dir", str(tmp_path / "a"))
    for rank in range(2):
        saved = invoke(*args, "--batches", "3", "--save-state", str(tmp_path / "state_{rank}.json"),
                       env={"RANK": str(rank), "WORLD_SIZE": "2"})
        assert saved.exit_code == 0, saved.stderr
    for rank in range(3):
        resumed = invoke(*args, "--resume-state", str(tmp_path / "state_*.json"), "--json",
                         env={"RANK": str(rank), "WORLD_SIZE": "3"})
        assert resumed.exit_code == 0, resumed.stderr
        assert orjson.loads(resumed.stdout)["resumed_from"] is not None
    missing = invoke(*args, "--resume-state", str(tmp_path / "none_*.json"))
    assert missing.exit_code == 2 and "none_*.json" in missing.stderr
