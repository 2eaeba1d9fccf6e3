"""Resume that cannot be wrong, as a user meets it through the public API: a mix's state resumed from memory, pickled
or as JSON; a mix with a cycled source changing world size; a state of epoch 1 under another `epochs`; best-fit rows
across a change of world; a state taken without serialising what cannot change. Each test names the defect it
guards, as the issue on one state model numbers them (the DataLoader ones are in tests/train)."""

from __future__ import annotations

import pickle
import re
from collections import Counter

import numpy as np
import orjson
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from tests.helpers import write_jsonl
from tests.train.corpus import documents

END = re.compile(rb"</(\d{3})>")
START = re.compile(rb"<(\d{3})>")


def _delivered(streams: list[list[np.ndarray]]) -> Counter:
    """How many times each document was delivered over `streams` (each a reader's batches of byte tokens, in order):
    its opening or its closing tag, whichever a stream holds whole more often (a document cut by a change of world
    has its opening in one stream, its closing in another)."""
    starts, ends = Counter(), Counter()
    for stream in streams:
        data = bytes(int(t) for b in stream for t in b.reshape(-1) if int(t) < 256)
        starts.update(int(m.group(1)) for m in START.finditer(data))
        ends.update(int(m.group(1)) for m in END.finditer(data))
    return Counter({n: max(starts[n], ends[n]) for n in set(starts) | set(ends)})


def _placed(batches: list[np.ndarray]) -> tuple[Counter, int]:
    """(each document's placements in rows, placements too cropped to name their document): a row's documents are
    the runs between its end-of-text ids (256)."""
    placed, unnamed = Counter(), 0
    for row in (row for batch in batches for row in batch):
        for piece in bytes(int(t) if t < 256 else 0 for t in row).split(b"\0"):
            found = START.match(piece)
            if found:
                placed[int(found.group(1))] += 1
            elif piece:
                unnamed += 1
    return placed, unnamed


def _take(loader, count: int | None = None) -> list[np.ndarray]:
    out = []
    for batch in loader:
        out.append(np.array(batch))
        if count is not None and len(out) == count:
            break
    return out


@pytest.fixture()
def mix_file(tmp_path):
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in documents(90)])
    small = write_jsonl(tmp_path / "small.jsonl", [{"text": t.replace("<0", "<9").replace("</0", "</9")}
                                                   for t in documents(7)])
    path = tmp_path / "mix.json"
    path.write_bytes(orjson.dumps({"sources": [{"weight": 0.7, "local_path": str(big)},
                                               {"weight": 0.3, "local_path": str(small), "stop": "cycle"}]}))
    return path


def _mix(mix_file, **kw):
    return resolve_config(env={}, **{"mix": str(mix_file), "tokenizer": "byte", "seq_len": 32, "batch_size": 2, **kw})


@pytest.mark.parametrize("carry", ["memory", "load_state_dict", "pickle"])
def test_3_a_mix_state_resumes_from_memory_its_own_loader_and_pickle(mix_file, carry):
    """(3) A --mix state (tuples in the mixture's options) resumes as it is, through load_state_dict and pickled (as
    torch.save carries it), not only through JSON: the same batches as one uninterrupted run."""
    whole = _take(FineWebLoader(_mix(mix_file)), 12)
    with FineWebLoader(_mix(mix_file)) as loader:
        first = _take(loader, 5)
        state = loader.state_dict()
        if carry == "load_state_dict":
            loader.load_state_dict(state)
            rest = _take(loader, 7)
    if carry != "load_state_dict":
        state = pickle.loads(pickle.dumps(state)) if carry == "pickle" else state
        with FineWebLoader(_mix(mix_file), state=state) as resumed:
            rest = _take(resumed, 7)
    assert len(first + rest) == 12 and all(np.array_equal(a, b) for a, b in zip(first + rest, whole))


def test_5_a_mix_with_a_cycled_source_changes_world_size(mix_file):
    """(5) A 0.7/0.3 mix whose small source is cycled, on 3 ranks that stopped at different places (each cycling the
    small source at its own pace), resumed on 2: it is dealt (no "different epochs" refusal), and every document of
    the source read once is delivered once over both worlds."""
    states, streams = [], []
    for rank, taken in enumerate((40, 7, 23)):
        with FineWebLoader(_mix(mix_file, shard_mod=3, shard_rem=rank, seq_len=1, batch_size=1)) as loader:
            streams.append(_take(loader, taken * 32))
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    for rank in range(2):
        with FineWebLoader(_mix(mix_file, shard_mod=2, shard_rem=rank, seq_len=1, batch_size=1), state=states) as new:
            streams.append(_take(new))
    once = {n: count for n, count in _delivered(streams).items() if n < 900}  # the cycled source's are <9NN>
    assert once == {n: 1 for n in range(90)}


def test_6_a_state_of_epoch_1_is_refused_under_one_epoch_naming_epochs(tmp_path):
    """(6) A state saved inside the second epoch of an epochs=2 run, resumed with epochs=1: a ConfigError naming
    `epochs` and both values, not a run of no batch."""
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in documents(20)])
    config = resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=32, batch_size=1, epochs=2)
    with FineWebLoader(config.replace(epochs=1)) as loader:
        first_epoch = len(_take(loader))
    with FineWebLoader(config) as loader:
        _take(loader, first_epoch + 3)
        state = loader.state_dict()
    with pytest.raises(ConfigError, match="saved with epochs=2, this loader has epochs=1"):
        FineWebLoader(config.replace(epochs=1), state=state)


@pytest.mark.parametrize("old, new", [(3, 2), (3, 3), (2, 5)])
def test_7_best_fit_rows_across_a_change_of_world_place_each_document_once(tmp_path, old, new):
    """(7) Best-fit rows (--pack-buffer 64): readers of one world stop with documents in their buffers, another world
    resumes every state; no document is put in a row twice over both worlds (the buffers' taken documents are not
    dealt again) and none is lost but the last partial batch of each reader."""
    texts = documents(400)
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])

    def config(world, rank):
        return resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=128, batch_size=2,
                              pack="best-fit", pack_buffer=64, shard_mod=world, shard_rem=rank)

    batches, states = [], []
    for rank in range(old):
        with FineWebLoader(config(old, rank)) as loader:
            batches += _take(loader, 10 + 7 * rank)
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
    for rank in range(new):
        with FineWebLoader(config(new, rank), state=states) as loader:
            batches += _take(loader)
    placed, unnamed = _placed(batches)
    assert max(placed.values()) == 1
    assert len(texts) - len(placed) <= unnamed + new * 2 * 128 // 12  # (each reader's last partial batch)


def test_8_a_state_is_taken_without_serialising_what_cannot_change(tmp_path):
    """(8) Taking a state at every step costs a few small values: the settings it is matched by and the position's
    JSON are made once (the same objects in two states of one batch), not serialised again at each step."""
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in documents(40)])
    config = resolve_config(env={}, local_path=str(corpus), tokenizer="byte", seq_len=32, batch_size=2)
    with FineWebLoader(config) as loader:
        _take(loader, 3)
        one, two = loader.state_dict(), loader.state_dict()
    assert one == two and one["matching"] is two["matching"] and one["position"]["doc"] is two["position"]["doc"]
