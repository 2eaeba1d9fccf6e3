"""`fwe doctor`'s facts: what a bug report needs about this node, its caches, the Hub and torch, in one dict.

Nothing here fails on what it finds: each section records what it saw (and `problems` lists what will get in a
run's way). It writes nothing, downloads nothing, and contacts the Hub at most once (one HEAD of the dataset's card,
none with HF_HUB_OFFLINE=1); given a job's shape, it says how many requests the job would send the Hub's resolver
(measure.resolve_plan). It lives with the measurements because it reads the loader's cache layout (a layer below)
the way the loader does.
"""

from __future__ import annotations

import os
import time

from fwe_cli import __version__
from fwe_cli.hostinfo import host_facts, package_versions
from fwe_cli.output.nearest_existing import nearest_existing

HEAD_TIMEOUT_S = 3.0  # connect and read: a working Hub answers a HEAD well within it
LOW_DISK_GB = 1.0
HF_VARS = ("HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_ETAG_TIMEOUT")


def disk(paths: dict[str, str]) -> list[dict]:
    """Free space where each of `paths` (role -> path) would put its data."""
    found = []
    for role, path in paths.items():
        at, _ = nearest_existing(path)  # where a directory not made yet would go
        found.append({"role": role, "path": os.path.abspath(path), "exists": os.path.exists(path), "checked_at": at,
                      "free_gb": host_facts(at)["free_disk_gb"]})
    return found


def hf_cache(dataset: str, name: str | None, split: str, revision: str | None, tokenizer: str) -> dict:
    """What the Hugging Face cache holds for this dataset config and tokenizer (read from disk only)."""
    from fwe_cli.loader.hub.listing import cached_listing
    from fwe_cli.loader.remote.hub_env import cached_file, fwe_cache_dir, hub_cache_dir
    from fwe_cli.loader.tokenization.doc_tokenizer import PACKAGED_REPOS
    from fwe_cli.loader.tokenization.names import HUB_ALIASES

    listing = cached_listing(dataset, name, split, revision)
    sha = listing.revision if listing is not None else None
    heads = {"entries": 0, "directory": None}
    if listing is not None:
        from fwe_cli.loader.hub.head_cache import HeadCache

        directory = HeadCache(listing).directory
        entries = os.listdir(directory) if os.path.isdir(directory) else []
        heads = {"entries": len(entries), "directory": directory}
    if tokenizer == "byte":
        tok = {"spec": tokenizer, "detail": "byte needs no files"}
    elif os.path.exists(tokenizer):
        tok = {"spec": tokenizer, "file": os.path.abspath(tokenizer)}
    else:
        repo = HUB_ALIASES.get(tokenizer, tokenizer)
        tok = {"spec": tokenizer, "hub_repo": repo, "cached_file": cached_file(repo, "tokenizer.json"),
               "packaged_offline": repo in PACKAGED_REPOS}
    return {
        "hub_cache": hub_cache_dir(), "hub_cache_exists": os.path.isdir(hub_cache_dir()), "fwe_cache": fwe_cache_dir(),
        "dataset": dataset, "name": name, "split": split, "revision": revision or "main",
        "listing": None if listing is None else {"commit": listing.revision, "files": len(listing.files),
                                                 "bytes": sum(f.size for f in listing.files)},
        "listed_commit": sha, "head_cache": heads,
        "tokenizer": tok,
    }


