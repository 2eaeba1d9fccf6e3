"""What a mixture realized, as the stats, artifacts and heartbeat lines carry it: each source's weight, documents and
tokens taken, and under a schedule what each stage's weights asked of it against what it gave (`stages`), and the
stage and weights in force where the mix is reading (`in_force`, on each fineweb_mix heartbeat line).

Counts are of the documents this process's mixture handed on (the loader's read-ahead included); a stage's are counted
by the step each document was chosen at, its tokens against the weights in force then.
"""

from __future__ import annotations

from fwe_cli.loader.compose.mix_choice import Chooser
from fwe_cli.loader.compose.schedule import shares_of

DIGITS = 6


def tally(stages: dict[int, tuple[list, list]], choice: Chooser, child: int, tokens: int) -> None:
    """Count a document of `tokens` taken from `child` in the stage in force: the tokens taken, and the tokens the
    weights in force asked of each source meanwhile."""
    got, asked = stages.get(choice.stage) or stages.setdefault(choice.stage, ([0] * len(choice.counts),
                                                                              [0.0] * len(choice.counts)))
    got[child] += tokens
    for i, weight in enumerate(choice.weights):
        asked[i] += weight * tokens


def in_force(choice: Chooser) -> dict:
    """Where the mix is reading in its schedule: the job step, the stage (from 1) and the weights in force there."""
    return {"step": choice.chosen_at, "stage": choice.stage + 1,
            "weights": [round(w, DIGITS) for w in choice.weights]}


def mix_figures(mixture) -> list[dict]:
    """Each source of `mixture` (compose.mixture.Mixture): {source, weight, documents, tokens}, its `id` when it has
    one, and under a schedule its planned weight over what was read and each stage's {stage, steps [from, to),
    weights [at its start, at its end], planned, tokens}."""
    o = mixture.spec.options
    n = len(mixture.children)
    counted = o.by == "tokens" or mixture.pretokenized() is not None
    entries = [{"source": child.location(child.spec), "weight": round(share, DIGITS), "documents": docs,
                "tokens": tokens if counted else None} for child, share, docs, tokens in
               zip(mixture.children, mixture.shares, mixture.documents_taken, mixture.tokens_taken)]
    for entry, name in zip(entries, o.ids):
        if name:
            entry["id"] = name
    choice = mixture.scheduled()
    if choice is None:
        return entries
    stages = sorted(list(mixture.stage_counts().items()))  # (a copy: the producer's thread adds stages)
    asked = [sum(a[i] for _, (_, a) in stages) for i in range(n)]
    weights = shares_of(asked) if sum(asked) > 0 else choice.weights
    timeline = choice.timeline
    for i, entry in enumerate(entries):
        entry["weight"] = round(weights[i], DIGITS)
        entry["stages"] = [{"stage": k + 1, "steps": list(timeline.steps(k)),
                            "weights": [round(timeline.shares[k - 1 if timeline.ramps[k] else k][i], DIGITS),
                                        round(timeline.shares[k][i], DIGITS)],
                            "planned": round(a[i]), "tokens": got[i]} for k, (got, a) in stages]
    return entries
