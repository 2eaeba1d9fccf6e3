"""Training with fwe: adapters that hand fwe's batches to the trainers people run, each resuming exactly through that
trainer's own checkpointing.

    fwe_cli.train.grain_dataset   FineWebIterDataset: a grain.IterDataset (get_state/set_state; mp_prefetch workers)
    fwe_cli.train.torchtitan      FineWebDataLoader: a torchtitan BaseDataLoader (its dataloader checkpoint)
    fwe_cli.train.hf_trainer      FweDataCallback: the HF Trainer's checkpoints keep fwe's position

A plain PyTorch loop or DataLoader workers take fwe_cli.loader.FineWebDataset (a torch IterableDataset). Each module
imports its trainer's package itself (extras: pip install 'fwe[train]' for Grain, 'fwe[torchtitan]'; transformers
for hf_trainer); importing this package imports none of them. Examples: runbooks/train.md.
"""
