"""Token directories for the loader's tests, written here (not by `fwe tokenize`) from documents a test makes: the
shards through fwe_cli.loader.sources.token_shards.encode_shard, ids from the project's tokenizer, and the manifest the
token directory format specifies (fwe_cli.loader.sources.token_dir)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson

from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer
from fwe_cli.loader.sources.token_shards import encode_shard, index_path, version_for


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
        shards.append({"name": name, "tokens": int(sum(len(d) + 1 for d in docs)), "documents": len(docs),
                       "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)})
    manifest = {"format": "fwe-tokens/1", "tokenizer": {"name": tokenizer, "vocab_sha256": f"test:{tokenizer}"},
                "vocab_size": tok.vocab_size, "eot": tok.eos_id, "version": version_for(tok.vocab_size),
                "shards": shards, "complete": complete}
    (out / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return out
