"""Which client reads an object store: fwe's (s3fs through fsspec: remote.object_store's Store, each range GET
If-Match the listed ETag) against obstore (Rust's object_store), for the reads a reader makes, against moto's S3
server (tests/s3sim, connections kept open as S3 does) behind a round trip (tests/hubsim's RttProxy):

- a reader's share of an object (1/R of it) in 8 MiB range GETs, 4 in flight (remote.range_file's sizes);
- 64 KiB range GETs one after another (a footer, a small row group: the cost of one request);
- fork safety: a client used in this process, then used in a forked child (a DataLoader worker), within 20 s.

obstore is not a dependency of fwe: `pip install obstore` first (without it the run says so and exits 2).

    python -m scripts.bench.store_clients [--mb 64] [--readers 4] [--reps 3] [--rtt-ms 50] [--out artifacts/bench]
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from scripts.bench import harness
from scripts.bench.harness import say

NAME = "store_clients"
CHUNK, AHEAD, SMALL, SMALL_READS = 8 << 20, 4, 64 << 10, 16


def _clients(endpoint: str, bucket: str, key: str) -> dict:
    """name -> read(start, end) -> bytes, each client made once (its connections open after the first run)."""
    from fwe_cli.loader.remote.object_store import store_for

    url = f"s3://{bucket}/{key}"
    store = store_for(url, {})
    obj = store.info(url)
    return {"s3fs": lambda a, b: store.read(obj, a, b), "obstore": _obstore_read(endpoint, bucket, key)}


def _obstore_read(endpoint: str, bucket: str, key: str):
    from obstore import get_range
    from obstore.store import S3Store

    ob = S3Store(bucket, endpoint=endpoint, region="us-east-1", access_key_id="testing",
                 secret_access_key="testing", client_options={"allow_http": True})
    return lambda a, b: bytes(get_range(ob, key, start=a, end=b))


def _share(read, size: int, readers: int) -> float:
    """Seconds to read reader 0's share of the object in CHUNK range reads, AHEAD in flight."""
    end = size // readers
    t0 = time.perf_counter()
    with ThreadPoolExecutor(AHEAD) as pool:
        got = sum(len(b) for b in pool.map(lambda a: read(a, min(a + CHUNK, end)), range(0, end, CHUNK)))
    assert got == end
    return time.perf_counter() - t0


def _small(read) -> float:
    """Seconds per SMALL range read, one after another."""
    t0 = time.perf_counter()
    for i in range(SMALL_READS):
        assert len(read(i * SMALL, (i + 1) * SMALL)) == SMALL
    return (time.perf_counter() - t0) / SMALL_READS


def _forked(read, make=None) -> str:
    """'ok' when a read made in a forked child (the client used in this process first; with `make`, a client the
    child makes anew) returns the right bytes within 20 s; else how the child ended."""
    want = read(0, SMALL)
    pid = os.fork()
    if pid == 0:  # the child: a hung client is ended by the alarm's default action
        signal.alarm(20)
        try:
            os._exit(0 if (make() if make else read)(0, SMALL) == want else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)} (hung: the 20 s alarm)" if os.WTERMSIG(status) == 14 else \
            f"killed by signal {os.WTERMSIG(status)}"
    return {0: "ok", 3: "wrong bytes", 4: "raised"}.get(os.WEXITSTATUS(status), f"exit {os.WEXITSTATUS(status)}")


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--mb", type=float, default=64, help="MB of the object (default 64)")
    parser.add_argument("--readers", type=int, default=4, help="readers sharing it: reader 0's share is read")
    parser.add_argument("--reps", type=int, default=3, help="runs of each client (default 3)")
    parser.add_argument("--rtt-ms", type=float, default=50, help="round trip to the store (default 50)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    try:
        import obstore  # noqa: F401
    except ImportError:
        parser().exit(2, "obstore is not installed: pip install obstore\n")
    from tests.hubsim.proxy import RttProxy
    from tests.s3sim.server import S3Sim

    size = int(args.mb * 1e6)
    with S3Sim() as sim, RttProxy(sim.address, rtt_s=args.rtt_ms / 1000) as proxy:
        os.environ.update(sim.env(proxy.url))
        bucket = f"clients-{uuid.uuid4().hex[:8]}"
        sim.bucket(bucket)
        sim.put(bucket, "object.bin", os.urandom(size))
        clients = _clients(proxy.url, bucket, "object.bin")
        for read in clients.values():  # connections open, as in a reader's steady state
            _share(read, min(size, CHUNK * AHEAD), 1)
        share = harness.interleaved(args.reps, {n: lambda rep, r=r: _share(r, size, args.readers)
                                                for n, r in clients.items()})
        small = harness.interleaved(args.reps, {n: lambda rep, r=r: _small(r) for n, r in clients.items()})
        forked = {name: _forked(read) for name, read in clients.items()}  # fwe's Store makes its s3fs anew there
        forked["obstore made in the child"] = _forked(clients["obstore"],
                                                      lambda: _obstore_read(proxy.url, bucket, "object.bin"))
    record = {"mb": args.mb, "readers": args.readers, "rtt_ms": args.rtt_ms, "share_bytes": size // args.readers,
              "share_s": share, "small_read_s": small, "fork": forked,
              "share_ratio_obstore_to_s3fs": harness.ratio(harness.median(share["obstore"]),
                                                           harness.median(share["s3fs"])),
              "small_ratio_obstore_to_s3fs": harness.ratio(harness.median(small["obstore"]),
                                                           harness.median(small["s3fs"]))}
    for name in clients:
        say(f"{name}: share of {size // args.readers / 1e6:.1f} MB in {harness.median(share[name]):.2f} s, "
            f"{harness.median(small[name]) * 1000:.1f} ms a 64 KiB read, forked child: {forked[name]}")
    say(f"obstore made anew in a forked child: {forked['obstore made in the child']}")
    harness.write_result(NAME, args, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
