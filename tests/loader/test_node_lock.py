"""The lock ranks sharing an HF_HOME take turns under (fwe_cli.loader.remote.node_lock) never hangs a run: a held lock is
waited for at most the loader's timeout, with the stage naming it; a holder that died has released it; a cache where
no lock can be made runs without one."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import orjson
import pytest

from fwe_cli.errors import LoaderTimeout
from fwe_cli.loader.hub.listing import resolve_listing
from fwe_cli.loader.remote.node_lock import node_lock, process_started_at
from tests.helpers import invoke
from tests.hubsim.repos import CONFIG_NAME, DATASET_REPO

HOLD = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX)" \
       "; print('locked', flush=True); time.sleep(600)"


@pytest.fixture
def held(tmp_path):
    """A lock file this process holds through a descriptor of its own (another open file: flock excludes it too)."""
    path = tmp_path / "locks" / "x.lock"
    path.parent.mkdir()
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, b"4242\n", 0)
    yield path
    os.close(fd)


def test_a_held_lock_is_waited_for_with_the_stage_named_then_a_timeout_naming_the_holder(held):
    """While it waits, the stage says for what and which lock; after timeout_s, LoaderTimeout names them and the
    holder's pid, with that stage."""
    stages: list[str] = []
    with pytest.raises(LoaderTimeout) as raised:
        with node_lock(str(held), 0.2, "another rank's Hub listing", stages.append):
            pytest.fail("the lock was held")
    stage = f"waiting for another rank's Hub listing (lock {held})"
    assert stages == [stage] and raised.value.stage == stage
    assert str(raised.value) == f"waited 0.2 s for another rank's Hub listing (lock {held}, held by pid 4242)"


def test_a_holder_that_was_killed_has_released_the_lock(tmp_path):
    """A process holding the lock is killed (-9): the kernel released its flock, so the next one locks at once."""
    path = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        holder.kill()
        holder.wait()
    finally:
        holder.stdout.close()
    with node_lock(str(path), 5.0, "x") as locked:
        assert locked is True


def test_a_cache_where_no_lock_file_can_be_made_runs_without_a_lock(tmp_path):
    """The lock's folder cannot be made (a file is in the way): the block runs, told it holds no lock."""
    (tmp_path / "locks").write_text("a file, not a folder")
    with node_lock(str(tmp_path / "locks" / "x.lock"), 1.0, "x") as locked:
        assert locked is False


def test_process_start_is_before_now_and_after_boot():
    """process_started_at is a wall-clock time this process already had (a rank reuses only answers after it)."""
    import time

    assert 0 < process_started_at() <= time.time()


def test_smoke_waiting_on_another_ranks_listing_times_out_naming_the_lock(hub_env, tmp_path):
    """Another process holds the listing's lock and never lets go: `fwe smoke --timeout 3` ends with exit 3 (a
    timeout, not a hang) whose stage names the lock; once the lock is free, the same cache resolves normally."""
    lock = tmp_path / "hf_home" / "hub" / "fwe" / "locks" / DATASET_REPO.replace("/", "--") / "main.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = invoke("smoke", "--source", "hub", "--tokenizer", "byte", "--timeout", "3", "--json",
                        "--artifacts-dir", str(tmp_path / "artifacts"))
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert result.exit_code == 3, result.stderr
    error = orjson.loads(result.stdout)["error"]
    # the loader's deadline and the lock's own wait have the same budget: either may say it first, both name the lock
    assert f"for another rank's Hub listing (lock {lock}" in error["message"]
    assert hub_env.requests() == []
    assert len(resolve_listing(DATASET_REPO, CONFIG_NAME, "train").files) == 2
