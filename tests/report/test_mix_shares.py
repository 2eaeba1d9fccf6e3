"""The data behind `fwe report`'s mix picture and table: each source's realized share of tokens and documents
against its weight, summed over a measure's runs, a tune's trials or a job's processes (each at its last
`fineweb_mix` line); nothing for a single source. Pure functions of made-up artifacts and lines shaped as fwe writes
them."""

from __future__ import annotations

import pytest

from fwe_cli.report.inputs import HeartbeatFile, Input
from fwe_cli.report.markdown import render_markdown
from fwe_cli.report.mix_shares import artifact_mix, heartbeat_mix, mixture_by, share_text, summed
from fwe_cli.report.plan import plan_sections

A, B = "the synthetic source (seed 1)", "/data/mine.jsonl"
MIX_TREE = {"kind": "mixture", "by": "documents", "weights": [3, 1], "stops": ["cycle", "cycle"],
            "children": [{"kind": "synthetic", "seed": 1}, {"kind": "local", "local_path": B}]}


def sources(a_docs: int, a_tokens: int, b_docs: int, b_tokens: int, weights=(0.75, 0.25)) -> list[dict]:
    return [{"source": A, "weight": weights[0], "documents": a_docs, "tokens": a_tokens},
            {"source": B, "weight": weights[1], "documents": b_docs, "tokens": b_tokens}]


def mix_line(rank: int, pid: int, step: int, entries: list[dict], **extra) -> dict:
    return {"ts": 1.0, "pid": pid, "rank": rank, "step": step, "msg": "fineweb_mix", "sources": entries, **extra}


def test_lists_are_summed_source_by_source_into_shares():
    """Two runs' lists sum each source's documents and tokens; the shares are of the sums; the weights stay; the
    largest gap is measured on what the weights are shares of."""
    mix = summed([sources(3, 300, 1, 100), sources(5, 400, 3, 200)], "tokens", "2 runs")
    assert [(s.source, s.weight, s.documents, s.tokens) for s in mix.sources] == [(A, 0.75, 8, 700), (B, 0.25, 4, 300)]
    assert [s.token_share for s in mix.sources] == [0.7, 0.3]
    assert [s.document_share for s in mix.sources] == pytest.approx([8 / 12, 4 / 12])
    assert mix.realized(mix.sources[0]) == 0.7 and mix.largest_gap == pytest.approx(0.05)
    by_documents = summed([sources(3, 300, 1, 100)], "documents", "1 run")
    assert by_documents.realized(by_documents.sources[1]) == 0.25 and by_documents.largest_gap == 0.0
    assert share_text(0.69834) == "69.83 %" and share_text(None) == "—"


def test_one_source_or_nothing_read_has_no_mix_to_show():
    """A list of one source (every single-source run records one) is no mix: None; a mix that read nothing has
    shares None and no gap, not a division by zero."""
    assert summed([[{"source": A, "weight": 1.0, "documents": 9, "tokens": 900}]], "tokens", "1 run") is None
    assert summed([None, "junk"], None, "x") is None
    empty = summed([sources(0, 0, 0, 0)], None, "1 run")
    assert [s.token_share for s in empty.sources] == [None, None] and empty.largest_gap is None


def test_a_jobs_mix_sums_each_process_at_its_last_line():
    """Rank 0's last line (step 200, not its step-100 one), rank 1's only line, and rank 0's restarted process (its
    own pid, counting from its own start) are summed; `by` is unknown unless the lines carry it; lines of other
    kinds are ignored."""
    lines = [mix_line(0, 10, 100, sources(1, 100, 1, 10)), mix_line(0, 10, 200, sources(2, 200, 2, 20)),
             {"pid": 11, "rank": 1, "step": 100, "msg": "fineweb_fetch", "dt_fetch_s": 0.1},
             mix_line(1, 11, 100, sources(3, 300, 3, 30)), mix_line(0, 12, 100, sources(4, 400, 4, 40))]
    mix = heartbeat_mix(lines)
    assert [(s.documents, s.tokens) for s in mix.sources] == [(9, 900), (9, 90)]
    assert mix.by is None and mix.largest_gap is None
    assert mix.over == "3 processes as of each one's last fineweb_mix line, steps 100 to 200"
    assert heartbeat_mix([mix_line(0, 1, 100, sources(1, 1, 1, 1), by="documents")]).by == "documents"
    assert heartbeat_mix(lines[2:3]) is None


