"""Sources on this machine: plain files (JSONL, TXT, parquet, gzip) and a bootstrap (their listing, formats and
reads), token directories (`fwe tokenize`'s shards and manifest), and the built-in synthetic data."""
