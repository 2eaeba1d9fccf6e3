"""The loader reads a token directory (pre-tokenized llm.c shards + manifest) directly: the same batches as the text
path gives from the same documents, no tokenizer loaded, and a directory that is not what its manifest says refused
with a line naming what is wrong."""

from __future__ import annotations

import os

import numpy as np
import orjson
import pytest

import fwe_cli.loader.pipeline.producer as pipeline
from fwe_cli.errors import ConfigError, InputError, SourceError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.stream import DocumentStream
from tests.helpers import invoke, write_jsonl
from tests.loader.token_dirs import write_token_dir

DOCS_PER_SHARD = 70
SETTINGS = {"in order": {}, "shard 1 of 3": {"shard_mod": 3, "shard_rem": 1},
            "shuffled, 2 epochs": {"shuffle_seed": 7, "shuffle_window": 30, "epochs": 2}}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """240 documents as JSONL files of DOCS_PER_SHARD records each (a shuffle permutes files: the text side must
    have the token side's files) and as byte and GPT-2 token directories of shards of DOCS_PER_SHARD documents."""
    root = tmp_path_factory.mktemp("tokdir")
    docs = [synthetic_record(5, i) for i in range(240)]
    docs[3] = {**docs[3], "text": ""}  # an empty document: just its end-of-text
    (root / "text").mkdir()
    for number, first in enumerate(range(0, len(docs), DOCS_PER_SHARD)):
        write_jsonl(root / "text" / f"part{number}.jsonl", docs[first:first + DOCS_PER_SHARD])
    for tokenizer in ("byte", "gpt2"):
        write_token_dir(root / tokenizer, [d["text"] for d in docs], tokenizer, DOCS_PER_SHARD)
    return root


def batches(path, **settings):
    with FineWebLoader(resolve_config(env={}, local_path=str(path), seq_len=128, batch_size=4, **settings)) as loader:
        return [np.array(b) for b in loader], loader.stats()


@pytest.mark.parametrize("tokenizer", ["byte", "gpt2"])
def test_token_dir_batches_equal_the_text_paths_in_order(data, tokenizer, monkeypatch):
    """Same documents read in order: the token directory gives the text path's batches exactly, to the last full
    batch, and loads no tokenizer."""
    text, _ = batches(data / "text", tokenizer=tokenizer)
    monkeypatch.setattr(pipeline, "load_tokenizer", lambda *a, **k: pytest.fail("the tokenizer was loaded"))
    tokens, stats = batches(data / tokenizer, tokenizer=tokenizer)
    assert len(text) > 10 and len(tokens) == len(text)
    for i, (a, b) in enumerate(zip(text, tokens)):
        assert b.dtype == np.int32 and np.array_equal(a, b), f"batch {i} differs"
    assert stats["tokenizer"]["backend"] == "token-shards" and stats["source"]["format"] == "fwe-tokens/1"


@pytest.mark.parametrize("name", [name for name in SETTINGS if name != "in order"])
def test_token_dir_readers_and_epochs_hold_every_document_once(data, name, monkeypatch):
    """Dealt to 3 readers, or shuffled over 2 epochs: each reader's documents are the shards' own (dealt by where
    their tokens lie), the readers' together every document once, each shuffled epoch every document once; the same
    on a second run, and no tokenizer is loaded."""
    monkeypatch.setattr(pipeline, "load_tokenizer", lambda *a, **k: pytest.fail("the tokenizer was loaded"))
    settings = SETTINGS[name]
    readers = settings.get("shard_mod", 1)
    config = resolve_config(env={}, local_path=str(data / "byte"), **{k: v for k, v in settings.items()
                                                                      if not k.startswith("shard")})
    streams = [[d.id for d in DocumentStream(config.replace(shard=Shard(readers, r)))] for r in range(readers)]
    shards = sorted(map(str, (data / "byte").glob("*.bin")))
    every = [f"{path}#{i}" for n, path in enumerate(shards) for i in range(min(DOCS_PER_SHARD, 240 - n * DOCS_PER_SHARD))]
    assert all(streams)
    if readers > 1:
        assert sorted(sum(streams, [])) == sorted(every)
    else:
        epochs = [streams[0][e * len(every):(e + 1) * len(every)] for e in range(settings["epochs"])]
        assert all(sorted(epoch) == sorted(every) for epoch in epochs) and epochs[0] != epochs[1] != every
    assert streams == [[d.id for d in DocumentStream(config.replace(shard=Shard(readers, r)))]
                       for r in range(readers)]


def test_tokenizer_defaults_to_the_manifests_and_smoke_passes(data, tmp_path):
    """Without --tokenizer, a token directory is read with the tokenizer it was made with; `fwe smoke --local-path
    TOKDIR` exits 0 with its checks (id range, separators) made against the manifest's vocab size and eos id."""
    config = resolve_config(env={}, local_path=str(data / "gpt2"))
    assert config.tokenizer is None and DocumentStream(config).tokenizer() == "gpt2"  # read from disk once opened
    smoke = invoke("smoke", "--local-path", str(data / "gpt2"), "--seq-len", "128", "--batch", "2", "--json",
                   "--artifacts-dir", str(tmp_path / "artifacts"))
    assert smoke.exit_code == 0, smoke.stderr
    result = orjson.loads(smoke.stdout)
    assert result["tokenizer"]["vocab_size"] == 50257 and result["tokenizer"]["eos_id"] == 50256
    assert result["checks"] and all(check["ok"] for check in result["checks"])


