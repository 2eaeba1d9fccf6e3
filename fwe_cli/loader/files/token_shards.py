"""The token shard format: llm.c's `.bin` (what llm.c's and modded-nanogpt's FineWeb scripts write and their
trainers read), plus a document index beside each shard.

    shard  NAME.bin       header: 256 little-endian int32 -- [0] magic 20240520, [1] version, [2] number of tokens,
                          the rest 0; then the tokens, little-endian: uint16 for version 1 (llm.c's), uint32 for
                          version 2 (fwe's extension, for vocabularies with ids above 65,535)
    index  NAME.idx.npy   int64 offsets (in tokens, from the first token) of each document's start, in order

As llm.c writes them, every document is preceded by the end-of-text token: the token at each offset is that token
and the document's own ids follow it. A shard holds whole documents.

    tokens, offsets = read_shard(path)              # numpy memmap views; no copy, no Python loop per token

fwe tokenize writes them (fwe_cli.tokens.shard_writer, with `header` and `index_path` from here); a token directory
(its manifest: TOKENS_FORMAT) is read by fwe_cli.loader.files.token_dir.
"""

from __future__ import annotations

import os

import numpy as np

TOKENS_FORMAT = "fwe-tokens/1"  # the `format` of a token directory's manifest.json (fwe tokenize's output)
MAGIC = 20240520
TOKENS_FORMAT = "fwe-tokens/1"
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
VERSION_UINT16 = 1
VERSION_UINT32 = 2
INDEX_SUFFIX = ".idx.npy"


class ShardFormatError(ValueError):
    """A file is not a token shard of a version this reader knows, or its index does not match it."""


def version_for(vocab_size: int) -> int:
    """1 (uint16, llm.c's) when every id fits 16 bits, else 2 (uint32)."""
    return VERSION_UINT16 if vocab_size <= 65_536 else VERSION_UINT32


def dtype_for(version: int) -> np.dtype:
    if version == VERSION_UINT16:
        return np.dtype("<u2")
    if version == VERSION_UINT32:
        return np.dtype("<u4")
    raise ShardFormatError(f"token shard version {version} is not 1 (uint16) or 2 (uint32)")


def header(num_tokens: int, version: int) -> bytes:
    head = np.zeros(HEADER_INTS, dtype="<i4")
    head[0], head[1], head[2] = MAGIC, version, num_tokens
    return head.tobytes()


def index_path(shard_path: str) -> str:
    base = shard_path[:-4] if shard_path.endswith(".bin") else shard_path
    return base + INDEX_SUFFIX


def read_header(path: str) -> tuple[int, int]:
    """(version, number of tokens) of a shard; ShardFormatError naming the file when it is not one."""
    with open(path, "rb") as handle:
        head = np.frombuffer(handle.read(HEADER_BYTES), dtype="<i4")
    if head.size != HEADER_INTS or int(head[0]) != MAGIC:
        raise ShardFormatError(f"{path} is not a token shard (no magic {MAGIC} in its 1 KiB header)")
    version, count = int(head[1]), int(head[2])
    try:
        width = dtype_for(version).itemsize
    except ShardFormatError as exc:
        raise ShardFormatError(f"{path}: {exc}") from None
    expected = HEADER_BYTES + count * width
    size = os.path.getsize(path)
    if size != expected:
        raise ShardFormatError(f"{path}: header says {count} tokens ({expected} bytes), the file has {size} bytes")
    return version, count


def read_shard(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, document offsets) of a shard, memory-mapped read-only; ShardFormatError when they do not agree."""
    version, count = read_header(path)
    tokens = np.memmap(path, dtype=dtype_for(version), mode="r", offset=HEADER_BYTES, shape=(count,)) if count \
        else np.empty(0, dtype=dtype_for(version))
    try:
        offsets = np.load(index_path(path), mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise ShardFormatError(f"{path}: its document index {index_path(path)} cannot be read ({exc})") from exc
    if offsets.ndim != 1 or (len(offsets) and (offsets[0] != 0 or offsets[-1] >= count)):
        raise ShardFormatError(f"{path}: its document index does not fit its {count} tokens")
    if len(offsets) > 1 and not bool((np.diff(offsets) > 0).all()):  # every document holds at least its eot
        raise ShardFormatError(f"{path}: its document index is out of order (offsets must increase)")
    return tokens, offsets

