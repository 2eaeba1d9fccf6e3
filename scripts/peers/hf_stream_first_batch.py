"""Peer of `fwe smoke --source hub --tokenizer gpt2 --batch 8 --seq-len 1024 --batches 1`: what a user writes without
fwe. Stream FineWeb-Edu with `datasets`, tokenize with `tokenizers`, stop at one 8x1024 batch of ids(doc) + [eos].
Run: python scripts/peers/hf_stream_first_batch.py [OUT.npy]; `python -m scripts.bench.hub_start` times it (whole
process)."""
import sys
import numpy as np
from datasets import load_dataset
from tokenizers import Tokenizer

ds = load_dataset("HuggingFaceFW/fineweb-edu", name="sample-10BT", split="train", streaming=True)
tok = Tokenizer.from_pretrained("openai-community/gpt2")
eos, ids = tok.token_to_id("<|endoftext|>"), []
for row in ds:
    ids += tok.encode(row["text"]).ids + [eos]
    if len(ids) >= 8 * 1024:
        break
batch = np.array(ids[: 8 * 1024], dtype=np.int32).reshape(8, 1024)
if len(sys.argv) > 1:
    np.save(sys.argv[1], batch)
