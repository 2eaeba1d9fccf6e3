"""The CPU floor of `fwe bootstrap --fields text` from downloaded parquet files: one plain single-threaded loop of
pyarrow row-group reads, orjson lines and sha256 over the inputs and the output, until GB of JSONL are written.
Run: python scripts/peers/plain_convert.py DIR GB OUT.jsonl; prints {"cpu_s", "wall_s", "bytes"} as JSON (whole
process, imports included); `python -m scripts.bench.bootstrap_hub` runs it on what `hf download` fetched."""
import hashlib
import json
import os
import resource
import sys
import time

import orjson
import pyarrow.parquet as pq

started = time.perf_counter()
folder, target, out = sys.argv[1], float(sys.argv[2]) * 1e9, sys.argv[3]
paths = sorted(os.path.join(root, name) for root, _, names in os.walk(folder) for name in names
               if name.endswith(".parquet"))
digest, written = hashlib.sha256(), 0
with open(out, "wb") as sink:
    for path in paths:
        with open(path, "rb") as handle:
            hashlib.file_digest(handle, "sha256")
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=["text", "id"], use_threads=False)
            chunk = b"".join(orjson.dumps({"text": t, "id": i}, option=orjson.OPT_APPEND_NEWLINE)
                             for t, i in zip(table.column("text").to_pylist(), table.column("id").to_pylist()))
            digest.update(chunk)
            sink.write(chunk)
            written += len(chunk)
            if written >= target:
                break
        if written >= target:
            break
    os.fsync(sink.fileno())
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "wall_s": round(time.perf_counter() - started, 3),
                  "bytes": written}))
