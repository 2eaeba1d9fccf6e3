"""Storage options as users give them, `KEY=VALUE` (`--storage-option`, NSA_FWE_STORAGE_OPTIONS): read into the dict
an fsspec filesystem takes (a dotted KEY nests, values as JSON reads them), and redacted wherever they are recorded
(artifacts, a config's JSON, a manifest): a value whose key names a secret (key, secret, token, password,
credential, sas, ...) is written as REDACTED, so a shared artifact never carries a credential.
"""

from __future__ import annotations

import re

from fwe_cli.errors import ConfigError

REDACTED = "<redacted>"
SECRET = re.compile(r"key|secret|token|password|passwd|credential|sas|signature|auth|connection_string", re.I)
"""A key (or any dotted part of it) that holds a secret: s3fs's key/secret/token, adlfs's account_key, sas_token,
connection_string and credential, gcsfs's token, client_kwargs.aws_secret_access_key, ..."""


def parse_storage_options(pairs) -> dict:
    """`KEY=VALUE` strings (a dotted KEY nests: client_kwargs.region_name=eu-west-1) as a storage_options dict; values
    true/false/null and numbers as JSON reads them, anything else as text. ConfigError naming a pair without '='."""
    import orjson

    out: dict = {}
    for pair in pairs or ():
        key, sep, raw = str(pair).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--storage-option {redact_pair(str(pair))!r} must be KEY=VALUE (e.g. anon=true, "
                              "client_kwargs.region_name=eu-west-1)")
        try:
            value = orjson.loads(raw) if raw.strip() and raw.strip()[0] in "-0123456789tfn[{\"" else raw
        except orjson.JSONDecodeError:
            value = raw
        *parents, last = key.strip().split(".")
        node = out
        for name in parents:
            node = node.setdefault(name, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--storage-option {key.strip()}: {name} is set to a value and used as a group")
        node[last] = value
    return out


def is_secret(key: str) -> bool:
    """Whether an option's (dotted) key names a secret."""
    return SECRET.search(key) is not None


def redact_pair(pair: str) -> str:
    """`KEY=VALUE` as it may be recorded: `KEY=<redacted>` when KEY names a secret (a pair without '=' is all key)."""
    key, sep, _ = pair.partition("=")
    return f"{key}={REDACTED}" if sep and is_secret(key) else pair


def redact_pairs(pairs) -> list[str]:
    """Each pair as it may be recorded (redact_pair)."""
    return [redact_pair(str(pair)) for pair in pairs or ()]


def redact_words(text: str) -> str:
    """NSA_FWE_STORAGE_OPTIONS's value (pairs apart by spaces) as it may be recorded."""
    return " ".join(redact_pairs(text.split()))


def redact_argv(argv) -> list[str]:
    """A command line as it may be recorded: each --storage-option's pair redacted (redact_pair)."""
    out, value_next = [], False
    for arg in argv:
        if value_next:
            out.append(redact_pair(arg))
        elif arg.startswith("--storage-option="):
            out.append("--storage-option=" + redact_pair(arg.split("=", 1)[1]))
        else:
            out.append(arg)
        value_next = not value_next and arg == "--storage-option"
    return out
