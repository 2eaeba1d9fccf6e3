"""A weighted mixture of sources: a composite whose stream takes each next document from one of its children, chosen
arithmetically (no random generator to replay): the child whose share so far lies furthest below its weight.

Shares are of tokens (`by` tokens, the default: exact to each document's token count, so the mixture encodes its
children's documents itself, once, and hands them on as ids) or of documents (`by` documents). Each child is dealt,
ordered and shuffled by the reader's settings on its own (its own units: sources.order), so each reader mixes its own
documents at the same ratio, and the choice depends only on what came before: the same order on any Q, doc batch,
threads, backend and resume. A child that ends either ends the mixture (`first_exhausted`) or starts over in its
next epoch (`cycle`: compose.cycle).

Its cursor (`MixtureCursor`) holds, for each child, the cursor of the last document taken from it and what the
shares count so far; a stream opened at it takes the next document exactly as the uninterrupted one did. Any child
may itself be a composite (a mixture of mixtures, a held-out split of a mix).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

from fwe_cli.errors import ConfigError
from fwe_cli.loader.compose.cycle import ChildStream, WholeEpoch
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.base import Emit, Source
from fwe_cli.loader.sources.order import StreamOrder
from fwe_cli.loader.sources.position import Position

BY = ("tokens", "documents")
STOPS = ("first_exhausted", "cycle")
MIX_EVENT_STEPS = 100  # a fineweb_mix heartbeat line every this many batches


@dataclass(frozen=True)
class MixtureOptions:
    by: str = "tokens"
    """What the weights are shares of: 'tokens' or 'documents'."""
    weights: tuple = ()
    """Each child's weight (numbers >= 0, not all zero; normalized to shares)."""
    stops: tuple = ()
    """Each child's policy when it ends: 'first_exhausted' (the mixture ends) or 'cycle' (it starts over)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", tuple(self.weights))
        object.__setattr__(self, "stops", tuple(self.stops))
        if self.by not in BY:
            raise ConfigError(f"a mix's \"by\" must be one of {', '.join(BY)}, got {self.by!r}")
        for i, weight in enumerate(self.weights):
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight < 0:
                raise ConfigError(f"the weight of mix source #{i + 1} must be a number >= 0, got {weight!r}")
        if self.weights and not any(self.weights):
            raise ConfigError(f"a mix needs a weight above 0, got all zero ({list(self.weights)})")
        for i, stop in enumerate(self.stops):
            if stop not in STOPS:
                raise ConfigError(f"the \"stop\" of mix source #{i + 1} must be one of {', '.join(STOPS)}, "
                                  f"got {stop!r}")


@dataclass(frozen=True, slots=True)
class MixtureCursor(Position, name="mixture", version=2):
    """Where a mixture's stream stands before one of its documents: for each child, the resume of the last document
    taken from it (None before its first) and its share so far (tokens or documents); the child the document comes
    from and its resume there."""

    cursors: tuple
    counts: tuple
    child: int
    at: Position


@dataclass(frozen=True, slots=True)
class MixturePlan(Position, name="mixture_plan"):
    """What a changed world dealt this reader of each child (None: its fresh share)."""

    children: tuple


@dataclass(frozen=True, slots=True)
class MixtureFrontier(Position, name="mixture_frontier"):
    """Where this reader stood in each child (None: it took nothing from it)."""

    children: tuple


def _epoch(cursor: Position) -> int:
    """The epoch of a child's cursor (a mixture's: that of the document's own child)."""
    while isinstance(cursor, (MixtureCursor, WholeEpoch)):
        cursor = cursor.at
    return cursor.epoch


