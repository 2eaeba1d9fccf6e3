"""Set-up scripts, the benchmarks (`scripts.bench`, run as `python -m scripts.bench.<name>` from the repository root)
and the users' old automation scripts; a package only so that `python -m scripts.bench.<name>` resolves."""
