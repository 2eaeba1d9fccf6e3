"""Crash-safe outputs, the machinery `fwe bootstrap` and `fwe tokenize` share: one writer at a time (lock.py), every
OSError as one line (os_errors.py), the manifest replaced atomically and read back for a resume (manifest_file.py),
fresh / resume / refuse (prepare.py), sha256 verification (verify.py), the disk preflight (disk_preflight.py),
fault injection for the crash tests (faults.py) and the progress clock (progress_clock.py).

What tells one output from another (its paths, its manifest's format and listed files) is the caller's: an
OutputLayout with its OutputKind (kind.py). This package sits below the loader: it imports only fwe_cli.errors,
fwe_cli.artifacts, fwe_cli.hostinfo, the standard library, psutil and orjson.
"""
