"""What a tokenizer is called and what decides its ids, without loading one: the backend names, the Hub aliases, the
byte tokenizer's constants, and the vocabulary hash a token directory records.

Nothing here imports `tokenizers`: the config validates a backend name, and a token directory is matched to a
tokenizer, before (or without) any tokenizer is parsed.
"""

from __future__ import annotations

import hashlib
import os

import orjson

TOKENIZER_BACKENDS = ("auto", "tokenizers", "tiktoken")
HUB_ALIASES = {"gpt2": "openai-community/gpt2"}
BYTE = "byte"
BYTE_EOS_ID = 256
BYTE_DESCRIPTION = b"fwe byte tokenizer: UTF-8 bytes are ids 0..255, end-of-text id 256, vocab_size 257"

# The parts of a tokenizer.json that decide the ids `encode(text, add_special_tokens=False)` gives. Left out: the
# decoder, padding and truncation (not applied), the post-processor (adds nothing without special tokens), offsets
# options, and formatting: GPT-2 built from its packaged vocabulary and the Hub's tokenizer.json differ in bytes, not
# in ids, and hash alike.
_MODEL_KEYS = ("type", "vocab", "merges", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
               "fuse_unk", "byte_fallback", "ignore_merges")
_ADDED_KEYS = ("id", "content", "special", "single_word", "lstrip", "rstrip", "normalized")
_OFFSETS_ONLY = ("trim_offsets",)


def _without_offsets(section):
    """A normalizer or pre-tokenizer section without the options that change only offsets (recursively)."""
    if isinstance(section, dict):
        return {k: _without_offsets(v) for k, v in section.items() if k not in _OFFSETS_ONLY}
    if isinstance(section, list):
        return [_without_offsets(v) for v in section]
    return section


def _merge(entry) -> str:
    """A merge as 'a b' (tokenizers writes them as strings or, since 0.20, as [a, b] pairs)."""
    return " ".join(entry) if isinstance(entry, list) else str(entry)


def vocabulary_hash(tokenizer_json: bytes | None) -> str:
    """sha256 over what decides a tokenizer's ids (model, merges, added tokens, normalizer, pre-tokenizer), keys
    sorted; `None` is the byte tokenizer. Two tokenizer.json files hash alike when they give the same ids."""
    if tokenizer_json is None:
        return hashlib.sha256(BYTE_DESCRIPTION).hexdigest()
    data = orjson.loads(tokenizer_json)
    model = {k: data.get("model", {}).get(k) for k in _MODEL_KEYS}
    model["merges"] = [_merge(m) for m in model["merges"] or []]
    added = sorted(({k: t.get(k) for k in _ADDED_KEYS} for t in data.get("added_tokens") or []),
                   key=lambda t: (t["id"] is None, t["id"]))
    canonical = {"model": model, "added_tokens": added, "normalizer": _without_offsets(data.get("normalizer")),
                 "pre_tokenizer": _without_offsets(data.get("pre_tokenizer"))}
    return hashlib.sha256(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)).hexdigest()


def hub_repo(spec: str) -> str | None:
    """The Hub model repository a tokenizer spec names (an alias resolved), or None for the byte tokenizer and for a
    path (an existing file or folder, or a name that reads as one: '.json', './', '/', '~')."""
    if spec == BYTE or os.path.exists(spec) or spec.endswith(".json") or spec.startswith((".", "/", "~")):
        return None
    return HUB_ALIASES.get(spec, spec)


def same_name(given: str, recorded: str) -> bool:
    """Whether two tokenizer specs name the same Hub repository ('gpt2' is openai-community/gpt2)."""
    return HUB_ALIASES.get(given, given) == HUB_ALIASES.get(recorded, recorded)


def described(tokenizer) -> dict:
    """What the loader's stats say of a tokenizer (any of the loader's: a DocTokenizer, a token directory's
    ShardTokens, the stand-in of kept batches): name, backend and why, vocabulary, end-of-text id, the tiktoken
    check's duration (None where there is none)."""
    return {"name": tokenizer.name, "backend": tokenizer.backend, "vocab_size": tokenizer.vocab_size,
            "eos_id": tokenizer.eos_id, "bos_id": tokenizer.bos_id,
            "backend_reason": getattr(tokenizer, "backend_reason", None),
            "check_s": getattr(tokenizer, "check_s", None)}
