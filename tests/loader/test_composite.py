"""A source made of sources, defined in this file alone (one class and one registration, nothing of fwe_cli changed
for it): every other document of its child. It runs through `fwe smoke`'s Python path like any built-in source, and
a state saved there resumes it exactly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import orjson
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.base import Source
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.registry import register
from fwe_cli.loader.sources.spec import SourceSpec
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.measure.smoke import SmokeRun, read_resume_state


@dataclass(frozen=True, slots=True)
class EveryOtherCursor(Position, name="test_every_other"):
    """A kept document: its child's cursor there (the child's next document is the one dropped)."""

    child: Position


class EveryOther(Source):
    """The child's documents 0, 2, 4, ... of each reader's stream: a composite as a user would write one."""

    children_allowed = (1, 1)

    def stream(self, order, start: EveryOtherCursor | None, plan) -> Iterator[Document]:
        docs = self.children[0].stream(order, start.child if start is not None else None, plan)
        for i, doc in enumerate(docs):  # a stream resumed at a kept document yields it first: kept again
            if i % 2 == 0:
                doc.resume = EveryOtherCursor(doc.resume)
                yield doc

    def frontier(self, resume: EveryOtherCursor, delivered: int, tokens: int) -> Position:
        return self.children[0].frontier(resume.child, delivered, tokens)

    def plan_for(self, olds, readers) -> Position:
        return self.children[0].plan_for(olds, readers)

    def check_resume(self, resume) -> None:
        if resume is not None:
            self.children[0].check_resume(resume.child)


register("test_every_other", EveryOther)

SPEC = SourceSpec.of("test_every_other", SourceSpec.of("synthetic", seed=11))
SHAPE = dict(tokenizer="byte", seq_len=512, batch_size=2, doc_batch=1, queue_depth=2, tokenizer_threads=1)


def test_the_composite_yields_every_other_document_of_its_child():
    """The registered kind is read through the registry like any other: its stream is the child's documents 0, 2,
    4, ... in order."""
    ids = [d.id for _, d in zip(range(20), DocumentStream(LoaderConfig(source=SPEC, **SHAPE)))]
    child = [d.id for _, d in zip(range(40), DocumentStream(LoaderConfig(source=SPEC.children[0], **SHAPE)))]
    assert ids == child[::2]


def test_smoke_saves_a_state_inside_the_composite_and_resumes_it_exactly(tmp_path):
    """fwe smoke's Python path (SmokeRun) over the composite: 3 batches and a saved state, then a fresh run resumed
    from that file gives the next 4 batches of an uninterrupted 7-batch run, byte for byte; the state names the
    composite and its child, node by node."""
    config = LoaderConfig(source=SPEC, **SHAPE)
    whole, failure = SmokeRun(config).finish(7, save_path=str(tmp_path / "whole.npz"))
    assert failure is None and whole["batches"] == 7
    first, failure = SmokeRun(config).finish(3, save_state=str(tmp_path / "state.json"))
    assert failure is None and first["saved_state"]
    state = read_resume_state(str(tmp_path / "state.json"))
    assert state["matching"]["source"] == {"kind": "test_every_other",
                                           "children": [{"kind": "synthetic", "seed": 11, "where": None}]}
    assert state["position"]["doc"]["type"] == "test_every_other"  # the composite's typed cursor
    resumed = LoaderConfig(source=SPEC, **dict(SHAPE, doc_batch=5, queue_depth=4))
    rest, failure = SmokeRun(resumed, state).finish(4, save_path=str(tmp_path / "rest.npz"))
    assert failure is None and rest["resumed_from"]["batches"] == 3
    batches = np.load(tmp_path / "whole.npz")["batches"]
    assert np.array_equal(np.load(tmp_path / "rest.npz")["batches"], batches[3:])


def test_a_state_of_another_tree_is_refused_naming_the_node(tmp_path):
    """A state saved over the composite of one child is refused by a loader over the same kind with another child,
    naming the node that differs."""
    config = LoaderConfig(source=SPEC, **SHAPE)
    _, failure = SmokeRun(config).finish(2, save_state=str(tmp_path / "state.json"))
    assert failure is None
    state = orjson.loads((tmp_path / "state.json").read_bytes())
    other = LoaderConfig(source=SourceSpec.of("test_every_other", SourceSpec.of("synthetic", seed=12)), **SHAPE)
    with pytest.raises(ConfigError, match=r"source\.children\[0\]\.seed=11"):
        SmokeRun(other, state).loader.close()


def _nested(tmp_path) -> dict[str, SourceSpec]:
    """Trees the spec accepts that an fwe before per-reader units could not read: a held-out split of a mix, and a
    mix of a mix and a source."""
    from fwe_cli.loader.sources.spec import held_out
    from tests.helpers import write_jsonl

    paths = []
    for name, count in (("a", 80), ("b", 60), ("c", 70)):
        paths.append(write_jsonl(tmp_path / f"{name}.jsonl", [{"id": f"{name}{i}", "text": f"<{name}{i}> " * (3 + i % 5)}
                                                              for i in range(count)]))
    a, b, c = (SourceSpec.of("local", local_path=str(p)) for p in paths)
    mix = SourceSpec.of("mixture", a, b, by="documents", weights=(2, 1), stops=("first_exhausted", "first_exhausted"))
    return {"holdout(mixture)": held_out(mix, 0.2),
            "mixture(mixture, local)": SourceSpec.of("mixture", mix, c, by="tokens", weights=(1, 1),
                                                     stops=("first_exhausted", "first_exhausted"))}


def _ids(tokens: list[int]) -> dict[str, int]:
    """Each document's id -> its tokens in a one-token-a-batch byte stream (end-of-text included; the piece of a
    document cut where the stream begins or ends is counted by the id it holds whole)."""
    import re

    from fwe_cli.loader.tokenization.names import BYTE_EOS_ID

    counts: dict[str, int] = {}
    piece: list[int] = []
    for n, token in enumerate(tokens + [BYTE_EOS_ID]):
        piece.append(token)
        if token == BYTE_EOS_ID:
            found = re.search(r"<([abc]\d+)>", bytes(t for t in piece if t < 256).decode())
            if found:  # (the end-of-text closing the stream is not one of its tokens)
                counts[found.group(1)] = counts.get(found.group(1), 0) + len(piece) - (n == len(tokens))
            piece = []
    return counts


@pytest.mark.parametrize("tree", ["holdout(mixture)", "mixture(mixture, local)"])
def test_any_tree_the_spec_accepts_reads_resumes_and_changes_world(tmp_path, tree):
    """A held-out split of a mix and a mix of a mix: each reads documents of every source, a state saved after 3
    batches resumes as batches 4-7 of an uninterrupted run, and the states of 2 readers resume on 3 with no token of
    any document delivered twice over both worlds."""
    from fwe_cli.loader import FineWebLoader
    from fwe_cli.loader.shard import Shard

    spec = _nested(tmp_path)[tree]
    config = LoaderConfig(source=spec, tokenizer="byte", seq_len=16, batch_size=1, doc_batch=2)
    with FineWebLoader(config) as loader:
        whole = [next(loader).copy() for _ in range(7)]
    with FineWebLoader(config) as loader:
        first = [next(loader).copy() for _ in range(3)]
        state = orjson.loads(orjson.dumps(loader.state_dict()))
    with FineWebLoader(config.replace(doc_batch=5), state=state) as loader:
        rest = [next(loader).copy() for _ in range(4)]
    assert all(np.array_equal(x, y) for x, y in zip(whole, first + rest))
    one = config.replace(seq_len=1)
    delivered, states = {}, []
    for rank, taken in enumerate([101, 157]):  # each stops inside a document
        with FineWebLoader(one.replace(shard=Shard(2, rank))) as loader:
            tokens = [int(next(loader)[0, 0]) for _ in range(taken)]
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
        for key, n in _ids(tokens).items():
            delivered[key] = delivered.get(key, 0) + n
    for rank in range(3):
        with FineWebLoader(one.replace(shard=Shard(3, rank)), state=states) as loader:
            for key, n in _ids([int(b[0, 0]) for b in loader]).items():
                delivered[key] = delivered.get(key, 0) + n
    length = {f"{name}{i}": len(f"<{name}{i}> " * (3 + i % 5)) + 1 for name, count in (("a", 80), ("b", 60), ("c", 70))
              for i in range(count)}
    assert {key[0] for key in delivered} >= {"a", "b"} and len(delivered) > 50
    assert all(n <= length[key] for key, n in delivered.items()), {k: n for k, n in delivered.items() if n > length[k]}
