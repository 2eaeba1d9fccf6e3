"""Resume checked by generated cases: a source tree, a packing, a shuffle, readers and an adapter drawn by hypothesis,
stopped somewhere, their states carried as is, pickled or as JSON, and resumed by the same world or another;
`check.check` holds each case to what an uninterrupted run delivers. `python -m scripts.check_resume --examples N`
runs N cases and prints a failing one as the short script that reproduces it."""
