"""fwe: a FineWeb-Edu data loader that never leaves a GPU waiting.

Importing this package costs nothing: the loader lives in `fwe_cli.loader` (see README "Python API"), the
commands in `fwe_cli.cli`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fwe")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
