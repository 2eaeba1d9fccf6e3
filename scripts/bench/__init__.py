"""The benchmarks: timing claims that depend on the machine, so they are figures in JSON, not tests.

    python -m scripts.bench.<name> --help           # from the repository root, with the project's venv active

One module per benchmark (first_batch, throughput, bootstrap, bootstrap_hub, hub_start, hub_cold_warm, resume,
token_path, tokenize_scale, head_tail, gpu, tune_trials, measure_claims, warmup, check_gpt2_offline), each writing
`<name>-<UTC>.json` into `--out` (default artifacts/bench) through `harness`, which holds what they share; `corpus`
builds the FineWeb-like text several of them read, `throughput_stages` runs throughput's stages in fresh interpreters.
"""
