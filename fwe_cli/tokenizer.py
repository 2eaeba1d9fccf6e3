"""Tokenizers the loader can use, behind one small interface.

`encode_docs(texts)` returns one int32 array: ids(doc0) + [eos] + ids(doc1) + [eos] + ..., which is
exactly what the packer consumes, so no per-document arrays travel further than this module.

Specs: 'byte' (UTF-8 bytes 0..255, end-of-document id 256, vocab 257; needs no files), a path to a
tokenizer.json (or a directory holding one), or a Hub model id fetched through the Hugging Face cache
('gpt2' is an alias of 'openai-community/gpt2').
"""

from __future__ import annotations

import os
from typing import Protocol, Sequence

import numpy as np

from fwe_cli.errors import TokenizerError
from fwe_cli.transient import attempts_note, call_with_retries

BYTE_EOS_ID = 256
HUB_ALIASES = {"gpt2": "openai-community/gpt2"}
EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eot_id|>", "[SEP]")


class DocTokenizer(Protocol):
    name: str
    backend: str
    vocab_size: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray: ...


class ByteTokenizer:
    """UTF-8 bytes as ids; documents separated by id 256."""

    name = "byte"
    backend = "byte"
    vocab_size = 257
    eos_id = BYTE_EOS_ID

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8", errors="surrogatepass"))

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        blobs = [t.encode("utf-8", errors="surrogatepass") for t in texts]
        out = np.empty(sum(len(b) for b in blobs) + len(blobs), dtype=np.int32)
        pos = 0
        for blob in blobs:
            n = len(blob)
            out[pos : pos + n] = np.frombuffer(blob, dtype=np.uint8)
            out[pos + n] = BYTE_EOS_ID
            pos += n + 1
        return out


class HFTokenizer:
    """A `tokenizers.Tokenizer`; batches go through `encode_batch` (Rust, GIL released)."""

    backend = "tokenizers"

    def __init__(self, tokenizer, name: str):
        self.tokenizer = tokenizer
        self.name = name
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        eos = next((t for t in EOS_CANDIDATES if tokenizer.token_to_id(t) is not None), None)
        if eos is None:
            raise TokenizerError(f"tokenizer {name!r} has no end-of-document token (looked for {', '.join(EOS_CANDIDATES)})")
        self.eos_token = eos
        self.eos_id = tokenizer.token_to_id(eos)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 1:
            encodings = [self.tokenizer.encode(texts[0], add_special_tokens=False)]
        else:
            encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        ids: list[int] = []
        eos = self.eos_id
        for enc in encodings:
            ids += enc.ids
            ids.append(eos)
        return np.array(ids, dtype=np.int32)


def resolve_tokenizer_file(spec: str) -> str:
    """Path of the tokenizer.json a spec names, downloading a Hub id through the HF cache."""
    if os.path.isfile(spec):
        return spec
    if os.path.isdir(spec):
        path = os.path.join(spec, "tokenizer.json")
        if os.path.isfile(path):
            return path
        raise TokenizerError(f"tokenizer directory {spec!r} has no tokenizer.json")
    if spec.endswith(".json") or spec.startswith((".", "/", "~")):
        raise TokenizerError(f"tokenizer file {spec!r} does not exist")
    repo = HUB_ALIASES.get(spec, spec)
    try:
        from huggingface_hub import hf_hub_download

        return call_with_retries(lambda: hf_hub_download(repo_id=repo, filename="tokenizer.json"),
                                 f"fetching tokenizer.json of {repo}")
    except Exception as exc:  # network, auth, missing repo: all end here with the cause chained
        raise TokenizerError(f"cannot fetch tokenizer.json of {repo!r} from the Hub{attempts_note(exc)}: {exc}") from exc


def load_tokenizer(spec: str) -> DocTokenizer:
    """Load a tokenizer from a spec ('byte', a tokenizer.json path or directory, or a Hub id)."""
    if spec == "byte":
        return ByteTokenizer()
    path = resolve_tokenizer_file(spec)
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:
        raise TokenizerError(f"cannot load tokenizer from {path}: {exc}") from exc
    return HFTokenizer(tokenizer, name=spec)
