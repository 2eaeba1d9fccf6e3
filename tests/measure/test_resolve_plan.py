"""The resolver-request model `fwe doctor --ranks` reports (fwe_cli/measure/resolve_plan.py): which files a node's
readers touch, and how many resolves a job's shape sends per epoch and per 5 minutes, now and with a resolve per
read. Pure arithmetic over sizes; the measured counts it bounds are in tests/loader/test_hub_resolves_runs.py."""

from __future__ import annotations

import pytest

from fwe_cli.measure.resolve_plan import QUOTAS, files_per_node, read_spans, resolve_plan, sample_10bt


def test_a_nodes_files_are_those_its_stretch_of_the_line_overlaps():
    """8 equal files over 4 nodes: 2 each; over 3 nodes a boundary falls inside a file, which both nodes touch;
    over 16 nodes each node is inside one file."""
    sizes = [100] * 8
    assert files_per_node(sizes, 4) == [2, 2, 2, 2]
    assert files_per_node(sizes, 3) == [3, 4, 3]
    assert files_per_node(sizes, 16) == [1] * 16


def test_a_file_is_read_for_the_share_of_the_epoch_the_nodes_readers_spend_in_it():
    """One reader over two equal files reads each for half the epoch; two readers, one a file, each the whole."""
    assert read_spans([100, 100], 1, 1) == [[0.5, 0.5]]
    assert read_spans([100, 100], 1, 2) == [[1.0, 1.0]]
    assert read_spans([100, 100, 100], 3, 1)[1] == [-1.0, 1.0, -1.0]


def test_sample_10bt_at_1024_x_8_fits_the_quota_and_did_not_before():
    """1,024 ranks x 8 workers on sample-10BT at 128 M tokens/s (an epoch ~78 s): a node resolves its one or two
    files once (and, cold, the first file, whose footer its listing reads ahead): at most 3 per node, under an
    anonymous 3,000 in any 5 minutes, a warm start's branch checks included; one resolve per read was ~9,700 row
    groups an epoch, ~37,000 per 5 minutes, and 8,192 at the start."""
    sizes, row_groups, tokens = sample_10bt()
    plan = resolve_plan(sizes, row_groups, tokens, ranks=1024, workers=8, tokens_per_s=128e6)
    assert plan["nodes"] == 128 and 78 <= plan["epoch_s"] <= 79
    assert plan["after"]["start"] == plan["after"]["per_epoch"] <= plan["files_per_node"]["sum"] + 128 <= 3 * 128
    assert plan["after"]["per_5_min_warm"] == plan["files_per_node"]["sum"] + 128 <= QUOTAS["anonymous"]
    assert plan["before"]["start"] == 8192 and plan["before"]["per_epoch"] >= row_groups
    assert plan["before"]["per_5_min"] > 7 * QUOTAS["free"] and all(plan["fits"].values())


def test_urls_outlived_by_a_slow_read_are_resolved_again_and_a_shuffle_touches_more_files():
    """One reader at 100 k tokens/s reads each file longer than a URL lives: it is resolved more than once per
    file in the epoch (still once per 5 minutes); a shuffled job's nodes touch blocks of more files than its
    unshuffled stretches do."""
    sizes, row_groups, tokens = sample_10bt()
    slow = resolve_plan(sizes, row_groups, tokens, ranks=1, workers=0, tokens_per_s=1e5)
    assert slow["after"]["per_epoch"] > len(sizes) and slow["after"]["per_5_min"] == len(sizes)
    plain = resolve_plan(sizes, row_groups, tokens, ranks=1024, workers=8, tokens_per_s=128e6)
    shuffled = resolve_plan(sizes, row_groups, tokens, ranks=1024, workers=8, tokens_per_s=128e6, shuffle=True)
    assert shuffled["after"]["per_5_min"] > plain["after"]["per_5_min"]
    with pytest.raises(ValueError):
        resolve_plan([], 0, 1.0, ranks=1, workers=0, tokens_per_s=1.0)
