"""The Hugging Face Hub as a source: its listing at a pinned commit (`api`, `listing`, `data_files`), parquet read by
range requests on a read-ahead thread (`native`, `readahead`, `ranges`, `footers`), the warm start's caches
(`head_cache`, `first_batches`), and the `datasets` streaming reader (`streaming`)."""
