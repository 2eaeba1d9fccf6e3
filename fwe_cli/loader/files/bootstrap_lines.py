"""The JSONL line a bootstrap writes for each source record (--fields text | all): `fwe bootstrap`'s, and the
loader's when it grows a bootstrap with its Hub tail."""

from __future__ import annotations

from typing import Callable

import orjson


def encoder(fields: str) -> Callable[[dict, bytes | None], bytes]:
    """record (+ its source JSONL line, if any) -> the output line."""
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    if fields == "all":
        option = newline | orjson.OPT_SERIALIZE_NUMPY

        def encode_all(record: dict, raw: bytes | None) -> bytes:
            if raw is not None:
                return raw if raw[:1] == b"{" and raw[-2:] == b"}\n" else raw.strip() + b"\n"
            return dumps(record, option=option, default=str)

        return encode_all

    def encode_text(record: dict, raw: bytes | None) -> bytes:
        rid = record.get("id")
        return dumps({"text": record["text"]} if rid is None else {"text": record["text"], "id": rid},
                     option=newline, default=str)

    return encode_text
