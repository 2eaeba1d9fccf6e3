#!/usr/bin/env bash
# Set up ./.venv (idempotent) and run the whole test suite; extra arguments go to pytest.
#   bash scripts/test.sh            # everything (about 2 min on 2 cores)
#   bash scripts/test.sh -k smoke   # a subset
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
# torch is optional; the CPU build lies on this kind of machine's disk (~20 s). Without it, torch tests skip.
if [ "${FWE_WITH_TORCH:-1}" = 1 ] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q torch==2.13.0 || echo "note: torch not installed; torch tests will be skipped" >&2
fi
.venv/bin/pip install -q -e '.[test]'
exec .venv/bin/python -m pytest -q "$@"
