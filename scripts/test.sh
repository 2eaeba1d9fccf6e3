#!/usr/bin/env bash
# Set up ./.venv (idempotent) and run the whole test suite; extra arguments go to pytest.
#   bash scripts/test.sh            # everything (pytest workers: one per core plus three, at most 8)
#   bash scripts/test.sh --fast     # the inner loop: -m "not slow" (tests/conftest.py's SLOW), cores + 1 workers
#   bash scripts/test.sh -k smoke   # a subset
# Test modules are spread over the workers whole (--dist loadfile): a module's shared runs and servers stay in one
# process. They are handed out in the order tests/conftest.py puts them, the longest first
# (--no-loadscope-reorder), so the workers end together. Three workers more than there are cores: the tests spend
# more than half their time waiting (on child processes, simulated round trips, timeouts and the main job's
# sleeping training steps), and the extra workers keep the cores busy meanwhile. The fast subset waits less (a few
# seconds of timeouts it proves, paced test servers): one worker more than there are cores (each worker imports the
# suite anew).
# FWE_TEST_WORKERS=N sets the number of workers; FWE_TEST_WORKERS=0 runs everything in the pytest process itself.
# FWE_TEST_CPU=FILE writes each test's CPU seconds to FILE (python -m tests.cpu_account FILE sums them per module).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=()
if [ "${1:-}" = --fast ]; then
  shift
  fast=(-m "not slow")
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
# The venv's set-up is done once per pyproject.toml, this script and the torch choice: its stamp lets later runs
# skip pip.
stamp="$(cat pyproject.toml scripts/test.sh | sha256sum | cut -d' ' -f1) torch=${FWE_WITH_TORCH:-1}"
if [ "$(cat .venv/.fwe-test-setup 2>/dev/null)" != "$stamp" ]; then
  # torch: the CPU build lies on this kind of machine's disk (~20 s). The test extra's torchdata and accelerate
  # (tests/train) need torch too: installed first, it is the build they get.
  if [ "${FWE_WITH_TORCH:-1}" = 1 ] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/pip install -q torch==2.13.0 || echo "note: torch not installed; torch tests will be skipped" >&2
  fi
  .venv/bin/pip install -q -e '.[test]'
  # torchtitan (for its adapter's tests) pins datasets<4.8, with an older huggingface_hub, for its own Hugging Face
  # readers, which the adapter never imports: it goes in without its dependencies, so the suite keeps testing fwe
  # with the datasets it resolves to; the modules the adapter and its tests import need only torch and the test
  # extra's torchdata and tyro. It needs Python 3.11; without it the torchtitan tests skip.
  if .venv/bin/python -c "import sys, torch; sys.exit(sys.version_info < (3, 11))" 2>/dev/null; then
    .venv/bin/pip install -q --no-deps torchtitan==0.3.0 \
      || echo "note: torchtitan not installed; its tests will be skipped" >&2
  fi
  echo "$stamp" > .venv/.fwe-test-setup
fi
# The suite starts hundreds of interpreters (each pytest worker rewrites every test module's asserts, each fwe
# process compiles the fwe_cli modules it imports): let them keep their compiled bytecode in __pycache__ (ignored by
# git) and reuse it, whatever the calling shell says.
unset PYTHONDONTWRITEBYTECODE
cores=$(nproc 2>/dev/null || echo 2)
if [ ${#fast[@]} -gt 0 ]; then
  workers=${FWE_TEST_WORKERS:-$(( cores + 1 ))}
else
  workers=${FWE_TEST_WORKERS:-$(( cores + 3 < 8 ? cores + 3 : 8 ))}
fi
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder ${fast[@]+"${fast[@]}"} "$@"
