"""Tokenizers the loader uses: `tokenizers` (the reference), tiktoken (used only once proven to give the same
ids, see `tiktoken_backend` and `probes`), the built-in byte tokenizer, and GPT-2 built from its packaged vocabulary."""
