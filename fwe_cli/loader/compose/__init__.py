"""Sources made of sources: a weighted mixture and its mix file, a held-out split, a bootstrap continued from the Hub
(`head_tail`, with where its rows are: `head_tail_map`) and that bootstrap grown by the loader (`growth`). Each reads
its children through the same Source contract, so any tree the spec accepts is readable, resumable and elastic."""