def test_artifacts_give_their_mix_and_what_its_weights_are_shares_of():
    """A smoke artifact's loader.sources, a measure's runs (summed), a tune's trials (summed); `by` from the config's
    source tree, found below a node wrapping the mixture; a single-source artifact has none."""
    config = {"source": {"kind": "holdout", "children": [MIX_TREE]}}
    smoke = artifact_mix("smoke", {"config": config, "loader": {"sources": sources(3, 300, 1, 100)}})
    assert smoke.by == "documents" and smoke.over == "the smoke run" and smoke.sources[0].documents == 3
    runs = [{"sources": sources(3, 300, 1, 100)}, {"error": {"message": "boom"}}, {"sources": sources(1, 1, 1, 1)}]
    measure = artifact_mix("measure", {"config": config, "runs": runs})
    assert measure.over == "2 runs" and measure.sources[0].documents == 4
    tune = artifact_mix("tune", {"config": {"source": MIX_TREE}, "trials": runs[:1]})
    assert tune.over == "1 trial" and tune.by == "documents"
    assert mixture_by({"kind": "mixture", "children": []}) == "tokens"  # the default when the tree omits it
    assert mixture_by({"kind": "synthetic"}) is None and mixture_by(None) is None
    single = {"config": {"source": {"kind": "synthetic"}},
              "loader": {"sources": [{"source": A, "weight": 1.0, "documents": 2, "tokens": 20}]}}
    assert artifact_mix("smoke", single) is None


def test_inputs_with_a_mix_get_its_picture_and_table():
    """A smoke artifact and a job's heartbeats read from a mix each get an `N-kind-mix.png` after their other
    pictures, and report.md a table of every source: weight, shares of tokens and documents, documents, tokens; an
    input of one source gets neither."""
    smoke = {"config": {"source": MIX_TREE}, "loader": {"sources": sources(3, 300, 1, 100)}}
    beat = HeartbeatFile("hb", (mix_line(0, 1, 100, sources(6, 600, 2, 200)),), 0)
    one = {"loader": {"sources": [{"source": A, "weight": 1.0, "documents": 2, "tokens": 20}]}}
    inputs = [Input("s.json", "smoke", smoke, ()), Input("logs", "heartbeats", None, (beat,)),
              Input("one.json", "smoke", one, ())]
    sections = plan_sections(inputs)
    assert [[p.file for p in s.pictures if p.kind == "mix"] for s in sections] == [
        ["1-smoke-mix.png"], ["2-heartbeats-mix.png"], []]
    assert sections[0].pictures[-1].size_px == (1000, 380)
    markdown = render_markdown(sections, set(), [], [])
    assert markdown.count("**Mix of 2 sources**") == 2
    assert ("**Mix of 2 sources** over the smoke run: the weights are shares of documents; the largest gap between "
            "a weight and its realized share: 0.00 points.") in markdown
    assert "| source | weight | share of tokens | share of documents | documents | tokens |" in markdown
    assert f"| {A} | 75.00 % | 75.00 % | 75.00 % | 6 | 600 |" in markdown
    assert f"| {B} | 25.00 % | 25.00 % | 25.00 % | 1 | 100 |" in markdown


def test_a_mix_by_documents_counts_no_tokens_and_says_so():
    """A mix by documents does not encode its documents itself, so its sources' tokens are 0: the table shows no
    token share and no token count (—), not a share of nothing; the gap is measured on documents."""
    record = {"config": {"source": MIX_TREE}, "loader": {"sources": sources(30, 0, 10, 0)}}
    mix = artifact_mix("smoke", record)
    assert [s.token_share for s in mix.sources] == [None, None] and mix.largest_gap == 0.0
    markdown = render_markdown(plan_sections([Input("s.json", "smoke", record, ())]), set(), [], [])
    assert f"| {A} | 75.00 % | — | 75.00 % | 30 | — |" in markdown
