"""runbooks/train.md's plain loop, DataLoader workers (persistent, over epochs) and HF Trainer (1 and 2 processes)
sections run as written: each section's blocks in a scratch directory, as a reader runs them
(tests.train.runbook_sections; the Grain and torchtitan sections are run by their own tests), and README's example
is one of them."""

from __future__ import annotations

import pytest

from tests.helpers import REPO_ROOT
from tests.train.runbook_sections import FENCE as FENCE_ANY, blocks, run_section

SECTIONS = {"A plain PyTorch loop": ("FineWebLoader(config, state=",),
            "DataLoader workers, checkpointed with StatefulDataLoader": (
                "StatefulDataLoader(FineWebDataset(", "persistent_workers=True", '"epoch_end.pt")'),
            "The Hugging Face Trainer": ("FweDataCallback.attach(trainer)", "gradient_accumulation_steps=2",
                                         "torchrun --standalone --nproc-per-node 2 hf_ddp.py hf_ddp/checkpoint-3")}
"""Each section's examples: a text each holds (a block lost to a broken fence would otherwise go untested). The
DataLoader section's: workers, then persistent workers over epochs with a checkpoint at an epoch's end; the Trainer's:
one process, then 2 under torchrun with gradient accumulation, resumed."""


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_the_section_runs_as_written(tmp_path, heading):
    """The section holds its examples, and every block of it exits 0."""
    pytest.importorskip("torchdata.stateful_dataloader")
    if "Hugging Face" in heading:
        pytest.importorskip("transformers")
    codes = [code for _language, _name, code in blocks(heading)]
    assert all(any(text in code for code in codes) for text in SECTIONS[heading])
    assert run_section(heading, tmp_path, timeout=600)


def test_readme_shows_the_runbook_s_dataloader_block_verbatim():
    """README.md's python block is the DataLoader section's block of runbooks/train.md, character for character, so
    the test above runs what a newcomer copies from README."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    shown = [code for language, code in FENCE_ANY.findall(readme) if language == "python"]
    runbook = [code for _language, _name, code in blocks("DataLoader workers, checkpointed with StatefulDataLoader")]
    assert shown and all(code in runbook for code in shown)
