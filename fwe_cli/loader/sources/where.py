"""A row filter: `--where "int_score >= 3 and language_score > 0.9"`, comparisons of a source's columns (a JSON
record's fields) with literals, joined by `and`. Parsed here by a small tokenizer, never evaluated as Python.

    where = parse_where("int_score >= 3 and dump == 'CC-MAIN-2024-10'")
    where.columns                 # ('int_score', 'dump'): what a reader reads beside the text
    where.matches(record)         # whether a record (a dict holding those columns) passes
    where.may_match(row_group)    # False when the group's min/max statistics rule every row out: it is not read

Grammar: `column OP literal` (OP one of == != < <= > >=; a column a name of letters, digits and `_`; a literal a
number, a 'string' or "string", or true/false, which compare with == and != only), joined by `and`.
Semantics are those of pyarrow's filter (SQL's): a null passes no comparison; NaN passes only `!=`. A column the
source lacks, or a value of another type than its literal (a string column compared with a number), is a ConfigError
naming the column: found in the schema when a parquet file opens, or at the first such JSONL record (JSONL has no
schema: a record lacking the field is an error, not a silent non-match, so a typo cannot empty the stream).
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping

from fwe_cli.errors import ConfigError, SettingError

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_TOKENS = (  # tried in order at each place of the text
    ("op", re.compile(r"==|!=|<=|>=|<|>")),
    ("number", re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")),
    ("string", re.compile(r"'[^']*'|\"[^\"]*\"")),
    ("name", re.compile(r"[A-Za-z_]\w*")),
)
_CONSTANTS = {"true": True, "false": False}
_SLOTS = (("a column name", ("name",)), (f"one of {' '.join(OPERATORS)}", ("op",)),
          ("a number, a quoted string, true or false", ("number", "string", "constant")))


class WhereSyntaxError(ValueError):
    """What is wrong with a --where expression (the options say it under the flag's name)."""


@dataclass(frozen=True)
class Comparison:
    column: str
    op: str
    value: Any
    """A number (int or float), a string or a bool."""

    def __str__(self) -> str:
        return f"{self.column} {self.op} {_literal(self.value)}"

    @property
    def kind(self) -> str:
        """'bool', 'number' or 'string': which values the comparison takes."""
        return "bool" if isinstance(self.value, bool) else "string" if isinstance(self.value, str) else "number"


@dataclass(frozen=True)
class Where:
    """A parsed filter: every comparison must hold."""

    comparisons: tuple[Comparison, ...]

    def __str__(self) -> str:
        return " and ".join(map(str, self.comparisons))

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads, in the order they first appear."""
        return tuple(dict.fromkeys(c.column for c in self.comparisons))

    def matches(self, record: Mapping[str, Any], naming: Callable[[], str] = lambda: "a record") -> bool:
        """Whether `record` passes (its columns must be keys; a missing key is a ConfigError naming the column and
        the record, which `naming()` says in words)."""
        for c in self.comparisons:
            try:
                value = record[c.column]
            except KeyError:
                raise ConfigError(f"--where names {c.column!r}, which {naming()} lacks (its fields: "
                                  f"{', '.join(map(str, record))})") from None
            if not _holds(c, value, naming):
                return False
        return True

    def may_match(self, row_group) -> bool:
        """Whether a parquet row group (pyarrow RowGroupMetaData) may hold a passing row, by its columns' min/max and
        null counts; True whenever its statistics cannot say."""
        chunks = {row_group.column(j).path_in_schema: row_group.column(j) for j in range(row_group.num_columns)}
        for c in self.comparisons:
            chunk = chunks.get(c.column)
            stats = chunk.statistics if chunk is not None else None
            if stats is None:
                continue
            if stats.has_null_count and stats.null_count >= row_group.num_rows:
                return False  # only nulls: no comparison holds
            if stats.has_min_max and not _range_may_hold(c, stats.min, stats.max):
                return False
        return True

    def check_schema(self, names: list[str], types: Mapping[str, Any], where: str) -> None:
        """ConfigError unless every column is in the schema (`names`, their pyarrow `types`) with a type its literal
        compares with; `where` names the file."""
        for c in self.comparisons:
            if c.column not in names:
                raise ConfigError(f"--where names {c.column!r}, which {where} lacks (its columns: {', '.join(names)})")
            kind = _arrow_kind(types[c.column])
            if kind != c.kind:
                raise ConfigError(f"--where compares {c.column!r} with a {c.kind}, but {where} holds "
                                  f"{types[c.column]} there")


class Filtered:
    """What a source's filter removed so far, for its describe() (the artifacts' `source` record, stats()):
    `documents` (rows that did not pass, those of skipped row groups included) and `row_groups` skipped unread
    (parquet and the Hub)."""

    def __init__(self, where: Where):
        self.where = where
        self.documents = 0
        self.row_groups = 0

    def passes(self, record: Mapping[str, Any], naming: Callable[[], str] = lambda: "a record") -> bool:
        """Whether `record` passes the filter (Where.matches); one that does not is counted as removed."""
        if self.where.matches(record, naming):
            return True
        self.documents += 1
        return False

    def skip_row_group(self, rows: int) -> None:
        """Count a row group the filter's statistics ruled out, not read, and its `rows`."""
        self.row_groups += 1
        self.documents += rows

    def describe(self) -> dict:
        """The fields a source's describe() adds: the filter, and what it removed."""
        return {"where": str(self.where), "filtered": {"documents": self.documents, "row_groups": self.row_groups}}


