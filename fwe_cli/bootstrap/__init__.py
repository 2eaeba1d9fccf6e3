"""`fwe bootstrap`'s engine: stage FineWeb-Edu on local disk as JSONL parts plus a manifest, crash-safe and
resumable. `config` (what to stage), `state` (fresh run, resume or refusal), `run` (the copy), `part_writer`
(temporary part files, fsync, rename), `manifest` (the on-disk record), `faults` (injected faults for tests)."""
