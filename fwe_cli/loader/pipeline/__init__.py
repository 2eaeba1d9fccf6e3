"""The producer: documents -> doc batches -> tokenized in order on a thread pool -> packed (`producer`), with what it
keeps of recent batches for a state (`recent`), and what it reports: heartbeat lines (`telemetry`) and percentiles in
bounded memory (`quantiles`)."""
