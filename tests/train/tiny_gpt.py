"""A plain PyTorch training loop on fwe's batches: a tiny GPT (CPU) fed by FineWebDataset through torchdata's
StatefulDataLoader(num_workers=2), checkpointed (model, optimizer, DataLoader) and resumable in a fresh process.

    python -m tests.train.tiny_gpt --corpus docs.jsonl --out run.json --steps 20 --save-at 10 --checkpoint ckpt.pt
    python -m tests.train.tiny_gpt --corpus docs.jsonl --out resumed.json --steps 20 --resume ckpt.pt

Writes, as JSON: each step's number, loss and batch (hex of its int32 bytes), then every batch left in the epoch
after the last step (read, not trained on), so a test can check the whole epoch's documents.
"""

from __future__ import annotations

import argparse

import orjson
import torch
from torch import nn
from torchdata.stateful_dataloader import StatefulDataLoader

from fwe_cli.loader import FineWebDataset, resolve_config
from fwe_cli.loader.tokenization.names import BYTE_EOS_ID

SEQ_LEN, BATCH, WORKERS = 32, 4, 2


class TinyGPT(nn.Module):
    """Token and position embeddings, two causal transformer layers, a head over the byte vocabulary."""

    def __init__(self, vocab: int = BYTE_EOS_ID + 1, dim: int = 32, layers: int = 2, context: int = SEQ_LEN):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        layer = nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=4 * dim, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        x = self.tokens(ids) + self.positions(torch.arange(length))
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        return self.head(self.blocks(x, mask=mask, is_causal=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--save-at", type=int, default=0)
    parser.add_argument("--checkpoint")
    parser.add_argument("--resume")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the same arithmetic in every process
    config = resolve_config(env={}, local_path=args.corpus, tokenizer="byte", seq_len=SEQ_LEN, batch_size=BATCH)
    loader = StatefulDataLoader(FineWebDataset(config), batch_size=None, num_workers=WORKERS)
    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step = 0
    if args.resume:
        saved = torch.load(args.resume)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        loader.load_state_dict(saved["data"])
        step = saved["step"]
    steps, rest = [], []
    batches = iter(loader)
    while step < args.steps:
        batch = next(batches)
        step += 1
        ids = batch.long()
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps.append({"step": step, "loss": loss.item(), "batch": batch.numpy().tobytes().hex()})
        if step == args.save_at:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "data": loader.state_dict(), "step": step}, args.checkpoint)
    rest = [batch.numpy().tobytes().hex() for batch in batches]
    with open(args.out, "wb") as handle:
        handle.write(orjson.dumps({"steps": steps, "rest": rest, "workers": WORKERS}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
