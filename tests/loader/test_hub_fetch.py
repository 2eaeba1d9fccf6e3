"""The tokenizer fetch (fwe_cli.loader.tokenization.hub_fetch) against the test Hub, in this process: one GET of fwe's
own, retried under the Hub retry policy, written into the Hugging Face cache the way huggingface_hub writes it, so
huggingface_hub's own tools find the file; no private attribute of huggingface_hub is touched."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from fwe_cli.loader.remote.transient import RetryScope, scoped
from fwe_cli.loader.tokenization.hub_fetch import HubUnreachable, fetch_hub_file, start_fetch
from tests.helpers import REPO_ROOT
from tests.hubsim.repos import MODEL_REPO

FILE = "tokenizer.json"


def _requests(hub) -> list[tuple[str, str]]:
    return [(r["method"], r["endpoint"]) for r in hub.requests() if r["endpoint"] != "GET /api/agent-harnesses"]


def test_a_cold_fetch_is_one_get_laid_out_as_huggingface_hub_lays_it_out(hub_env, hubsim_root, tmp_path):
    """Cold: one GET; the file is blobs/<etag> with snapshots/<commit>/tokenizer.json a relative link to it and
    refs/main naming the commit, so huggingface_hub's try_to_load_from_cache, hf_hub_download(local_files_only) and
    scan_cache_dir all find it; its bytes are the server's."""
    from huggingface_hub import hf_hub_download, scan_cache_dir, try_to_load_from_cache

    path = fetch_hub_file(MODEL_REPO, FILE)
    assert _requests(hub_env) == [("GET", "GET /{repo}/resolve/main/tokenizer.json")]
    cache = tmp_path / "hf_home" / "hub"
    served = (hubsim_root / "models" / MODEL_REPO / FILE).read_bytes()
    folder = cache / ("models--" + MODEL_REPO.replace("/", "--"))
    commit = (folder / "refs" / "main").read_text()
    assert path == str(folder / "snapshots" / commit / FILE) and os.path.islink(path)
    assert os.readlink(path) == os.path.join("..", "..", "blobs", os.path.basename(os.path.realpath(path)))
    assert open(path, "rb").read() == served
    assert try_to_load_from_cache(MODEL_REPO, FILE, cache_dir=str(cache)) == path
    assert hf_hub_download(MODEL_REPO, FILE, cache_dir=str(cache), local_files_only=True) == path
    [revision] = {r.repo_id: r for r in scan_cache_dir(str(cache)).repos}[MODEL_REPO].revisions
    assert (revision.commit_hash, revision.refs, {f.file_name for f in revision.files}) == (commit, {"main"}, {FILE})
    # not in LFS: the blob is named by the ETag, the file's git blob sha1, as huggingface_hub names it
    git_sha1 = hashlib.sha1(b"blob %d\x00" % len(served) + served).hexdigest()
    assert os.path.basename(os.path.realpath(path)) == git_sha1


def test_a_cached_file_costs_nothing_and_revalidating_it_one_head(hub_env):
    """Warm: no request; with revalidate (main unchanged, blob present): one HEAD, no GET, the same path."""
    path = fetch_hub_file(MODEL_REPO, FILE)
    hub_env.new_log("warm")
    assert fetch_hub_file(MODEL_REPO, FILE) == path and _requests(hub_env) == []
    assert fetch_hub_file(MODEL_REPO, FILE, revalidate=True) == path
    assert _requests(hub_env) == [("HEAD", "HEAD /{repo}/resolve/main/tokenizer.json")]


def test_a_download_started_early_is_the_one_the_fetch_waits_for(hub_env):
    """start_fetch (the `fwe` process, before its loader exists) begins the one GET; the fetch_hub_file that follows
    waits for it and makes no request of its own; once the file is cached, start_fetch begins nothing."""
    assert start_fetch(MODEL_REPO, FILE) is True
    path = fetch_hub_file(MODEL_REPO, FILE)
    assert os.path.isfile(path)
    assert _requests(hub_env) == [("GET", "GET /{repo}/resolve/main/tokenizer.json")]
    assert start_fetch(MODEL_REPO, FILE) is False and fetch_hub_file(MODEL_REPO, FILE) == path
    assert _requests(hub_env) == [("GET", "GET /{repo}/resolve/main/tokenizer.json")]


def test_a_download_started_under_another_hub_or_cache_is_not_the_one_a_fetch_waits_for(hub_env, monkeypatch,
                                                                                         tmp_path):
    """A download an earlier run of this process started and never took (another endpoint, another HF_HOME) neither
    stops this environment's start_fetch nor is what its fetch waits for: the fetch gets the file from its own Hub."""
    real = dict(os.environ)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere" / "hub"))
    assert start_fetch(MODEL_REPO, FILE) is True  # never taken; it fails (nothing listens) before the run ends
    for thread in [t for t in threading.enumerate() if t.name.startswith("fwe-hub-file")]:
        thread.join()
    for name in ("HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE"):
        monkeypatch.setenv(name, real[name])
    assert start_fetch(MODEL_REPO, FILE) is True
    assert os.path.isfile(fetch_hub_file(MODEL_REPO, FILE))
    assert _requests(hub_env) == [("GET", "GET /{repo}/resolve/main/tokenizer.json")]


def test_an_early_download_that_fails_is_met_by_the_fetch_as_its_own(hub_env, monkeypatch):
    """A Hub that refuses connections: the early download's failure is what fetch_hub_file raises (HubUnreachable,
    naming the endpoint), as the run would have reported it without the early start; the test Hub saw nothing."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    assert start_fetch(MODEL_REPO, FILE) is True
    with pytest.raises(HubUnreachable, match="127.0.0.1:9"):
        fetch_hub_file(MODEL_REPO, FILE)
    assert _requests(hub_env) == []


def test_a_503_on_the_fetch_is_retried_and_reported(hub_env):
    """The first GET answered 503: retried under the Hub retry policy (one retry reported to the caller's scope, one
    summary warning), and the file arrives."""
    events: list[dict] = []
    hub_env.set_faults(fail_count=1, fail_status=503, fail_match="tokenizer.json")
    with scoped(RetryScope(events.append)), pytest.warns(RuntimeWarning, match="succeeded after 2 attempts"):
        path = fetch_hub_file(MODEL_REPO, FILE)
    assert os.path.isfile(path)
    assert [(e["attempt"], e["reason"]) for e in events] == [(1, "HTTP 503")]
    assert [method for method, _ in _requests(hub_env)] == ["GET", "GET"]


def test_no_private_attribute_of_huggingface_hub_is_used():
    """fwe touches no private name of huggingface_hub's download module (a release that renames one would break
    offline exits silently): grep finds neither _DEFAULT_RETRY_ON_EXCEPTIONS nor file_download._anything."""
    found = []
    for folder, _, names in os.walk(REPO_ROOT / "fwe_cli"):
        for name in names:
            if name.endswith(".py"):
                text = open(os.path.join(folder, name), encoding="utf-8").read()
                if "_DEFAULT_RETRY_ON_EXCEPTIONS" in text or "file_download._" in text:
                    found.append(name)
    assert found == []
