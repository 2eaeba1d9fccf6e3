"""Facts about the node and the installed packages, recorded in every artifact so runs compare."""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata

import psutil

PACKAGES = ("fwe", "datasets", "huggingface_hub", "tokenizers", "tiktoken", "numpy", "pyarrow", "orjson",
            "psutil", "typer", "rich", "torch")


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask, which containers and launchers narrow), not the host's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def node_share(env=None) -> int:
    """This process's share of the usable cores where a launcher started it beside others on its node (torchrun's
    LOCAL_WORLD_SIZE of them, when they share one affinity mask), at least one."""
    env = os.environ if env is None else env
    raw = env.get("LOCAL_WORLD_SIZE", "").strip()
    local = int(raw) if raw.isdigit() and int(raw) > 0 else 1
    return max(1, usable_cores() // local)


def host_facts(disk_path: str = ".") -> dict:
    vm = psutil.virtual_memory()
    try:
        free_disk = psutil.disk_usage(disk_path).free
    except OSError:
        free_disk = None
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus_logical": psutil.cpu_count(logical=True),
        "cpus_physical": psutil.cpu_count(logical=False),
        "cpus_usable": usable_cores(),
        "ram_total_gb": round(vm.total / 2**30, 2),
        "ram_available_gb": round(vm.available / 2**30, 2),
        "free_disk_gb": None if free_disk is None else round(free_disk / 2**30, 2),
        "disk_path": os.path.abspath(disk_path),
    }


def package_versions() -> dict:
    """Installed versions, read from metadata (nothing is imported); None when not installed."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
