"""The users' environment variables (NSA_FWE_*): which setting each one gives, how its text is read into that
setting's type, and how the ones that are set are recorded in artifacts (a storage option's secret redacted).
Only loader.config's `resolve_config` reads them, after the flags and before the defaults."""

from __future__ import annotations

import os
from typing import Any, Mapping

from fwe_cli.errors import ConfigError
from fwe_cli.loader.limits import check_limit
from fwe_cli.loader.remote.storage_options import redact_words

# The users' environment variables -> the config field each sets. Read nowhere else.
ENV_VARS: dict[str, str] = {
    "NSA_FWE_DOC_BATCH": "doc_batch",
    "NSA_FWE_PREFETCH": "prefetch",
    "NSA_FWE_Q": "queue_depth",
    "NSA_FWE_REPORT_DOCS": "report_docs",
    "NSA_FWE_WARMUP_BATCHES": "warmup_batches",
    "NSA_FWE_WARMUP_TIMEOUT": "warmup_timeout",
    "NSA_FWE_TOKENIZER_THREADS": "tokenizer_threads",
    "NSA_FWE_TAIL": "tail",
    "NSA_FWE_GROW": "grow",
    "NSA_FWE_MIX": "mix",
    "NSA_FWE_HOLDOUT": "holdout",
    "NSA_FWE_PACK": "pack",
    "NSA_FWE_STORAGE_OPTIONS": "storage_options",
}
REDACTED_VARS = {"NSA_FWE_STORAGE_OPTIONS": redact_words}
"""Variables whose value may hold a secret: how each is recorded."""

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", ""}


def parse_bool(setting: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{setting}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def parse_variable(var: str, raw: str, name: str, template: Any) -> Any:
    """A variable's text as the type of its field's default (`template`), within the field's limits."""
    if isinstance(template, bool):
        return parse_bool(var, raw)
    if isinstance(template, str):  # a word the config checks (naming the variable)
        return raw.strip()
    if isinstance(template, tuple):  # words: KEY=VALUE pairs
        return tuple(raw.split())
    try:
        value = int(raw.strip()) if isinstance(template, int) else float(raw.strip())
    except ValueError:  # also an integer of more digits than Python converts (sys.get_int_max_str_digits)
        kind = "an integer" if isinstance(template, int) else "a number"
        raise ConfigError(f"{var}={raw!r} is not {kind}") from None
    check_limit(name, value, var, repr(raw))
    return value


def env_snapshot(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The users' variables that are set, for recording in artifacts (secrets redacted)."""
    env = os.environ if env is None else env
    return {var: REDACTED_VARS.get(var, str)(env[var]) for var in ENV_VARS if var in env}
