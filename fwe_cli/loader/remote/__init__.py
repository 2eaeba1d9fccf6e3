"""Talking to what is far away: the one HTTP client (urllib3), retries of transient failures with a per-loader budget,
where the Hub and its caches are (`hub_env`), and one request per job or node for what every rank needs
(`job_ranks`: rank 0 asks for all; `node_lock`: one process of a node fills the shared cache)."""
