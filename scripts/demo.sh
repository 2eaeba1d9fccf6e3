#!/usr/bin/env bash
# Set up ./.venv (idempotent) and run the main job offline on the built-in synthetic FineWeb-Edu data:
# Phase 0 measurements (cold vs warm first batch by phase, steady-state fetch p95; tables on stderr), then the
# smoke gate (first batch under a hard timeout) whose JSON goes to stdout. Artifacts land under ./artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -e .
.venv/bin/fwe measure --cold --warm --source synthetic --tokenizer byte --seq-len 1024 --batch 8
.venv/bin/fwe smoke --source synthetic --tokenizer byte --timeout 60 --seq-len 1024 --batch 8 --json
