"""Token directories for the loader's tests, written here (not by `fwe tokenize`) from documents a test makes: shards
as the format says them (fwe_cli.loader.files.token_shards: header, then each document's eot and ids), ids from the
project's tokenizer, and the manifest the token directory format specifies (fwe_cli.loader.files.token_dir),
index sizes and hashes included. A writer of its own, so the loader is checked against the format, not against fwe
tokenize's way of writing it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np
import orjson

from fwe_cli.loader.files.token_shards import TOKENS_FORMAT, dtype_for, header, index_path, version_for
from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer


def encode_shard(documents: Sequence[Sequence[int]], eot: int, vocab_size: int) -> tuple[bytes, np.ndarray]:
    """(the shard's bytes, its document offsets) for `documents`, each preceded by `eot`."""
    version = version_for(vocab_size)
    dtype = dtype_for(version)
    body = np.concatenate([np.concatenate([[eot], ids]).astype(dtype) for ids in documents]) if documents \
        else np.empty(0, dtype=dtype)
    offsets = np.cumsum([0] + [len(ids) + 1 for ids in documents[:-1]]).astype(np.int64) if documents \
        else np.empty(0, dtype=np.int64)
    return header(len(body), version) + body.tobytes(), offsets


def write_token_dir(out: Path, texts: list[str], tokenizer: str = "byte", docs_per_shard: int = 50,
                    complete: bool = True) -> Path:
    """`texts` tokenized with `tokenizer` into shards of `docs_per_shard` documents under `out`, plus manifest.json."""
    tok = load_tokenizer(tokenizer, backend="tokenizers")
    out.mkdir(parents=True, exist_ok=True)
    shards = []
    for number, first in enumerate(range(0, len(texts), docs_per_shard)):
        part = texts[first:first + docs_per_shard]
        docs = [tok.encode_docs([text])[:-1] for text in part]  # the text path's ids, without its eos
        body, offsets = encode_shard(docs, tok.eos_id, tok.vocab_size)
        name = f"fineweb_train_{number:06d}.bin"
        (out / name).write_bytes(body)
        np.save(index_path(str(out / name)), offsets)
        index = Path(index_path(str(out / name)))
        shards.append({"name": name, "tokens": int(sum(len(d) + 1 for d in docs)), "documents": len(docs),
                       "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body), "index": index.name,
                       "index_bytes": index.stat().st_size,
                       "index_sha256": hashlib.sha256(index.read_bytes()).hexdigest()})
    manifest = {"format": TOKENS_FORMAT, "tokenizer": {"name": tokenizer, "vocab_sha256": f"test:{tokenizer}"},
                "vocab_size": tok.vocab_size, "eot": tok.eos_id, "version": version_for(tok.vocab_size),
                "shards": shards, "complete": complete}
    (out / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return out
