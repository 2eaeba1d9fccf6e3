"""A `fwe bootstrap --hub-reader datasets` resumed after the branch moved reads the commit its manifest pins, and when
that commit cannot be read (503s until the retries give up) it fails with one line naming the commit and the cause:
it never reads the branch's new commit in its place, so one bootstrap never mixes two commits. Each run is a sealed
subprocess against a test Hub of the test's own (`datasets` reads HF_ENDPOINT once, at import)."""

from __future__ import annotations

import subprocess
import sys

import orjson

from fwe_cli.loader.files.synthetic import synthetic_record
from tests.bootstrap.support import lines_of, manifest_of
from tests.helpers import REPO_ROOT
from tests.hubsim.repos import MANIFEST

# One bootstrap run: stopped after `stop_after` polls of should_stop (0: runs to the end), its Hub retries kept
# within `budget_s` (0: the default policy) as a loader's --timeout keeps them; prints its outcome or its error.
RUN = """
import sys, orjson
from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.errors import FweError
from fwe_cli.loader.remote.transient import RetryScope, scoped

out, stop_after, budget_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
polls = iter(range(10**6))
config = bootstrap_config(out=out, gb=1, file_mb=0.3, checkpoint_mb=0.1, hub_reader="datasets")
with scoped(RetryScope(budget_s=budget_s or None)):
    try:
        result = run_bootstrap(config, should_stop=lambda: bool(stop_after) and next(polls) >= stop_after)
        print(orjson.dumps({"outcome": result["outcome"]}).decode())
    except FweError as exc:
        print(orjson.dumps({"error": type(exc).__name__, "message": str(exc)}).decode())
"""


def bootstrap(run, home, out, stop_after: int = 0, budget_s: float = 0.0) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, str(out), str(stop_after), str(budget_s)], capture_output=True,
                          text=True, env=run.env(home), cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return orjson.loads(proc.stdout.splitlines()[-1])


def test_a_resumed_datasets_bootstrap_reads_its_pinned_commit_or_fails_naming_it(moving_hub, hubsim_root, tmp_path):
    """Interrupted at commit A, `main` then moved to B (whose stream starts elsewhere): with A answering 503 the
    resume fails, one line naming A and the 503, and copies nothing; once A answers again the resume ends with every
    row of A, in order, and none of B."""
    run, home, out = moving_hub, moving_hub.new_home(), tmp_path / "out"
    assert bootstrap(run, home, out, stop_after=2) == {"outcome": "interrupted"}
    pinned, _ = run.move_main()
    assert manifest_of(out)["revision"] == pinned
    copied = manifest_of(out)["resume"]["bytes"]
    run.set_faults(fail_count=10**6, fail_status=503, fail_match=pinned)
    failed = bootstrap(run, home, out, budget_s=2.0)
    assert failed["error"] == "SourceError", failed
    assert "\n" not in failed["message"] and pinned in failed["message"] and "HTTP 503" in failed["message"]
    assert manifest_of(out)["resume"]["bytes"] == copied and not manifest_of(out)["complete"]
    run.set_faults()
    assert bootstrap(run, home, out) == {"outcome": "source exhausted"}
    rows = sum(shard["rows"] for shard in orjson.loads((hubsim_root / MANIFEST).read_bytes())["shards"])
    assert [orjson.loads(line)["id"] for line in lines_of(out)] == [synthetic_record(0, i)["id"] for i in range(rows)]
    assert run.violations() == []
