"""Document sources: which documents a loader reads, and the objects that read them.

- `spec`: SourceSpec (what the user named: kind, path or Hub repository, seed) and ReadOptions (how to read it);
- `registry`: the one table of source kinds, and `open_source(spec, options)`, the object that reads a spec;
- `base`: what every source object is (`Source`); `records`: whole records for `fwe bootstrap`;
- the kinds: `synthetic`, `file_sources` (plain files, a bootstrap), `token_dir` (token shards), `hub_native`
  (range reads, with `hub_listing`, `hub_data_files`, `hub_parquet`, `hub_ranges`, `hub_head_cache`) and
  `hub_datasets`;
- `stream`: DocumentStream, a config's documents ordered, shuffled and sharded by `order`.

This package face imports nothing: naming a module of it loads only that module.
"""
