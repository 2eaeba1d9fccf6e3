#!/usr/bin/env bash
# Set up ./.venv (idempotent) and run the main job offline on the built-in synthetic FineWeb-Edu data:
# a smoke gate (first batch under a hard timeout), JSON on stdout, artifacts under ./artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e .
.venv/bin/fwe smoke --source synthetic --tokenizer byte --timeout 60 --seq-len 1024 --batch 8 --json