def hub(dataset: str, revision: str | None, timeout: float = HEAD_TIMEOUT_S) -> dict:
    """One HEAD of the dataset card's resolve URL: reachable (any HTTP answer) with its round trip, or why not.
    HF_HUB_OFFLINE=1: no request at all."""
    from fwe_cli.loader.remote.http import HttpStatusError, head
    from fwe_cli.loader.remote.hub_env import endpoint, offline, resolve_url, token

    where = endpoint()
    found = {"endpoint": where, "offline": offline(), "token": token() is not None, "reachable": None,
             "rtt_ms": None, "status": None, "commit": None, "detail": None}
    if found["offline"]:
        return dict(found, detail="HF_HUB_OFFLINE=1: not contacted (runs read the cache only)")
    url = resolve_url(dataset, revision or "main", "README.md")
    started = time.perf_counter()
    try:
        headers = head(url, timeout)
        found.update(reachable=True, status=200, commit=headers.get("x-repo-commit"), detail=f"HEAD {url}")
    except HttpStatusError as exc:  # an answer: the Hub is there (the status says what it thinks of the request)
        found.update(reachable=True, status=exc.response.status_code, detail=f"HEAD {url}: {exc}")
    except Exception as exc:  # refused, no answer, DNS: the socket's error ends the chain
        reason = exc
        while reason.__cause__ is not None:
            reason = reason.__cause__
        return dict(found, reachable=False, detail=f"HEAD {url}: {type(reason).__name__}: {reason}")
    found["rtt_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return found


def tokenizer_offline() -> dict:
    """Whether GPT-2's tokenizer is available without the Hub: the packaged vocabulary, checked by its sha256."""
    from fwe_cli.errors import TokenizerError
    from fwe_cli.loader.tokenization.gpt2_vocab import PACKAGE, verified_vocab_files

    try:
        files = verified_vocab_files()
    except TokenizerError as exc:
        return {"gpt2_packaged": False, "package": PACKAGE, "detail": str(exc)}
    return {"gpt2_packaged": True, "package": PACKAGE, "detail": f"verified {', '.join(files)}"}


def torch_facts() -> dict:
    """torch, CUDA and pinned memory, importing torch only when it is installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return {"installed": False, "detail": "not installed (--torch needs it)"}
    try:
        import torch
    except Exception as exc:  # a broken install is a finding, not a crash
        return {"installed": True, "version": None, "detail": f"import failed: {type(exc).__name__}: {exc}"}
    found = {"installed": True, "version": torch.__version__, "cuda_build": torch.version.cuda,
             "cuda_available": False, "devices": [], "pinned_memory": False, "detail": None}
    try:
        found["cuda_available"] = bool(torch.cuda.is_available())
        if found["cuda_available"]:
            found["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            found["pinned_memory"] = bool(torch.empty(1).pin_memory().is_pinned())
        else:
            found["detail"] = "no CUDA device: --torch yields CPU tensors without pinned memory"
    except Exception as exc:
        found["detail"] = f"{type(exc).__name__}: {exc}"
    return found


def problems(report: dict) -> list[str]:
    """What will get in a run's way, one line each."""
    found = []
    hub_state = report["hub"]
    if hub_state["reachable"] is False:
        found.append(f"the Hub at {hub_state['endpoint']} cannot be reached ({hub_state['detail']})")
    if hub_state["offline"] and report["hf_cache"]["listing"] is None:
        found.append("HF_HUB_OFFLINE=1 and no cached listing of the dataset: a Hub run will fail")
    for place in report["disk"]:
        if place["free_gb"] is not None and place["free_gb"] < LOW_DISK_GB:
            found.append(f"{place['role']} {place['path']}: only {place['free_gb']} GB free")
    quota = report.get("hub_quota") or {}
    if quota.get("fits") and not quota["fits"]["free"]:
        found.append(f"the job would send the Hub's resolver {quota['after']['per_5_min_warm']} requests in 5 minutes, "
                     f"over a free account's {quota['quota_5_min']['free']}")
    if not report["tokenizer"]["gpt2_packaged"]:
        found.append(f"GPT-2 is not available offline: {report['tokenizer']['detail']}")
    return found


def hub_quota(dataset: str, name: str | None, split: str, revision: str | None, job: dict) -> dict:
    """The resolver requests a job of shape `job` (resolve_plan's ranks, workers, tokens_per_s, ranks_per_node,
    shuffle) sends, reading the cached listing's files, or sample-10BT as modelled when that is the stream and no
    listing is cached; `shape` says which."""
    from fwe_cli.loader.hub.listing import cached_listing
    from fwe_cli.measure.resolve_plan import listing_shape, resolve_plan, sample_10bt

    listing = cached_listing(dataset, name, split, revision)
    if listing is not None:
        shape = listing_shape([f.size for f in listing.files])
        source = "the cached listing (row groups and tokens estimated from its sizes)"
    elif (dataset, name) == ("HuggingFaceFW/fineweb-edu", "sample-10BT"):
        shape, source = sample_10bt(), "sample-10BT as modelled (no cached listing)"
    else:
        return {"shape": None, "detail": "no cached listing of the dataset: run once to list it, then ask again"}
    sizes, row_groups, tokens = shape
    return dict(resolve_plan(sizes, row_groups, tokens, **job), source=source)


def bucket_access(url: str, write: bool = False, options: dict | None = None) -> list[dict]:
    """{check, ok, detail} for listing `url` (an object store's prefix), reading its first object's first KiB, and
    with `write` putting and removing a small probe object beside them; each failure is its one-line error."""
    from fwe_cli.errors import FweError
    from fwe_cli.loader.remote.object_store import store_for

    store, checks = store_for(url, options), []

    def check(name: str, do) -> bool:
        try:
            checks.append({"check": name, "ok": True, "detail": do()})
        except FweError as exc:
            checks.append({"check": name, "ok": False, "detail": str(exc)})
        return checks[-1]["ok"]

    listed: list = []
    if check("list", lambda: f"{len(listed.extend(store.find(url)) or listed)} objects under {url}") and listed:
        check("read", lambda: f"{len(store.read(listed[0], 0, min(1024, listed[0].size)))} bytes of {listed[0].url}")
    if write:
        probe = f"{url.rstrip('/')}/.fwe-doctor-probe-{os.getpid()}"
        check("write", lambda: store.write(probe, b"fwe doctor\n") or store.remove(probe) or f"put and removed {probe}")
    return checks


def run_doctor(dataset: str = "HuggingFaceFW/fineweb-edu", name: str | None = "sample-10BT", split: str = "train",
               revision: str | None = None, tokenizer: str = "gpt2", paths: dict[str, str] | None = None,
               timeout: float = HEAD_TIMEOUT_S, job: dict | None = None, bucket: str | None = None,
               bucket_write: bool = False) -> dict:
    """Every section of the report; `paths` (role -> path) are where data would go (free disk); `job` (a job's shape,
    hub_quota) adds the resolver requests it would send (`hub_quota`); `bucket`: an object store's URL whose access is
    checked (bucket_access)."""
    from fwe_cli.loader.variables import env_snapshot

    versions = package_versions()
    report = {
        "command": "doctor",
        "fwe": __version__,
        "versions": versions,
        "host": host_facts("."),
        "disk": disk(paths or {"artifacts": "artifacts"}),
        "env": dict(env_snapshot(), **{var: os.environ[var] for var in HF_VARS if var in os.environ}),
        "hf_cache": hf_cache(dataset, name, split, revision, tokenizer),
        "hub": hub(dataset, revision, timeout),
        "tokenizer": tokenizer_offline(),
        "torch": torch_facts(),
    }
    if job is not None:
        report["hub_quota"] = hub_quota(dataset, name, split, revision, job)
    if bucket is not None:
        report["bucket"] = {"url": bucket, "checks": bucket_access(bucket, bucket_write)}
    report["problems"] = problems(report) + [f"bucket {c['check']}: {c['detail']}"
                                             for c in report.get("bucket", {}).get("checks", []) if not c["ok"]]
    report["ok"] = not report["problems"]
    report["error"] = None
    return report