class Mixture(Source):
    """The children's documents, one at a time from the child furthest below its share (see the module docstring)."""

    Options = MixtureOptions
    children_allowed = (1, None)

    @classmethod
    def check_spec(cls, spec) -> None:
        super().check_spec(spec)
        o, n = spec.options, len(spec.children)
        if len(o.weights) != n or len(o.stops) != n:
            raise ConfigError(f"a mix of {n} sources needs {n} weights and stops, got {len(o.weights)} and "
                              f"{len(o.stops)}")

    @classmethod
    def location(cls, spec) -> str:
        return "a mix of " + ", ".join(child.location() for child in spec.children)

    def __init__(self, spec, options):
        super().__init__(spec, options)
        total = sum(spec.options.weights)
        self.shares = [w / total for w in spec.options.weights]
        self.counts = [0] * len(self.children)
        self.documents_taken = [0] * len(self.children)
        self.tokens_taken = [0] * len(self.children)
        shards = [child.pretokenized() for child in self.children]
        self._shards = shards[0] if all(s is not None and (s.eos_id, s.vocab_size) == (shards[0].eos_id,
                                                                                         shards[0].vocab_size)
                                        for s in shards) else None
        self.reads_tokens = self._shards is not None  # token directories all: no tokenizer runs
        self._tokenizer: Callable[[], Callable] | None = None
        self._threads = 1
        self._pool: ThreadPoolExecutor | None = None

    def pretokenized(self):
        """When every source is a token directory of one vocabulary: the first one's (no tokenizer is loaded)."""
        return self._shards

    def default_tokenizer(self) -> str:
        """The sources' own tokenizer when they agree (token directories), else 'byte'."""
        names = {child.default_tokenizer() for child in self.children}
        return names.pop() if len(names) == 1 else "byte"

    def bind_encoder(self, make: Callable[[], Callable[[list[str]], list]], threads: int) -> None:
        """`make()` gives the function encoding texts to their ids (the loader's tokenizer, once it is loaded):
        shares of tokens count each document's own."""
        self._tokenizer, self._threads = make, threads

    def stream(self, order: StreamOrder, start: MixtureCursor | None,
               plan: MixturePlan | None) -> Iterator[Document]:
        """This reader's documents of each child (each dealt by its own units), mixed."""
        n = len(self.children)
        cursors = list(start.cursors) if start is not None else [None] * n
        self.counts = list(start.counts) if start is not None else [0] * n
        plans = plan.children if plan is not None else (None,) * n
        encode = self._encoder() if self.spec.options.by == "tokens" else None
        streams = [ChildStream(child, order, cursors[i], plans[i], stop == "cycle",
                               None if cursors[i] is None else _epoch(cursors[i]), encode, self._pool, self._threads)
                   for i, (child, stop) in enumerate(zip(self.children, self.spec.options.stops))]
        while (c := self._next_child()) is not None:
            doc = next(streams[c].docs, None)
            if doc is None:
                if self.spec.options.stops[c] == "first_exhausted":
                    return
                raise ConfigError(f"mix source #{c + 1} ({self.children[c].location(self.children[c].spec)}) has no "
                                  "document to cycle through")
            before, counts = tuple(cursors), tuple(self.counts)
            cursors[c] = doc.resume
            tokens = len(doc.ids) + 1 - doc.delivered if doc.ids is not None else None
            self.counts[c] += tokens if self.spec.options.by == "tokens" else 1
            self.documents_taken[c] += 1
            self.tokens_taken[c] += tokens or 0  # (by documents, texts are not encoded here: None in `realized`)
            doc.resume = MixtureCursor(before, counts, c, cursors[c])
            yield doc

    def frontier(self, resume: MixtureCursor, delivered: int, tokens: int) -> MixtureFrontier:
        """Each child's frontier: its own child's document `delivered` tokens in, the others' last document taken
        before it delivered whole; none for a cycled child read as a whole epoch (every reader cycles it itself)."""
        fronts = []
        for i, child in enumerate(self.children):
            at, part = (resume.at, (delivered, tokens)) if i == resume.child else (resume.cursors[i], (1, 1))
            fronts.append(None if at is None or isinstance(at, WholeEpoch) else child.frontier(at, *part))
        return MixtureFrontier(tuple(fronts))

    def plan_for(self, olds, order) -> MixturePlan:
        """Each child dealt again from its own frontiers (the mix's shares start afresh)."""
        return MixturePlan(tuple(
            child.plan_for([(plan.children[i] if plan is not None else None,
                             front.children[i] if front is not None else None) for plan, front in olds], order)
            for i, child in enumerate(self.children)))

    def check_resume(self, resume) -> None:
        if resume is None:
            return
        if not isinstance(resume, MixtureCursor) or len(resume.cursors) != len(self.children):
            raise ConfigError(f"the resume position {resume.to_json()} is not one of {self.location(self.spec)}: "
                              "resume over the same sources, or start without the state")
        for child, cursor in zip(self.children + [self.children[resume.child]], resume.cursors + (resume.at,)):
            child.check_resume(cursor.at if isinstance(cursor, WholeEpoch) else cursor)

    def _next_child(self) -> int | None:
        """The child whose count lies furthest below its share (the first of equals); None when no weight is set."""
        best, best_key = None, None
        for i, share in enumerate(self.shares):
            if share > 0:
                key = self.counts[i] / share
                if best_key is None or key < best_key:
                    best, best_key = i, key
        return best

    def _encoder(self) -> Callable[[list[Document]], list[Document]]:
        """Encode a chunk of documents, keeping each one's ids (what the pipeline then uses instead of its text)."""
        if self._tokenizer is None:
            raise ConfigError("a mix by tokens needs the loader's tokenizer to count them (bind_encoder)")
        texts_ids = self._tokenizer()
        if self._pool is not None:  # (an earlier stream's: its children shut it down as they end)
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="fwe-mix-tokenize")

        def encode(docs: list[Document]) -> list[Document]:
            missing = [d for d in docs if d.ids is None]
            for doc, ids in zip(missing, texts_ids([d.text for d in missing]) if missing else ()):
                doc.ids = ids
            return docs

        return encode

    def close(self) -> None:
        super().close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    # -- what the mix realized ---------------------------------------------------------------------------------------
    def realized(self) -> list[dict]:
        """Each child's weight and what was taken from it: {source, weight, documents, tokens}."""
        counted = self.spec.options.by == "tokens" or self._shards is not None
        return [{"source": child.location(child.spec), "weight": round(share, 6), "documents": docs,
                 "tokens": tokens if counted else None} for child, share, docs, tokens in
                zip(self.children, self.shares, self.documents_taken, self.tokens_taken)]

    def figures(self) -> dict | None:
        return {"sources": self.realized()}

    def on_batch(self, segment, step: int, fetch_s: float, emit: Emit) -> dict:
        if step % MIX_EVENT_STEPS == 0:
            emit("fineweb_mix", step=step, by=self.spec.options.by, sources=self.realized())
        return {}

    def describe(self) -> dict:
        return dict(super().describe(), sources=self.realized())
