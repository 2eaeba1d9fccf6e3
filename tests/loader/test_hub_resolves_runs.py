"""The Hub's resolver quota over whole runs, against the test Hub redirecting parquet resolves to signed CDN URLs
(tests/hubsim/cdn.py), resolver requests counted from its request log: one rank reading an epoch of an 8-file repo
resolves each file once; URLs that expire every 2 s deliver the same tokens; 32 ranks on 4 nodes resolve each file
at most once per node; a 429 with Retry-After pauses the node's resolves once. The reference is the same run
against the Hub serving its files itself (each read a resolve: how fwe read before)."""

from __future__ import annotations

import glob
import os
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest

from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.fineweb_loader import FineWebLoader
from fwe_cli.loader.hub.listing import resolve_listing
from fwe_cli.loader.hub.ranges import fetch_range
from fwe_cli.loader.remote.hub_env import hub_requests, requests_sent, resolve_url
from fwe_cli.measure.resolve_plan import files_per_node
from tests.hubsim.faults import Faults
from tests.hubsim.bench import PARQUET_RESOLVES
from tests.hubsim.ranks import Job, resolves
from tests.hubsim.repos import CONFIG_NAME, DATASET_REPO, BuildSpec, build_repos
from tests.hubsim.server import HubServer

LAB = BuildSpec(mb=0.9, shards=8, row_group_rows=8)  # 8 files of 4-8 row groups (~1 MB)
FILES = LAB.shards
EXPIRY_PAUSES = 2  # times a run waits for every URL it resolved to expire, between its batches


class Lab:
    """The 8-file repo, its Hub and a CDN server, and the batches of an epoch as the Hub serving itself gives them."""

    def __init__(self, root: Path):
        build_repos(root, LAB)
        self.root = root
        self.hub, self.cdn = HubServer(root).start(), HubServer(root).start()
        self.reference: np.ndarray | None = None

    def signed(self, ttl_s: float, **faults) -> None:
        self.hub.set_faults(Faults(redirect_match=PARQUET_RESOLVES, redirect_to=self.cdn.url, sign_ttl_s=ttl_s,
                                   **faults))

    def close(self) -> None:
        self.hub.stop()
        self.cdn.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("lab"))
    yield lab
    lab.close()


@pytest.fixture
def lab_env(lab, monkeypatch, tmp_path):
    """This process pointed at the lab's Hub with a cold cache; the Hub serving its files itself, fresh logs."""
    home = tmp_path / "hf_home"
    for name, value in {"HF_ENDPOINT": lab.hub.url, "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
                        "HF_HUB_OFFLINE": "0"}.items():
        monkeypatch.setenv(name, value)
    lab.hub.set_faults(Faults())
    lab.cdn.set_faults(Faults())
    lab.hub.new_log(tmp_path / "hub.jsonl")
    lab.cdn.new_log(tmp_path / "cdn.jsonl")
    return lab


def _epoch(pause_until_expired: int = 0) -> np.ndarray:
    """Every batch of one epoch of the lab repo (byte tokens), in this process; `pause_until_expired` times, evenly
    spread, the reading stops until every URL the node resolved so far has expired."""
    config = resolve_config(env={}, source="hub", hub_reader="native", tokenizer="byte", seq_len=1024, batch_size=8,
                            epochs=1)
    batches = []
    with FineWebLoader(config) as loader:
        for batch in loader:
            batches.append(np.array(batch))
            if pause_until_expired and len(batches) % 40 == 0:
                pause_until_expired -= 1
                _wait_until_expired()
    assert pause_until_expired == 0, "the epoch ended before every pause: the repo is smaller than the test needs"
    return np.stack(batches)


def _wait_until_expired() -> None:
    """Until the wall clock has passed the expiry of every download URL in this node's cache (a condition on the
    clock the CDN checks the URLs against, not a guess of how long that takes)."""
    folder = os.path.join(os.environ["HF_HUB_CACHE"], "fwe", "resolved")
    expires = [orjson.loads(open(path, "rb").read())["expires"] for path in glob.glob(os.path.join(folder, "*.json"))]
    assert expires, "no download URL was resolved yet"
    while time.time() <= max(expires):
        time.sleep(0.05)


def _reference(lab) -> np.ndarray:
    """The epoch read from the Hub serving its files itself (computed once)."""
    if lab.reference is None:
        lab.reference = _epoch()
    return lab.reference


def test_one_rank_reading_an_epoch_resolves_each_file_once(lab_env, monkeypatch):
    """One rank reads an epoch of the 8-file repo through the redirecting Hub: at most files + 1 requests to the
    resolver (before: one per footer and row group), every byte from the CDN, the token sent to the Hub only, and
    the same batches as the Hub serving its files itself."""
    reference = _reference(lab_env)
    lab_env.hub.new_log()
    monkeypatch.setenv("HF_TOKEN", "hf_test_secret")
    lab_env.signed(3600)
    mark = requests_sent()
    got = _epoch()
    hub, cdn = lab_env.hub.flush(), lab_env.cdn.flush()
    assert np.array_equal(got, reference)
    assert resolves(hub) <= FILES + 1, resolves(hub)
    assert all(r["status"] == 206 and not r["auth"] for r in cdn) and all(r["auth"] for r in hub)
    counted = hub_requests(since=mark)
    assert (counted["resolver"], counted["cdn"]) == (resolves(hub), len(cdn))


