"""Pre-tokenized token shards: llm.c's .bin format plus a document index, written once, read at memory speed."""
