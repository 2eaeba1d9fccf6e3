"""Helpers shared by the token-shard tests: run `fwe tokenize` (in this process, or in its own to be killed) and
compare outputs file by file (tests/output_support.py, shared with the bootstrap tests), and an independent GPT-2
reference encoder."""

from __future__ import annotations

import numpy as np

from fwe_cli.tokens.layout import TokensLayout
from fwe_cli.tokens.run import TokenizeConfig, run_tokenize
from scripts.bench.check_gpt2_offline import gpt2_reference_encoding
from tests.output_support import ResumableOutput

GPT2_EOT = 50256
LITERAL_EOT = "<|endoftext|>"

TOKENS_OUTPUT = ResumableOutput("tokenize", TokensLayout, data_files="fineweb_train_*", min_files=4)
cli, run_in_own_process, killed_then_rerun = (TOKENS_OUTPUT.cli, TOKENS_OUTPUT.run_in_own_process,
                                              TOKENS_OUTPUT.killed_then_rerun)
manifest_of, file_hashes, assert_same_output = (TOKENS_OUTPUT.manifest_of, TOKENS_OUTPUT.file_hashes,
                                                TOKENS_OUTPUT.assert_same_output)


def core_run(src, out, tokenizer: str, **kw) -> dict:
    """run_tokenize in this process (no CLI start-up)."""
    return run_tokenize(TokenizeConfig(src=str(src), out=str(out), tokenizer=tokenizer, **kw))


def reference_gpt2(texts: list[str]) -> np.ndarray:
    """GPT-2 ids of `texts` as llm.c lays them out ([eot] + ids(doc) per document), from tiktoken's GPT-2 BPE, which
    shares no encoding code with fwe (scripts/bench/check_gpt2_offline.py's gpt2_reference_encoding). A literal
    "<|endoftext|>" in a text is the end-of-text token (as GPT-2's tokenizer.json treats its added token); the rest is
    ordinary text."""
    encoding = gpt2_reference_encoding()
    return np.asarray([i for text in texts for i in (GPT2_EOT, *encoding.encode(text, allowed_special="all"))],
                      dtype=np.int64)
