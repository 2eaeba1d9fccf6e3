"""Training with fwe: adapters that hand fwe's batches to the trainers people run, each resuming exactly through that
trainer's own checkpointing.

    fwe_cli.train.grain_dataset   FineWebIterDataset: a grain.IterDataset (get_state/set_state; mp_prefetch workers)
    fwe_cli.train.torchtitan      FineWebDataLoader: a torchtitan BaseDataLoader (its dataloader checkpoint)

Each module imports its trainer's package itself (the `train` extra: pip install 'fwe[train]'); importing this
package imports none of them.
"""
