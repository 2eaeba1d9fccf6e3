"""fwe: a FineWeb-Edu data loader that never leaves a GPU waiting.

Importing this package costs nothing: the loader lives in `fwe_cli.loader` (see README "Python API"), the
commands in `fwe_cli.cli`.
"""

__version__ = "0.1.0"  # the one place it is written: pyproject.toml reads it from here
