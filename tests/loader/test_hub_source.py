"""Hub rows reach the loader and bootstrap through one reader: a row without a string `text` is counted (skip) or
fatal (error) for both, and good rows keep their order, ids and shard, whichever Hub reader (native or datasets) the loader uses."""

import pytest

from fwe_cli.errors import ConfigError, SourceError
from fwe_cli.loader import resolve_config
from fwe_cli.loader.config import Shard
from fwe_cli.loader.hub.native import HubNative
from fwe_cli.loader.sources.registry import open_source
from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec
from fwe_cli.loader.sources.units import Unit
from fwe_cli.loader.stream import DocumentStream

ROWS = [
    {"text": "zero", "id": "a"},
    {"text": None, "id": "b"},
    {"text": "two"},
    {"text": 3, "id": "d"},
    {"text": "four", "id": 4},
    {"text": "five", "id": "f"},
]


@pytest.fixture(params=["datasets", "native"])
def fake_hub(monkeypatch, request):
    """Both Hub readers yield ROWS instead of opening a dataset (loader and bootstrap open `datasets` through
    open_hub_stream, at the commit hub_revision names; the native reader's rows come from its parquet reader, stood
    in for here, behind the listing it opens with). Returns the reader's name."""
    from fwe_cli.loader.hub import native as hub_native

    monkeypatch.setattr("fwe_cli.loader.hub.streaming.open_hub_stream",
                        lambda dataset, name, split, revision=None, all_columns=False, where=None: iter(ROWS))
    monkeypatch.setattr("fwe_cli.loader.hub.streaming.hub_revision", lambda dataset, revision=None: "c" * 40)
    monkeypatch.setattr(HubNative, "open", lambda self, set_stage: None)
    monkeypatch.setattr(HubNative, "units", lambda self: [Unit(0, 0, len(ROWS))])  # a row a coordinate

    def read(self, pieces, at):
        rows = ((row, hub_native.HubRowPosition(0, 0, n), piece.on_line(n - 1))
                for piece in pieces for n, row in enumerate(ROWS, start=1) if piece.lo <= n - 1 < piece.hi)
        return hub_native.iter_hub(rows, self.spec.options.dataset, self.bad, self.options.strict)

    monkeypatch.setattr(HubNative, "read", read)
    return request.param


def hub_config(reader, **kw):
    return resolve_config(env={}, source="hub", dataset="org/ds", hub_reader=reader, **kw)


def test_loader_counts_hub_rows_without_text_and_reports_them(fake_hub):
    """skip mode: the loader yields the good rows in order, ids from the row or `{dataset}#{row index}`, and
    describe() reports each bad row with its row number and reason."""
    stream = DocumentStream(hub_config(fake_hub))
    docs = list(stream)
    assert [(d.text, d.id) for d in docs] == [("zero", "a"), ("two", "org/ds#2"), ("four", "org/ds#4"),
                                              ("five", "f")]
    assert stream.describe()["bad_records"] == {
        "count": 2, "examples": ["org/ds#row2: 'text' is null", "org/ds#row4: 'text' is int, not a string"]}


def test_loader_hub_bad_row_is_fatal_in_error_mode(fake_hub):
    """error mode: the first row without a string `text` raises SourceError naming the dataset and row."""
    with pytest.raises(SourceError, match=r"^org/ds#row2: 'text' is null \(use --bad-records skip"):
        list(DocumentStream(hub_config(fake_hub, bad_records="error")))


def test_two_readers_of_the_hub_hold_its_good_rows_once_and_bootstrap_shards_by_record(fake_hub):
    """Reader 1 of 2 of the native reader holds the second half of the rows (its share of the units), the two
    readers together every good row in order; the datasets reader, which streams the whole dataset, refuses a second
    reader naming the native one. Bootstrap's shard 1 of 2 holds the odd good records, the bad ones counted."""
    if fake_hub == "datasets":
        with pytest.raises(ConfigError, match="--hub-reader native"):
            hub_config(fake_hub, shard_mod=2, shard_rem=1)
    else:
        readers = [[d.text for d in DocumentStream(hub_config(fake_hub, shard_mod=2, shard_rem=r))] for r in (0, 1)]
        assert readers == [["zero", "two"], ["four", "five"]]
    records = open_source(SourceSpec.of("hub", dataset="org/ds", hub_reader="datasets"), ReadOptions()).records(Shard(2, 1))
    assert [record["text"] for record, _line in records] == ["two", "five"]
    assert records.bad.count == 2 and records.position()["rows"] == 6
