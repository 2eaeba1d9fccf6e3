"""A generated resume case: a source tree, a packing, a shuffle, readers, an adapter, where they stop, how their
states travel, and whether another world resumes them; drawn by hypothesis (`cases()`), printed as the short script
that runs it again (`Case.script()`).

Every field is a plain value, so a case is its own reproduction: `check(Case(...))` (scripts.check_resume.check).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from hypothesis import strategies as st

FORMATS = ("jsonl", "txt", "gz", "parquet", "tokens")
PACKINGS = ("stream", "greedy", "best-fit")
ADAPTERS = ("loader", "dataloader", "grain")
SERIALISATIONS = ("memory", "pickle", "json")


@dataclass(frozen=True)
class Leaf:
    """One source of documents: `files` files of `fmt`, `docs` documents in all (text sizes from `seed`); a parquet
    file's row groups hold `rows_per_group` documents."""

    fmt: str
    docs: int
    files: int = 1
    seed: int = 0
    rows_per_group: int = 8


@dataclass(frozen=True)
class Case:
    """What one resume check runs (see the module docstring)."""

    leaves: tuple[Leaf, ...]
    weights: tuple[float, ...] = ()
    """A mix's weights (one per leaf; empty: a single leaf)."""
    stops: tuple[str, ...] = ()
    by: str = "tokens"
    holdout: float | None = None
    where: bool = False
    """Keep the documents with int_score >= 2 (a row filter; the leaves are JSONL or parquet then)."""
    pack: str = "stream"
    pack_buffer: int = 8
    seq_len: int = 16
    batch_size: int = 2
    shuffle: int | None = None
    window: int = 4
    epochs: int = 1
    ranks: int = 1
    workers: int = 0
    persistent: bool = False
    snapshot: int = 1
    adapter: str = "loader"
    samples: bool = False
    cut: tuple[int, ...] = (3,)
    """Batches each rank takes before its state is saved (a rank whose data ends sooner saves a done state)."""
    serial: str = "json"
    new_ranks: int | None = None
    """Ranks that resume every old rank's state (None: each rank resumes its own)."""
    new_workers: int = 0

    @property
    def mixed(self) -> bool:
        return len(self.leaves) > 1

    def script(self) -> str:
        """A short script that runs this case again."""
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                         if getattr(self, f.name) != f.default)
        return ("from scripts.check_resume.cases import Case, Leaf\n"
                "from scripts.check_resume.check import check\n\n"
                f"check(Case({args}))\n")


@st.composite
def leaves(draw, where: bool) -> tuple[Leaf, ...]:
    count = draw(st.sampled_from((1, 1, 2, 3)))
    formats = ("jsonl", "parquet") if where else FORMATS
    return tuple(Leaf(draw(st.sampled_from(formats)), draw(st.integers(3, 60)), draw(st.integers(1, 3)),
                      draw(st.integers(0, 9)), draw(st.integers(2, 12))) for _ in range(count))


@st.composite
def cases(draw, workers: bool = True) -> Case:
    """A resume case; `workers`: whether DataLoader worker processes may be drawn (they cost a process each)."""
    where = draw(st.booleans())
    tree = draw(leaves(where))
    mixed = len(tree) > 1
    tokens_only = all(leaf.fmt == "tokens" for leaf in tree)
    texts = not any(leaf.fmt == "tokens" for leaf in tree)
    weights = tuple(draw(st.sampled_from((1, 2, 3, 0.5))) for _ in tree) if mixed else ()
    stops = tuple(draw(st.sampled_from(("first_exhausted", "cycle"))) for _ in tree) if mixed else ()
    if mixed and all(stop == "cycle" for stop in stops):
        stops = ("first_exhausted",) + stops[1:]  # (a mix of cycled sources only never ends)
    holdout = draw(st.sampled_from((None, None, 0.3))) if texts else None
    pack = draw(st.sampled_from(PACKINGS))
    adapter = draw(st.sampled_from(ADAPTERS))
    ranks = draw(st.integers(1, 3))
    worker_count = draw(st.sampled_from((0, 0, 0, 1, 2))) if workers and adapter == "dataloader" else 0
    snapshot = draw(st.sampled_from((1, 2, 5)))
    # (Grain deals no other world; a DataLoader's worker states are only known at their snapshots: load_world refuses
    # states taken between them)
    change = draw(st.booleans()) and adapter != "grain" and not (worker_count and snapshot > 1)
    new_ranks = draw(st.integers(1, 3)) if change else None
    new_workers = draw(st.sampled_from((0, 0, 1, 2))) if change and worker_count else 0
    samples = adapter != "loader" and draw(st.sampled_from((False, False, True))) and not change
    return Case(
        leaves=tree, weights=weights, stops=stops, by=draw(st.sampled_from(("tokens", "documents"))),
        holdout=holdout, where=where, pack=pack, pack_buffer=draw(st.sampled_from((1, 4, 16))),
        seq_len=draw(st.sampled_from((8, 16, 48))), batch_size=draw(st.sampled_from((1, 2, 3))),
        shuffle=draw(st.sampled_from((None, 7))) if not tokens_only or not mixed else None,
        window=draw(st.sampled_from((1, 3, 16))), epochs=draw(st.sampled_from((1, 1, 2))), ranks=ranks,
        workers=worker_count, persistent=draw(st.booleans()) if worker_count else False,
        snapshot=snapshot, adapter=adapter, samples=samples,
        cut=tuple(draw(st.integers(0, 40)) for _ in range(ranks)), serial=draw(st.sampled_from(SERIALISATIONS)),
        new_ranks=new_ranks, new_workers=new_workers)
