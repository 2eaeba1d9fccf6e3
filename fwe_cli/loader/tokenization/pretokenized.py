"""A tokenizer already applied: what the pipeline needs of the tokenizer a token directory's shards were made with,
as its manifest records it (`ShardTokens`: name, vocabulary size, end-of-text id), so that none is loaded or parsed.
The manifest itself is read and checked by its format's module (files.token_manifest)."""

from __future__ import annotations

import os

from fwe_cli.errors import ConfigError
from fwe_cli.loader.tokenization.names import same_name

BACKEND = "token-shards"


class ShardTokens:
    """What the pipeline needs of a tokenizer, from a token directory's manifest (checked by its reader): nothing is
    loaded or parsed."""

    backend = BACKEND
    backend_reason = "pre-tokenized shards: no tokenizer loaded"
    source = "manifest"
    check_s = None

    def __init__(self, path: str, manifest: dict, name: str):
        self.path = path
        self.manifest = manifest
        self.name = name
        self.vocab_size = manifest["vocab_size"]
        self.eos_id = self.bos_id = manifest["eot"]

    def matches(self, tokenizer: str) -> bool:
        """Whether `tokenizer` gives the ids the shards hold: the same vocabulary hash (a tokenizer.json's model,
        merges, added tokens, normalizer and pre-tokenizer: GPT-2 built offline and the Hub's are the same), or, for
        a manifest that records none, the same name or file."""
        recorded = self.manifest["tokenizer"].get("vocab_hash")
        if isinstance(recorded, str):
            from fwe_cli.loader.tokenization.doc_tokenizer import tokenizer_vocabulary_hash

            return tokenizer_vocabulary_hash(tokenizer) == recorded
        if same_name(tokenizer, self.name):
            return True
        return os.path.exists(tokenizer) and os.path.exists(self.name) and os.path.samefile(tokenizer, self.name)

    def check(self, tokenizer: str) -> None:
        """ConfigError (one line, naming both) unless `tokenizer` is the one the shards were made with."""
        if not self.matches(tokenizer):
            raise ConfigError(f"{self.path} was tokenized with {self.name!r}, not --tokenizer {tokenizer!r}: pass "
                              f"--tokenizer {self.name}, or tokenize the text again with {tokenizer!r}")