def test_urls_expiring_every_2_s_deliver_the_same_tokens(lab_env):
    """Signed URLs valid 2 s, and the reading stopped until they have all expired, twice: the files are resolved
    again (more resolves than files, counted as re-resolves) and the batches are the same, none refused."""
    reference = _reference(lab_env)
    lab_env.hub.new_log()
    lab_env.signed(2)
    mark = requests_sent()
    got = _epoch(pause_until_expired=EXPIRY_PAUSES)
    hub, cdn = lab_env.hub.flush(), lab_env.cdn.flush()
    assert np.array_equal(got, reference)
    assert resolves(hub) > FILES and hub_requests(since=mark)["re_resolves"] >= 1
    assert all(r["status"] == 206 for r in cdn)


def test_a_429_with_retry_after_pauses_the_nodes_resolves_once(lab_env):
    """The Hub answers a resolve 429 with Retry-After: 1: the node's resolves pause once. Three more threads that
    start reading other files once the pause is set (its file beside the entries) send no resolve before it is over,
    nor does the refused reader's retry; one 429 in all, and every read succeeds."""
    lab_env.signed(3600, fail_count=1, fail_status=429, retry_after=1, fail_match="resolve")
    listing = resolve_listing(DATASET_REPO, CONFIG_NAME, "train")
    lab_env.hub.new_log()
    errors: list[BaseException] = []

    def read(number: int) -> None:
        try:
            fetch_range(resolve_url(DATASET_REPO, listing.revision, listing.files[number].path), 0, 64)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(n,)) for n in range(4)]
    threads[0].start()
    pause = os.path.join(os.environ["HF_HUB_CACHE"], "fwe", "locks", "resolved", "*.pause")
    while not glob.glob(pause) and threads[0].is_alive():
        time.sleep(0.01)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    records = [r for r in lab_env.hub.flush() if r["kind"] == "resolve"]
    refused = [r for r in records if r["status"] == 429]
    assert len(refused) == 1 and len(records) == 5 and records[0] is refused[0]
    assert all(r["t"] - refused[0]["t"] >= 0.9 for r in records[1:]), [r["t"] for r in records]


def test_32_ranks_on_4_nodes_cold_resolve_each_file_at_most_once_per_node(lab, tmp_path):
    """4 nodes x 8 ranks of `fwe smoke` started at once, cold, each node with its own HF_HOME and Hub server, all
    redirected to one CDN: every rank starts, and each node sends the resolver at most one request per file (in all
    at most files x nodes; before: one per footer and row group read, ~80), at most as many as the model `fwe
    doctor --ranks` uses counts (the files its stretch touches, and the first file, whose footer each node's cold
    listing reads ahead), and no branch check (all ranks started before their node's listing was checked); a resolve
    whose answer a rank did not get (a loaded machine's timeout: its `failed_resolves`) is asked again. The ranks'
    artifacts count them as the Hub did."""
    with Job(lab.root, tmp_path, nodes=4, ranks_per_node=8, cdn_ttl_s=3600) as job:
        cold = job.run("cold")
    for rank in cold.ranks:
        assert rank.returncode == 0 and rank.result["ok"], (rank.rank, rank.stderr[-3000:])
    files = cold.file_resolves_per_node()
    retried = [sum(rank.result["hub_requests"]["failed_resolves"] for rank in cold.ranks if rank.node == node)
               for node in range(4)]
    seen = [sorted(Counter(r["path"].rpartition("/")[2] for r in records if r["kind"] == "resolve").items())
            for records in cold.requests]
    assert all(count <= FILES + extra for count, extra in zip(files, retried)), (files, retried, seen)
    sizes = [path.stat().st_size for path in sorted(lab.root.glob(f"datasets/{DATASET_REPO}/sample/10BT/*.parquet"))]
    model = [n + (node > 0) for node, n in enumerate(files_per_node(sizes, 4))]  # (+ file 0's footer, read ahead)
    assert all(got <= most + extra for got, most, extra in zip(files, model, retried, strict=True)), (
        files, model, retried, seen)
    checks = cold.branch_checks_per_node()
    assert checks == [0] * 4, checks
    assert [f + c for f, c in zip(files, checks)] == cold.resolves_per_node()
    assert sum(rank.result["hub_requests"]["resolver"] for rank in cold.ranks) == sum(cold.resolves_per_node())
    assert cold.cdn and all(r["status"] == 206 for r in cold.cdn)
