"""Where a parquet row group's wanted columns lie in its file: one contiguous span a single range read fetches (the
native Hub reader's and an object store's parquet reads both ask for it)."""

from __future__ import annotations


def column_span(row_group, names: list[str]) -> tuple[int, int]:
    """[start, end) of the bytes of the named columns' chunks in one row group (dictionary pages included)."""
    starts, ends = [], []
    for j in range(row_group.num_columns):
        column = row_group.column(j)
        if column.path_in_schema.split(".")[0] not in names:
            continue
        first = column.data_page_offset
        if column.has_dictionary_page and column.dictionary_page_offset:
            first = min(first, column.dictionary_page_offset)
        starts.append(first)
        ends.append(first + column.total_compressed_size)
    return min(starts), max(ends)
