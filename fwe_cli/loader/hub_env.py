"""Where the Hugging Face Hub is and how this process may use it, as the environment says when asked.

huggingface_hub reads HF_ENDPOINT, HF_HOME, HF_HUB_CACHE and HF_HUB_OFFLINE once, at import; these functions read
them when called, so one process can be pointed at another server or cache (tests do, in-process). The native Hub
reader and the tokenizer fetch both use them.
"""

from __future__ import annotations

import os


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def endpoint() -> str:
    """The Hub's base URL, without a trailing slash."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as the environment says now, or as huggingface_hub read it."""
    from huggingface_hub import constants

    if "HF_HUB_OFFLINE" in os.environ:
        return _truthy(os.environ["HF_HUB_OFFLINE"]) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE"))
    return _truthy(os.environ.get("TRANSFORMERS_OFFLINE")) or constants.HF_HUB_OFFLINE


def hub_cache_dir() -> str:
    """The hub cache huggingface_hub would use if it read HF_HUB_CACHE / HF_HOME now."""
    from huggingface_hub import constants

    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return constants.HF_HUB_CACHE


def fwe_cache_dir() -> str:
    """fwe's own Hub caches (listings, head cache): inside the hub cache, so clearing that cache clears them."""
    return os.path.join(hub_cache_dir(), "fwe")
