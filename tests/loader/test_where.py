"""The --where expression itself (sources.where): what it parses and refuses, how a record is judged (pyarrow's
filter semantics), and when a row group's statistics rule every row out."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.sources.where import WhereSyntaxError, check_where, parse_where


def test_comparisons_joined_by_and_parse_to_their_columns_and_literals():
    """Numbers (signed, decimal, exponent), quoted strings and true/false; `and` in any case; the columns in order."""
    where = parse_where("int_score >= 3 AND language_score>0.9 and dump == 'CC-MAIN-2024-10' and x != -1e-2 "
                        "and ok == true and name != \"it's\"")
    assert where.columns == ("int_score", "language_score", "dump", "x", "ok", "name")
    assert [c.value for c in where.comparisons] == [3, 0.9, "CC-MAIN-2024-10", -0.01, True, "it's"]
    assert parse_where(str(where)) == where


@pytest.mark.parametrize("text, says", [
    ("", "comparisons such as"),
    ("   ", "comparisons such as"),
    ("int_score >= ", "a number, a quoted string, true or false at the end"),
    ("int_score >= x", "a number, a quoted string, true or false at 'x'"),
    ("int_score = 3", "cannot read '='"),
    ("3 <= int_score", "a column name at '3 <= int_score'"),
    ("int_score >= 3 or score > 2", "`and` only; got 'or score > 2'"),
    ("int_score >= 3 and", "a column name at the end"),
    ("(int_score >= 3)", "cannot read '(int_score'"),
    ("__import__('os').system('x') == 0", "cannot read"),
    ("int_score >= 3abc", "cannot read '3abc'"),
    ("ok < true", "true and false take == or != only"),
    ("score > 1e999", "out of range"),
    ("dump == 'unclosed", "cannot read"),
])
def test_a_malformed_expression_says_what_is_wrong_and_where(text, says):
    """Every malformed expression is a WhereSyntaxError naming the place, and the options' SettingError names
    the flag: nothing is evaluated as Python."""
    with pytest.raises(WhereSyntaxError) as caught:
        parse_where(text)
    assert says in str(caught.value)
    with pytest.raises(SettingError, match=r"^where "):  # what a kind's options raise: named as the user typed it
        check_where(text)


def test_records_are_judged_as_pyarrows_filter_judges_rows():
    """Over values with nulls and NaN, `matches` keeps exactly the rows pyarrow's filter keeps, for every
    operator."""
    values = [1, 2, 3, None, 4]
    scores = [0.5, math.nan, 2.5, 3.0, None]
    table = pa.table({"n": values, "s": scores})
    for op in ("==", "!=", "<", "<=", ">", ">="):
        for column, literal in (("n", 3), ("s", 2.5)):
            where = parse_where(f"{column} {op} {literal}")
            field = pc.field(column)
            expression = {"==": field == literal, "!=": field != literal, "<": field < literal,
                          "<=": field <= literal, ">": field > literal, ">=": field >= literal}[op]
            kept = table.filter(expression).to_pylist()
            mine = [row for row in table.to_pylist() if where.matches(row)]
            assert [repr(r) for r in mine] == [repr(r) for r in kept], (column, op)


def test_a_missing_field_or_a_value_of_another_type_is_named():
    """A record lacking a column, or holding a value its literal does not compare with (a string for a number, a
    bool for a number), is a ConfigError naming the column and the record."""
    where = parse_where("int_score >= 3")
    with pytest.raises(ConfigError, match=r"'int_score', which f\.jsonl:7 lacks \(its fields: text\)"):
        where.matches({"text": "x"}, lambda: "f.jsonl:7")
    for value in ("3", True):
        with pytest.raises(ConfigError, match=r"compares 'int_score' with a number"):
            where.matches({"int_score": value})


def test_row_group_statistics_rule_out_only_groups_no_row_of_which_passes(tmp_path):
    """For each comparison, a row group is ruled out exactly when pyarrow's filter keeps none of its rows (groups
    of one value, of a range, of nulls only, and of strings); `!=` and float NaN never rule a group out wrongly."""
    groups = [{"n": [1, 2], "s": ["a", "b"]}, {"n": [3, 3], "s": ["c", "c"]}, {"n": [None, None], "s": [None, None]},
              {"n": [4, 9], "s": ["d", "z"]}]
    path = tmp_path / "g.parquet"
    with pq.ParquetWriter(path, pa.schema([("n", pa.int64()), ("s", pa.string())])) as writer:
        for group in groups:
            writer.write_table(pa.table(group, schema=writer.schema), row_group_size=2)
    metadata = pq.read_metadata(path)
    for text in ("n == 3", "n != 3", "n < 3", "n <= 3", "n > 3", "n >= 4", "n > 9", "s == 'c'", "s >= 'd'",
                 "s < 'b'", "n >= 2 and s <= 'c'"):
        where = parse_where(text)
        for g, group in enumerate(groups):
            rows = [dict(zip(group, values)) for values in zip(*group.values())]
            any_passes = any(where.matches(row) for row in rows)
            may = where.may_match(metadata.row_group(g))
            assert may or not any_passes, (text, g)  # never skips a group holding a passing row
            if text != "n != 3":
                assert may == any_passes, (text, g)  # and skips every other one
    nan = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"x": [math.nan, 1.0]}), nan)
    assert parse_where("x != 1.0").may_match(pq.read_metadata(nan).row_group(0))


def test_a_schema_without_the_column_or_of_another_type_is_named():
    """check_schema names the missing column with the file's columns, and a type its literal does not compare with."""
    where = parse_where("int_score >= 3 and dump == 'x'")
    names, types = ["text", "int_score", "dump"], {"text": pa.string(), "int_score": pa.int64(), "dump": pa.string()}
    where.check_schema(names, types, "f.parquet")
    with pytest.raises(ConfigError, match=r"'dump', which f\.parquet lacks \(its columns: text, int_score\)"):
        where.check_schema(names[:2], types, "f.parquet")
    with pytest.raises(ConfigError, match=r"compares 'int_score' with a number, but f\.parquet holds string"):
        where.check_schema(names, dict(types, int_score=pa.string()), "f.parquet")
