"""Measuring the loader: `smoke` (first batch under a deadline), `cold_warm` (cold/warm fresh-process runs split
into first-batch phases, steady-state fetch latency), `child` (the measured process), `tune` and `tune_rank`
(the doc batch x queue depth sweep and its ranking), `hub_requests` (counting HTTP requests to the Hub),
`node_report` (`fwe doctor`'s facts about this node: versions, disk, caches, Hub, torch)."""
