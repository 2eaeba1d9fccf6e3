"""The built-in source is deterministic, FineWeb-Edu shaped, and realistically heavy-tailed."""

import numpy as np

from fwe_cli.loader.files.synthetic import synthetic_record

FIELDS = {"text", "id", "dump", "url", "file_path", "language", "language_score", "token_count", "score", "int_score"}


def test_records_have_all_ten_fields_with_types():
    """A synthetic record has FineWeb-Edu's ten fields, scores as floats and counts as ints."""
    record = synthetic_record(0, 5)
    assert set(record) == FIELDS
    assert isinstance(record["language_score"], float) and isinstance(record["score"], float)
    assert isinstance(record["token_count"], int) and isinstance(record["int_score"], int)


def test_deterministic_per_seed_and_index():
    """Record i depends only on (seed, i): same inputs same record, different seed different text."""
    assert synthetic_record(1, 10) == synthetic_record(1, 10)
    assert synthetic_record(1, 10)["text"] != synthetic_record(2, 10)["text"]


def test_length_distribution_is_heavy_tailed():
    """Median near 2,000 characters and a tail past 40,000 (over 2,500 documents)."""
    lengths = np.array([len(synthetic_record(0, i)["text"]) for i in range(2500)])
    assert 1600 < np.median(lengths) < 2500
    assert lengths.max() > 40_000
    assert np.percentile(lengths, 10) < 800