def test_another_tokenizer_is_refused_naming_both(data, tmp_path):
    """--tokenizer byte on a GPT-2 token directory: a ConfigError naming both tokenizers; the CLI says it in one
    line and exits 2."""
    with pytest.raises(ConfigError, match=r"tokenized with 'gpt2', not --tokenizer 'byte'"):
        batches(data / "gpt2", tokenizer="byte")
    refused = invoke("smoke", "--local-path", str(data / "gpt2"), "--tokenizer", "byte",
                     "--artifacts-dir", str(tmp_path / "artifacts"))
    assert refused.exit_code == 2 and "'gpt2'" in refused.stderr and "'byte'" in refused.stderr
    assert resolve_config(env={}, local_path=str(data / "gpt2"), tokenizer="openai-community/gpt2")  # an alias


def copy_dir(src, dst):
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def test_a_shard_of_another_size_is_refused_naming_it(data, tmp_path):
    """A shard whose size differs from its manifest's is refused before anything is read, naming it; with
    verify_parts a shard of the right size but other bytes is refused too."""
    damaged = copy_dir(data / "byte", tmp_path / "damaged")
    shard = damaged / "fineweb_train_000002.bin"
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(InputError, match="fineweb_train_000002.bin: .* bytes, manifest says"):
        batches(damaged)
    flipped = copy_dir(data / "byte", tmp_path / "flipped")
    body = bytearray((flipped / "fineweb_train_000001.bin").read_bytes())
    body[-1] ^= 1
    (flipped / "fineweb_train_000001.bin").write_bytes(bytes(body))
    with pytest.raises(InputError, match="fineweb_train_000001.bin: sha256 differs"):
        batches(flipped, verify_parts=True)


def test_an_incomplete_token_dir_is_refused_unless_allow_partial(data, tmp_path):
    """A manifest with complete=false is refused (saying how to finish it) unless allow_partial, which reads the
    shards it lists."""
    partial = copy_dir(data / "byte", tmp_path / "partial")
    manifest = orjson.loads((partial / "manifest.json").read_bytes())
    manifest.update(complete=False, shards=manifest["shards"][:2])
    (partial / "manifest.json").write_bytes(orjson.dumps(manifest))
    with pytest.raises(SourceError, match="incomplete .* --allow-partial"):
        batches(partial)
    read, stats = batches(partial, allow_partial=True)
    assert read and stats["docs"] == 2 * DOCS_PER_SHARD


def test_a_bootstrap_is_read_from_the_shards_made_from_it(tmp_path):
    """After `fwe bootstrap --tokenize byte`, `--local-path OUT --tokenizer byte` reads OUT/tokens (no tokenizer
    runs, a note says so) and gives the text path's batches; without --tokenizer, or once a part has changed since
    the shards were made, the text is read."""
    import os

    import numpy as np
    import pytest

    from fwe_cli.errors import FweNotice

    out = tmp_path / "boot"
    made = invoke("bootstrap", "--source", "synthetic", "--gb", "0.001", "--out", str(out), "--tokenize", "byte",
                  "--artifacts-dir", str(tmp_path / "a"))
    assert made.exit_code == 0, made.stderr

    def smoke(*extra):
        result = invoke("smoke", "--local-path", str(out), "--seq-len", "64", "--batch", "2", "--batches", "4",
                        "--save-batches", str(tmp_path / "b.npz"), "--json", "--artifacts-dir", str(tmp_path / "a"),
                        *extra)
        assert result.exit_code == 0, result.stderr
        return orjson.loads(result.stdout), np.load(tmp_path / "b.npz")["batches"]

    with pytest.warns(FweNotice, match="token shards made from this bootstrap"):
        shards, from_shards = smoke("--tokenizer", "byte")
    assert shards["tokenizer"]["backend"] == "token-shards"
    assert shards["source"]["read_from"] == str(out / "tokens")
    text, from_text = smoke()
    assert text["tokenizer"]["backend"] == "byte" and "read_from" not in text["source"]
    assert np.array_equal(from_shards, from_text)
    part = out / "part-00000.jsonl"
    os.utime(part, ns=(part.stat().st_atime_ns, part.stat().st_mtime_ns + 10**9))  # the bootstrap changed since
    changed, _ = smoke("--tokenizer", "byte")
    assert changed["tokenizer"]["backend"] == "byte"


def test_a_token_directory_is_matched_by_its_vocabulary_not_its_tokenizers_name(tmp_path, gpt2_tokenizer_json):
    """Tokenized with --tokenizer tok/tokenizer.json: the same vocabulary written another way (a reformatted copy, as
    GPT-2 built offline differs from the Hub's file) reads the shards; a different vocabulary later written under the
    very name the manifest records is refused naming both, where a match by name let it through."""
    import json
    import shutil

    from fwe_cli.tokens.run import run_tokenize, tokenize_config

    tok = tmp_path / "tok" / "tokenizer.json"
    tok.parent.mkdir()
    shutil.copy(gpt2_tokenizer_json, tok)
    docs = write_jsonl(tmp_path / "docs.jsonl", [{"text": f"document number {i} about tokens"} for i in range(20)])
    out = tmp_path / "tokens"
    run_tokenize(tokenize_config(str(docs), str(out), str(tok)))
    data = json.loads(tok.read_text())
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(data, indent=1, sort_keys=True))  # other bytes, same ids
    same = invoke("smoke", "--local-path", str(out), "--tokenizer", str(copy), "--seq-len", "32", "--batches", "1",
                  "--artifacts-dir", str(tmp_path / "a"))
    assert same.exit_code == 0, same.stderr
    data["model"]["merges"] = data["model"]["merges"][:-1]  # another vocabulary under the recorded name
    tok.write_text(json.dumps(data))
    other = invoke("smoke", "--local-path", str(out), "--tokenizer", str(tok), "--seq-len", "32", "--batches", "1",
                   "--artifacts-dir", str(tmp_path / "a"))
    assert other.exit_code == 2 and "was tokenized with" in other.stderr, other.stderr
