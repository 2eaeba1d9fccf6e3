"""Sources made of sources: a weighted mixture (its choice, positions and figures), its mix file and its schedule of
weights that change with the step, a held-out split, a bootstrap continued from the Hub (`head_tail`, with where its
rows are: `head_tail_map`) and that bootstrap grown by the loader (`growth`). Each reads its children through the
same Source contract, so any tree the spec accepts is readable, resumable and elastic."""
