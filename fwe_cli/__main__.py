"""`python -m fwe_cli` is the same as the `fwe` console script."""

from fwe_cli.cli.app import main

if __name__ == "__main__":
    main()
