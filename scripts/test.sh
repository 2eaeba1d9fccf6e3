#!/usr/bin/env bash
# Set up ./.venv (idempotent) and run the whole test suite; extra arguments go to pytest.
#   bash scripts/test.sh            # everything (about 70 s on 2 cores: two pytest workers, one per core)
#   bash scripts/test.sh -k smoke   # a subset
# Test modules are spread over the workers whole (--dist loadfile): a module's shared runs and servers stay in one
# process. FWE_TEST_WORKERS=0 runs everything in the pytest process itself, in order.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
# torch is optional; the CPU build lies on this kind of machine's disk (~20 s). Without it, torch tests skip.
if [ "${FWE_WITH_TORCH:-1}" = 1 ] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q torch==2.13.0 || echo "note: torch not installed; torch tests will be skipped" >&2
fi
.venv/bin/pip install -q -e '.[test]'
exec .venv/bin/python -m pytest -q -n "${FWE_TEST_WORKERS:-2}" --dist loadfile "$@"
