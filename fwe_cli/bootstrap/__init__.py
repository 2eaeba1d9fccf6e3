"""`fwe bootstrap`'s engine: stage FineWeb-Edu on local disk as JSONL parts plus a manifest, crash-safe and
resumable. `config` (what to stage), `state` (what decides the output: fresh run, resume or refusal), `run` (the
copy), `part_writer` (temporary part files, fsync, rename), `manifest` (the output's layout and verification), the
native Hub reader (`hub_stream`, `hub_download`, `hub_convert`); what every resumable output shares (lock, manifest
writes, faults for tests) is fwe_cli/output's."""
