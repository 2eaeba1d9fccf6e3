"""A weighted mixture of sources: a composite whose stream takes each next document from one of its children, chosen
arithmetically (no random generator to replay: compose.mix_choice): the child whose share so far lies furthest below
its weight, or, under a schedule (compose.schedule), below what the weights in force at each step asked of it.

Shares are of tokens (`by` tokens, the default: exact to each document's token count, so the mixture encodes its
children's documents itself, once, and hands them on as ids) or of documents (`by` documents). Each child is dealt,
ordered and shuffled by the reader's settings on its own (its own units: sources.order), so each reader mixes its own
documents at the same ratio, and the choice depends only on what came before: the same order on any Q, doc batch,
threads, backend and resume. A child that ends either ends the mixture (`first_exhausted`) or starts over in its
next epoch (`cycle`: compose.cycle).

Its cursor (compose.mix_positions) holds, for each child, the cursor of the last document taken from it and what the
shares count so far (under a schedule: the stage they are of and the reader's clock); a stream opened at it takes the
next document exactly as the uninterrupted one did. Any child may itself be a composite (a mixture of mixtures, a
held-out split of a mix); a schedule's clock counts the tokens its own mixture hands on, so it belongs to the mix a
loader reads.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

from fwe_cli.errors import ConfigError
from fwe_cli.loader.compose.cycle import ChildStream, WholeEpoch
from fwe_cli.loader.compose.mix_choice import Chooser
from fwe_cli.loader.compose.mix_positions import (MixClock, MixtureCursor, MixtureFrontier, MixturePlan,
                                                  ScheduledCursor, ScheduledPlan)
from fwe_cli.loader.compose.mix_figures import in_force, mix_figures, tally
from fwe_cli.loader.compose.schedule import Stage, Timeline, check_reach, check_schedule, check_weight, shares_of
from fwe_cli.loader.compose.schedule_past import UNSCHEDULED_WORLD, keep_future
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
    """Each child's weight (numbers >= 0, not all zero; normalized to shares); none under a schedule."""
    stops: tuple = ()
    """Each child's policy when it ends: 'first_exhausted' (the mixture ends) or 'cycle' (it starts over)."""
    ids: tuple = ()
    """Each child's name ("" for none; none at all: unnamed), what a schedule's stages and the figures name it by."""
    schedule: tuple = ()
    """Stages of weights that change with the step (compose.schedule.Stage, or their JSON); none: `weights` hold."""

    def __post_init__(self) -> None:
        for name in ("weights", "stops", "ids"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "schedule", tuple(Stage.of(stage, k) for k, stage in enumerate(self.schedule, 1)))
        if self.by not in BY:
            raise ConfigError(f"a mix's \"by\" must be one of {', '.join(BY)}, got {self.by!r}")
        for i, weight in enumerate(self.weights):
            check_weight(weight, f"the weight of mix source #{i + 1}")
        if self.weights and not any(self.weights):
            raise ConfigError(f"a mix needs a weight above 0, got all zero ({list(self.weights)})")
        for i, stop in enumerate(self.stops):
            if stop not in STOPS:
                raise ConfigError(f"the \"stop\" of mix source #{i + 1} must be one of {', '.join(STOPS)}, "
                                  f"got {stop!r}")
        for i, name in enumerate(self.ids):
            if not isinstance(name, str) or (name and name in self.ids[:i]):
                raise ConfigError(f"the \"id\" of mix source #{i + 1} must be a name no other source has, got "
                                  f"{name!r}")
        if self.schedule and self.by != "tokens":
            raise ConfigError(f"a mix's \"schedule\" counts tokens (its steps are the loader's batches): its \"by\" "
                              f"must be tokens, got {self.by!r}")

    def names(self, n: int) -> list[str]:
        """How an error names each of `n` children: its id, else its number."""
        return [repr(self.ids[i]) if i < len(self.ids) and self.ids[i] else f"source #{i + 1}" for i in range(n)]


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
        if o.schedule and o.weights:
            raise ConfigError("a mix with a schedule takes its weights from its stages: give it no weights")
        if len(o.weights) != (0 if o.schedule else n) or len(o.stops) != n or len(o.ids) not in (0, n):
            raise ConfigError(f"a mix of {n} sources needs {n} weights (or a schedule), {n} stops and {n} ids or none, "
                              f"got {len(o.weights)}, {len(o.stops)} and {len(o.ids)}")
        check_schedule(o.schedule, o.names(n))

    @classmethod
    def location(cls, spec) -> str:
        return "a mix of " + ", ".join(child.location() for child in spec.children)

    @classmethod
    def saved_settings(cls, saved: dict, now: dict, reached: Position | None, order: StreamOrder) -> dict:
        """A state's mix as this loader may take it: its ids are names only (this loader's hold), and a schedule may
        change after the saved step (an anneal added mid-run): compose.schedule_past."""
        return keep_future(saved, now, reached, order)

    def __init__(self, spec, options):
        super().__init__(spec, options)
        o = spec.options
        self.shares = list(shares_of(o.weights if o.weights else o.schedule[0].weights))
        self.documents_taken = [0] * len(self.children)
        self.tokens_taken = [0] * len(self.children)
        self._stages: dict[int, tuple[list, list]] = {}  # stage -> (tokens taken, tokens its weights asked), each child
        self._choice: Chooser | None = None  # the stream's (its place in the schedule, for the figures)
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
               plan: MixturePlan | ScheduledPlan | None) -> Iterator[Document]:
        """This reader's documents of each child (each dealt by its own units), mixed."""
        n, o = len(self.children), self.spec.options
        cursors = list(start.cursors) if start is not None else [None] * n
        plans = plan.children if plan is not None else (None,) * n
        choice = self._choice = self._chooser(order, start, plan)
        encode = self._encoder() if o.by == "tokens" else None
        streams = [ChildStream(child, order, cursors[i], plans[i], stop == "cycle",
                               None if cursors[i] is None else _epoch(cursors[i]), encode, self._pool, self._threads)
                   for i, (child, stop) in enumerate(zip(self.children, o.stops))]
        scheduled = choice.timeline is not None
        while (c := choice.next()) is not None:
            doc = next(streams[c].docs, None)
            if doc is None:
                if o.stops[c] == "first_exhausted":
                    return
                raise ConfigError(f"mix source #{c + 1} ({self.children[c].location(self.children[c].spec)}) has no "
                                  "document to cycle through")
            before, counts = tuple(cursors), tuple(choice.counts)
            cursors[c] = doc.resume
            tokens = len(doc.ids) + 1 - doc.delivered if doc.ids is not None else None
            doc.resume = ScheduledCursor(before, counts, c, cursors[c], choice.stage, choice.clock,
                                         choice.timeline.clock) if scheduled else MixtureCursor(before, counts, c,
                                                                                                cursors[c])
            self.documents_taken[c] += 1
            self.tokens_taken[c] += tokens or 0  # (by documents, texts are not encoded here: None in `realized`)
            if scheduled:
                tally(self._stages, choice, c, tokens)
            choice.took(c, tokens if o.by == "tokens" else 1, tokens or 0)
            yield doc

    def _chooser(self, order: StreamOrder, start: MixtureCursor | None, plan) -> Chooser:
        """The choice of this stream's children, from `start`: its counts, and under a schedule its clock (the
        cursor's, else one begun where `plan` says the world began) and stage."""
        o, n = self.spec.options, len(self.children)
        counts = list(start.counts) if start is not None else [0] * n
        if not o.schedule:
            return Chooser(self.shares, counts)  # (a scheduled state without a change of the past: stage 1's counts)
        if isinstance(start, ScheduledCursor):
            return Chooser(self.shares, counts, Timeline(o.schedule, start.origin), start.stage, start.clock)
        clock = MixClock.begun(order.readers, order.workers, order.batch_tokens, plan)
        timeline = Timeline(o.schedule, clock)
        if start is None:
            if plan is None:
                check_reach(self.children, o.stops, o.schedule, clock, order.epochs - order.first, o.names(n))
            return Chooser(self.shares, counts, timeline)
        if plan is not None:  # (a state of a mix without a schedule, dealt by a changed world: its steps are lost)
            raise ConfigError(UNSCHEDULED_WORLD)
        return Chooser(self.shares, counts, timeline, 0, sum(counts))

    def frontier(self, resume: MixtureCursor, delivered: int, tokens: int) -> MixtureFrontier:
        """Each child's frontier: its own child's document `delivered` tokens in, the others' last document taken
        before it delivered whole; none for a cycled child read as a whole epoch (every reader cycles it itself).
        Under a schedule, also the job step after the reader's last batch, where the next world's clocks begin."""
        fronts = []
        for i, child in enumerate(self.children):
            at, part = (resume.at, (delivered, tokens)) if i == resume.child else (resume.cursors[i], (1, 1))
            fronts.append(None if at is None or isinstance(at, WholeEpoch) else child.frontier(at, *part))
        if not isinstance(resume, ScheduledCursor):
            return MixtureFrontier(tuple(fronts))
        step = resume.origin.reached(resume.clock + delivered)
        return MixtureFrontier(tuple(fronts), step, resume.origin.tokens_at(step))

    def plan_for(self, olds, order) -> MixturePlan | ScheduledPlan:
        """Each child dealt again from its own frontiers (the mix's shares start afresh); under a schedule, the new
        world begins at the step the furthest old reader had reached."""
        children = tuple(
            child.plan_for([(plan.children[i] if plan is not None else None,
                             front.children[i] if front is not None else None) for plan, front in olds], order)
            for i, child in enumerate(self.children))
        if not self.spec.options.schedule:
            return MixturePlan(children)
        begun = [(plan.step, plan.tokens) for plan, _ in olds if isinstance(plan, ScheduledPlan)]
        begun += [(front.step, front.tokens) for _, front in olds if front is not None and front.step is not None]
        if any(front is not None and front.step is None for _, front in olds):
            raise ConfigError(UNSCHEDULED_WORLD)
        return ScheduledPlan(children, *max(begun, default=(0, 0)))

    def check_resume(self, resume) -> None:
        if resume is None:
            return
        if not isinstance(resume, MixtureCursor) or len(resume.cursors) != len(self.children):
            raise ConfigError(f"the resume position {resume.to_json()} is not one of {self.location(self.spec)}: "
                              "resume over the same sources, or start without the state")
        for child, cursor in zip(self.children + [self.children[resume.child]], resume.cursors + (resume.at,)):
            child.check_resume(cursor.at if isinstance(cursor, WholeEpoch) else cursor)

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
        """Each child's weight and what was taken from it (compose.mix_figures)."""
        return mix_figures(self)

    def scheduled(self) -> Chooser | None:
        """The stream's choice when it follows a schedule (its clock, stage and weights in force), else None."""
        choice = self._choice
        return choice if choice is not None and choice.timeline is not None else None

    def stage_counts(self) -> dict[int, tuple[list, list]]:
        """Stage -> (each child's tokens taken in it, the tokens its weights asked of each)."""
        return self._stages

    def figures(self) -> dict | None:
        return {"sources": self.realized()}

    def on_batch(self, segment, step: int, fetch_s: float, emit: Emit) -> dict:
        if step % MIX_EVENT_STEPS == 0:
            fields = {"by": self.spec.options.by, "sources": self.realized()}
            if self.scheduled() is not None:
                fields["schedule"] = in_force(self._choice)
            emit("fineweb_mix", step=step, **fields)
        return {}

    def describe(self) -> dict:
        return dict(super().describe(), sources=self.realized())
