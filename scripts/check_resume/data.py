"""A case's data on disk and the loader configs that read it. Document N of leaf L is its own word, dLxNNNNN, repeated
1 to 12 times, and the case's tokenizer (a word-level tokenizer.json made here, `tokenizers`' WordLevel) gives each
word an id of its own: every token delivered says which document it is of, wherever a batch cuts.

    made = make_data(case, tmp_dir)
    config = made.config(Shard(3, 1))               # a rank's config
    made.universe, made.sizes                       # every document the source holds (after filters), its tokens
    made.owner[token_id]                            # the document a token is of
"""

from __future__ import annotations

import gzip
import random
from dataclasses import dataclass
from pathlib import Path

import orjson

from fwe_cli.loader import resolve_config
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.shard import Shard
from scripts.check_resume.cases import Case, Leaf

EOS = "<|endoftext|>"


def word(leaf_number: int, doc: int) -> str:
    return f"d{leaf_number}x{doc:05d}"


def write_tokenizer(case: Case, path: Path) -> dict[int, tuple[int, int]]:
    """A word-level tokenizer.json of every document's word (and the end-of-text token) at `path`; the document each
    id is of."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {EOS: 0, "[UNK]": 1}
    owner = {}
    for number, leaf in enumerate(case.leaves):
        for doc in range(leaf.docs):
            owner[len(vocab)] = (number, doc)
            vocab[word(number, doc)] = len(vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens([EOS])
    tokenizer.save(str(path))
    return owner


@dataclass
class Made:
    """A case's files and how to read them."""

    case: Case
    paths: list[str]
    tokenizer: str
    owner: dict[int, tuple[int, int]]
    universe: list[tuple[int, int]]
    """Each document the source holds, with the row filter and held-out split applied (every leaf)."""
    sizes: dict[tuple[int, int], int]
    """Each document's tokens (its end-of-text left out)."""

    def config(self, shard: Shard, **changes) -> LoaderConfig:
        c = self.case
        settings = dict(tokenizer=self.tokenizer, seq_len=c.seq_len, batch_size=c.batch_size, pack=c.pack,
                        pack_buffer=c.pack_buffer, epochs=c.epochs, queue_depth=2, doc_batch=3,
                        tokenizer_threads=1, report_docs=0, shard_mod=shard.mod, shard_rem=shard.rem)
        if c.shuffle is not None:
            settings.update(shuffle_seed=c.shuffle, shuffle_window=c.window)
        if c.holdout is not None:
            settings["holdout"] = c.holdout
        if c.where:
            settings["where"] = "int_score >= 2"
        if c.mixed:
            settings["mix"] = self.paths[-1]
        else:
            settings["local_path"] = self.paths[0]
        return resolve_config(env={}, **settings).replace(**changes)


def _records(case: Case, number: int, leaf: Leaf) -> list[dict]:
    rng = random.Random(f"{leaf.seed}:{number}")
    return [{"text": " ".join([word(number, i)] * rng.randint(1, 12)), "id": f"doc-{number}-{i}", "int_score": i % 5}
            for i in range(leaf.docs)]


def _write_leaf(case: Case, number: int, leaf: Leaf, root: Path, tokenizer: str) -> str:
    """The leaf's files under `root`; returns what --local-path names (a directory, or its one file)."""
    records = _records(case, number, leaf)
    folder = root / f"leaf{number}"
    folder.mkdir(parents=True)
    chunks = [records[i::leaf.files] for i in range(leaf.files)] if leaf.fmt != "tokens" else [records]
    chunks = [chunk for chunk in chunks if chunk] or [records[:0]]
    for part, chunk in enumerate(chunks):
        name = folder / f"part{part:02d}"
        if leaf.fmt in ("jsonl", "tokens"):
            Path(f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in chunk))
        elif leaf.fmt == "txt":
            Path(f"{name}.txt").write_text("".join(r["text"] + "\n" for r in chunk), encoding="utf-8")
        elif leaf.fmt == "gz":
            Path(f"{name}.jsonl.gz").write_bytes(gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in chunk)))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.table({"text": [r["text"] for r in chunk], "id": [r["id"] for r in chunk],
                              "int_score": [r["int_score"] for r in chunk]})
            pq.write_table(table, f"{name}.parquet", row_group_size=leaf.rows_per_group)
    if leaf.fmt != "tokens":
        return str(folder)
    from fwe_cli.tokens.run import TokenizeConfig, run_tokenize

    out = root / f"tokens{number}"
    run_tokenize(TokenizeConfig(src=str(folder), out=str(out), tokenizer=tokenizer, shard_tokens=1000, threads=1))
    return str(out)


def _universe(case: Case) -> list[tuple[tuple[int, int], str]]:
    """(tag, text) of every document the source holds once filtered: int_score >= 2 with the filter, one side of the
    held-out split."""
    from fwe_cli.loader.compose.holdout import held_out_key, is_held_out

    kept = []
    for number, leaf in enumerate(case.leaves):
        for record in _records(case, number, leaf):
            if case.where and record["int_score"] < 2:
                continue
            key = record["text"] if leaf.fmt == "txt" else record["id"]  # (a line has no id: its text is its key)
            if case.holdout is not None and is_held_out(held_out_key(key), case.holdout):
                continue
            kept.append(((number, int(record["id"].rsplit("-", 1)[1])), record["text"]))
    return kept


def make_data(case: Case, root: Path) -> Made:
    """The case's files under `root` (and its mix file, last)."""
    tokenizer = root / "tokenizer.json"
    owner = write_tokenizer(case, tokenizer)
    paths = [_write_leaf(case, number, leaf, root, str(tokenizer)) for number, leaf in enumerate(case.leaves)]
    if case.mixed:
        entries = [{"weight": w, "local_path": p, "stop": s} for w, p, s in zip(case.weights, paths, case.stops)]
        mix = root / "mix.json"
        mix.write_bytes(orjson.dumps({"by": case.by, "sources": entries}))
        paths.append(str(mix))
    universe = _universe(case)
    return Made(case, paths, str(tokenizer), owner, [tag for tag, _ in universe],
                {tag: len(text.split()) for tag, text in universe})
