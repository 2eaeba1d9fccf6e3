#!/usr/bin/env python3
"""The users' old smoke script, kept for existing CI jobs: same flags, now delegating to `fwe smoke`.

    python scripts/automation/fwe_smoke.py --seq-len 1024 --batch 1 --timeout 60 --report-docs 1000 --tokenizer gpt2

Old flags: --seq-len --batch --timeout --report-docs --tokenizer byte|gpt2. Any other argument (e.g. --source synthetic,
--local-path F, --json) is passed to `fwe smoke` unchanged. Exit codes are those of `fwe smoke`. Runs with the
Python that has fwe installed (the project's .venv).
"""

from __future__ import annotations

import argparse
import sys


def translate(argv: list[str]) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--report-docs", type=int)
    parser.add_argument("--tokenizer")
    known, rest = parser.parse_known_args(argv)
    args = ["smoke"]
    for flag, value in (("--seq-len", known.seq_len), ("--batch", known.batch), ("--timeout", known.timeout),
                        ("--report-docs", known.report_docs), ("--tokenizer", known.tokenizer)):
        if value is not None:
            args += [flag, str(value)]
    return args + rest


def main() -> None:
    from fwe_cli.cli.app import app

    app(args=translate(sys.argv[1:]), prog_name="fwe_smoke.py")


if __name__ == "__main__":
    main()