def where_of(options) -> Where | None:
    """The parsed filter of a kind's options (its `where`), or None."""
    text = getattr(options, "where", None)
    return parse_where(text) if text is not None else None


def filter_of(options) -> tuple[Where | None, Filtered | None]:
    """A leaf source's row filter (None: every record is a document) and the counters of what it removed."""
    where = where_of(options)
    return where, (Filtered(where) if where is not None else None)


@lru_cache(maxsize=64)
def parse_where(text: str) -> Where:
    """The filter `text` says; WhereSyntaxError saying what is wrong and where."""
    if not isinstance(text, str) or not text.strip():
        raise WhereSyntaxError(f"must hold comparisons such as \"int_score >= 3\", got {text!r}")
    tokens = _tokens(text)
    comparisons = []
    i = 0
    while True:
        part = tokens[i:i + 3]
        for j, (wanted, kinds) in enumerate(_SLOTS):
            if j >= len(part) or part[j][0] not in kinds:
                raise WhereSyntaxError(f"expects {wanted} at {_rest(text, tokens, i + j)} in {text!r} (a "
                                       "comparison is COLUMN OP VALUE)")
        (_, column, _), (_, op, _), (kind, value, _) = part
        if kind == "constant" and op not in ("==", "!="):
            raise WhereSyntaxError(f"compares {column!r} {op} {_literal(value)}: true and false take == or != only")
        comparisons.append(Comparison(column, op, value))
        i += 3
        if i == len(tokens):
            return Where(tuple(comparisons))
        if tokens[i][0] != "and":
            raise WhereSyntaxError(f"joins comparisons with `and` only; got {_rest(text, tokens, i)} in {text!r}")
        i += 1


def check_where(where: str | None) -> None:
    """For a kind's options: SettingError naming the `where` option unless it is None or a filter that parses."""
    if where is None:
        return
    try:
        parse_where(where)
    except WhereSyntaxError as exc:
        raise SettingError(lambda n, why=str(exc): f"{n('where')} {why}") from None
    except TypeError:  # unhashable: not text at all
        raise SettingError(lambda n: f"{n('where')} must be text such as \"int_score >= 3\", got {where!r}") from None


def _literal(value: Any) -> str:
    """A literal as the filter's text writes it."""
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    """(kind, value, offset) of each token: an operator, a number, a string, a constant, `and`, or a name."""
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return out
        for kind, pattern in _TOKENS:
            if (match := pattern.match(text, pos)) is not None:
                break
        else:
            raise WhereSyntaxError(f"cannot read {text[pos:].split()[0]!r} in {text!r} (compare a column with a "
                                   f"number, a quoted string, true or false by one of {' '.join(OPERATORS)}; join "
                                   "comparisons with `and`)")
        raw = match.group()
        value: Any = raw
        if kind == "number":
            value = float(raw) if any(ch in raw for ch in ".eE") else int(raw)
            if isinstance(value, float) and not math.isfinite(value):
                raise WhereSyntaxError(f"holds the number {raw!r}, which is out of range, in {text!r}")
        elif kind == "string":
            value = raw[1:-1]
        elif kind == "name" and raw.lower() in _CONSTANTS:
            kind, value = "constant", _CONSTANTS[raw.lower()]
        elif kind == "name" and raw.lower() == "and":
            kind = "and"
        out.append((kind, value, pos))
        pos = match.end()


def _rest(text: str, tokens: list, i: int) -> str:
    """The text from token `i` on, quoted, or `the end`."""
    return repr(text[tokens[i][2]:].strip()) if i < len(tokens) else "the end"


_KINDS = {bool: "bool", int: "number", float: "number", str: "string"}


def _kind_of(value: Any) -> str | None:
    kind = _KINDS.get(type(value))
    if kind is None and isinstance(value, numbers.Number) and not isinstance(value, (bool, complex)):
        return "number"  # a Decimal, a numpy number
    return kind


def _holds(c: Comparison, value: Any, naming: Callable[[], str]) -> bool:
    if value is None:
        return False
    if _kind_of(value) != c.kind:
        raise ConfigError(f"--where compares {c.column!r} with a {c.kind}, but {naming()} holds "
                          f"{type(value).__name__} {value!r} there")
    return OPERATORS[c.op](value, c.value)


def _range_may_hold(c: Comparison, low: Any, high: Any) -> bool:
    """Whether some value in [low, high] passes `c` (True when the statistics are not of the literal's kind)."""
    if _kind_of(low) != c.kind or _kind_of(high) != c.kind or c.kind == "bool":
        return True
    if c.op == "==":
        return low <= c.value <= high
    if c.op == "<":
        return low < c.value
    if c.op == "<=":
        return low <= c.value
    if c.op == ">":
        return high > c.value
    if c.op == ">=":
        return high >= c.value
    return True  # != : NaN passes it, and float statistics leave NaN out


def _arrow_kind(arrow_type) -> str | None:
    """'number', 'string' or 'bool' for a pyarrow type (duck-typed on its text: no pyarrow import), else None."""
    name = str(arrow_type)
    if name == "bool":
        return "bool"
    if name in ("string", "large_string", "string_view") or name.startswith("dictionary<values=string"):
        return "string"
    if re.fullmatch(r"u?int(8|16|32|64)|halffloat|float|double|decimal\d*\(.*\)", name):
        return "number"
    return None
