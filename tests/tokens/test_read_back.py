"""What `fwe tokenize` writes is what the loader reads: its output directory, given as --local-path, yields the text
path's batches exactly (the writer and the reader agree on the format and the manifest, end to end)."""

from __future__ import annotations

import numpy as np
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from tests.helpers import invoke, write_jsonl
from tests.tokens.support import cli


@pytest.mark.parametrize("tokenizer", ["byte", "gpt2"])
def test_tokenize_output_is_read_back_as_the_text_paths_batches(tmp_path, tokenizer):
    """Text -> `fwe tokenize` (small shards) -> loader over the token directory (its tokenizer taken from the
    manifest) gives the same batches as the loader over the text; `fwe smoke` on it passes."""
    source = write_jsonl(tmp_path / "docs.jsonl", [synthetic_record(4, i) for i in range(80)])
    out = tmp_path / "tokens"
    result = cli(str(source), "--tokenizer", tokenizer, "--out", str(out), "--shard-tokens", "40000", tmp=tmp_path)
    assert result.exit_code == 0, result.stderr

    def batches(path, **kw):
        config = resolve_config(env={}, local_path=str(path), seq_len=512, batch_size=4, **kw)
        with FineWebLoader(config) as loader:
            return np.stack([np.array(b) for b in loader])

    assert np.array_equal(batches(out), batches(source, tokenizer=tokenizer))
    smoke = invoke("smoke", "--local-path", str(out), "--seq-len", "512", "--batch", "4",
                   "--artifacts-dir", str(tmp_path / "artifacts"))
    assert smoke.exit_code == 0, smoke.stderr
