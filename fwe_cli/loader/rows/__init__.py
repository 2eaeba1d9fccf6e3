"""Tokens into the rows a trainer takes: `packing` cuts the stream into [batch_size, seq_len] batches (plain, labels,
document boundaries; rows by --pack stream or greedy), `best_fit` fills each row from a buffer of whole documents."""
