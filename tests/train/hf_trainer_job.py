"""The Hugging Face Trainer on 2 processes (tests/train/test_hf_trainer.py): a tiny GPT-2 trained on
FineWebDataset's rows with FweDataCallback, under torchrun (gloo, CPU).

    torchrun --standalone --nproc-per-node 2 tests/train/hf_trainer_job.py DATA.jsonl OUT [CHECKPOINT]

Each rank builds its config with no shard flags (the rank comes from torchrun's RANK and WORLD_SIZE), trains 4
optimizer steps of 2 micro-batches (gradient accumulation) of 4 rows, a checkpoint every 2 steps (from CHECKPOINT
when given), with `--workers` DataLoader workers (default 0), and writes OUT/rank{r}.json: the rows it trained on,
decoded, in order.
"""

from __future__ import annotations

import json
import os
import sys

from tests.rank_train import end_rank


def main(data: str, out: str, checkpoint: str | None, workers: int) -> None:
    import torch
    import transformers

    from fwe_cli.loader import FineWebDataset, resolve_config
    from fwe_cli.loader.tokenization.names import BYTE_EOS_ID
    from fwe_cli.train.hf_trainer import FweDataCallback

    config = resolve_config(local_path=data, tokenizer="byte", seq_len=24, batch_size=4, loader_timeout=120.0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=BYTE_EOS_ID + 1, n_positions=24, n_embd=16, n_layer=1, n_head=2, bos_token_id=BYTE_EOS_ID,
        eos_token_id=BYTE_EOS_ID))
    rows: list[str] = []

    def record(_module, _args, kwargs):
        for row in kwargs["input_ids"].tolist():
            rows.append(bytes(t for t in row if t < 256).decode())

    model.register_forward_pre_hook(record, with_kwargs=True)
    args = transformers.TrainingArguments(os.path.join(out, "run"), max_steps=4, save_steps=2,
                                          per_device_train_batch_size=4, gradient_accumulation_steps=2,
                                          learning_rate=1e-3, use_cpu=True, report_to=[], disable_tqdm=True,
                                          dataloader_num_workers=workers, ddp_backend="gloo")
    trainer = transformers.Trainer(model=model, args=args, train_dataset=FineWebDataset(config, samples=True))
    FweDataCallback.attach(trainer)
    trainer.train(resume_from_checkpoint=checkpoint)
    rank = int(os.environ["RANK"])
    with open(os.path.join(out, f"rank{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump({"rank": rank, "shard": [config.shard.mod, config.shard.rem], "rows": rows}, handle)
    end_rank(torch.distributed)  # (the Trainer's group: gloo can abort a process tearing it down at exit)


if __name__ == "__main__":
    argv = sys.argv[1:]
    workers = int(argv.pop(argv.index("--workers") + 1)) if "--workers" in argv else 0
    argv = [a for a in argv if a != "--workers"]
    main(argv[0], argv[1], argv[2] if len(argv) > 2 else None, workers)
