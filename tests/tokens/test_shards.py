"""What `fwe tokenize` writes: llm.c's shard format, ids equal to an independent GPT-2 encoder, whole documents per
shard, a document index that points at each document's end-of-text token, and uint32 for big vocabularies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.files.token_shards import HEADER_BYTES, MAGIC, read_shard
from tests.helpers import write_jsonl
from tests.tokens.support import GPT2_EOT, LITERAL_EOT, core_run, manifest_of, reference_gpt2


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Synthetic FineWeb-Edu documents plus the awkward ones: the literal end-of-text string inside a text (twice,
    once at the end), an empty text, non-ASCII and whitespace runs."""
    docs = [synthetic_record(11, i)["text"] for i in range(120)]
    docs[3] = f"before {LITERAL_EOT} middle{LITERAL_EOT}"
    docs[4] = ""
    docs[5] = "naïve café — 東京 🚀\n\n\n   tabs\tand  spaces  "
    return docs


@pytest.fixture(scope="module")
def gpt2_out(tmp_path_factory, texts, gpt2_tokenizer_json) -> Path:
    tmp = tmp_path_factory.mktemp("gpt2")
    src = write_jsonl(tmp / "docs.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    out = tmp / "out"
    core_run(src, out, gpt2_tokenizer_json, shard_tokens=8_000)
    return out


def _shards(out: Path) -> list[Path]:
    return [out / s["name"] for s in manifest_of(out)["shards"]]


def test_header_fields_are_llm_c_s(gpt2_out):
    """Every shard starts with 256 little-endian int32: magic 20240520, version 1 (uint16 for GPT-2), the token
    count, zeros; the file is exactly the header plus 2 bytes per token."""
    for path in _shards(gpt2_out):
        head = np.fromfile(path, dtype="<i4", count=256)
        assert head[0] == MAGIC and head[1] == 1 and (head[3:] == 0).all()
        assert path.stat().st_size == HEADER_BYTES + 2 * int(head[2])


def test_tokens_equal_an_independent_gpt2_encoder(gpt2_out, texts):
    """The shards' tokens, concatenated in order, equal id for id [eot] + GPT-2(doc) for every document, computed by
    an encoder that shares no code with fwe (tiktoken's GPT-2 built from OpenAI's vocabulary files)."""
    got = np.concatenate([read_shard(str(p))[0] for p in _shards(gpt2_out)]).astype(np.int64)
    want = reference_gpt2(texts)
    assert len(got) == len(want)
    assert np.array_equal(got, want)


def test_index_points_at_each_document_and_shards_hold_whole_documents(gpt2_out, texts):
    """Each shard's index lists the offset of each of its documents' leading end-of-text token; cut there, the
    shards give back every document's reference ids in order, none split across shards, and no shard passes
    --shard-tokens (no document here is longer)."""
    manifest = manifest_of(gpt2_out)
    docs = []
    for entry, path in zip(manifest["shards"], _shards(gpt2_out)):
        tokens, offsets = read_shard(str(path))
        assert len(offsets) == entry["documents"] and len(tokens) == entry["tokens"] <= 8_000
        assert (tokens[offsets] == GPT2_EOT).all()
        docs += np.split(np.asarray(tokens, dtype=np.int64), offsets[1:])
    assert len(docs) == len(texts) == manifest["totals"]["documents"]
    for doc, text in zip(docs, texts):
        assert np.array_equal(doc, reference_gpt2([text]))


def test_manifest_records_tokenizer_format_and_totals(gpt2_out, gpt2_tokenizer_json):
    """The manifest says what the shards are: format, tokenizer (spec, sha256 of its tokenizer.json, vocab size,
    eot), dtype/version, each shard's tokens/documents/bytes/sha256, totals, the source, and complete."""
    import hashlib

    m = manifest_of(gpt2_out)
    assert m["format"] == "fwe-tokens/1" and m["complete"] is True
    assert m["tokenizer"]["vocab_sha256"] == hashlib.sha256(Path(gpt2_tokenizer_json).read_bytes()).hexdigest()
    assert (m["vocab_size"], m["eot"], m["version"], m["dtype"]) == (50257, GPT2_EOT, 1, "uint16")
    assert m["totals"]["tokens"] == sum(s["tokens"] for s in m["shards"]) and len(m["shards"]) >= 4
    for s in m["shards"]:
        path = gpt2_out / s["name"]
        assert s["bytes"] == path.stat().st_size
        assert s["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert m["source"]["kind"] == "local" and m["source"]["files"][0]["path"].endswith("docs.jsonl")


def test_a_document_longer_than_a_shard_gets_a_shard_of_its_own(tmp_path):
    """Shards hold whole documents: one longer than --shard-tokens is written alone, not split."""
    texts = ["a" * 50, "b" * 3_000, "c" * 50]
    src = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in texts])
    core_run(src, tmp_path / "out", "byte", shard_tokens=1_000)
    sizes = [s["tokens"] for s in manifest_of(tmp_path / "out")["shards"]]
    assert sizes == [51, 3_001, 51]


def test_big_vocabulary_is_written_as_uint32_version_2(tmp_path):
    """A vocabulary over 65,535 ids (a word-level tokenizer.json of 70,002 tokens built here) gives version-2
    shards of uint32 tokens, ids above 65,535 intact."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(70_000)}
    vocab["[UNK]"] = 70_000
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([LITERAL_EOT])
    tok.save(str(tmp_path / "tokenizer.json"))
    eot = 70_001
    texts = ["w1 w69999 w65536", "w65535 w0", f"w70000x w7 {LITERAL_EOT} w65537"]
    src = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in texts])
    core_run(src, tmp_path / "out", str(tmp_path / "tokenizer.json"), shard_tokens=1_000)
    m = manifest_of(tmp_path / "out")
    assert (m["version"], m["dtype"], m["vocab_size"], m["eot"]) == (2, "uint32", 70_002, eot)
    shard = tmp_path / "out" / m["shards"][0]["name"]
    assert np.fromfile(shard, dtype="<i4", count=2)[1] == 2
    tokens, offsets = read_shard(str(shard))
    assert tokens.dtype == np.dtype("<u4")
    assert tokens.tolist() == [eot, 1, 69_999, 65_536, eot, 65_535, 0, eot, 70_000, 7, eot, 65_537]
    assert offsets.tolist() == [0, 4, 7]
