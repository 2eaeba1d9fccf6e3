"""hubsim: a small Hugging Face Hub-compatible HTTP server on 127.0.0.1, for offline tests and benchmarks.

The unmodified `datasets`, `huggingface_hub` and `tokenizers` clients talk to it through HF_ENDPOINT.

    python -m tests.hubsim build --root /tmp/hub --mb 300 --shards 8     # repos on disk (repos.py)
    python -m tests.hubsim serve --root /tmp/hub --port 0 --rtt-ms 50    # prints the HF_ENDPOINT to export
    python -m tests.hubsim bench --root /tmp/hub --rtt-ms 0,50,200       # cold/warm smoke under RTT -> JSON

Modules: repos.py (build the repos), store.py (read them as Hub repos), server.py + handler.py (the HTTP
server), faults.py (delays, failures, cuts, stalls), proxy.py (added round-trip time), requestlog.py
(JSON-lines request log), clientenv.py + sealed/sitecustomize.py (client environment; no connection leaves
127.0.0.1), fixtures.py (pytest fixtures), bench.py (RTT benchmark).
See runbooks/hub-test-server.md.
"""
