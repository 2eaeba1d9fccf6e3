"""Check on real text that GPT-2 built offline from the packaged vocabulary gives the Hub tokenizer's ids.

    python -m scripts.bench.check_gpt2_offline [--data ../shared/fineweb_real] [--hf-gpt2-dir DIR]
                                               [--out artifacts/bench]

The offline tokenizer (`packaged_gpt2_tokenizer_json`, loaded with `tokenizers`) is compared, document by
document, with references that do not go through it:

- tiktoken: tiktoken's GPT-2 BPE (another implementation) built as tiktoken_ext.openai_public.gpt2() builds it,
  from OpenAI's encoder.json / vocab.bpe (the packaged copies, checked against the sha256 tiktoken pins);
- token_count: fineweb_subset.json records each document's GPT-2 token count from the FineWeb pipeline, which
  counted with the Hub's gpt2 tokenizer.json (datatrove's TokensCounter): counts, not ids, and only for documents
  without an e-mail/IP placeholder (FineWeb anonymised those after counting);
- fwe-tiktoken: fwe's own tiktoken backend (`--tokenizer-backend tiktoken`), derived from that tokenizer.json and
  proven on probes before use: the loader's fast path must give the same ids on real text too;
- hf-files (with --hf-gpt2-dir): GPT-2 built the way transformers' GPT2Converter built the Hub's tokenizer.json,
  from the Hugging Face repo's own vocab.json + merges.txt (openai-whisper 20230124's sdist ships a copy under
  whisper/assets/gpt2/), through `tokenizers`.

Texts: every file of the data directory that holds text (fineweb_subset.json, training_data.csv,
fineweb_sample.txt cut into 2,000-character pieces and also whole, other_web/*.parquet). Writes a JSON summary
(docs and tokens compared per source and reference, mismatches) to artifacts/bench/check_gpt2_offline-<UTC>.json
and its totals to stderr; exit 1 on a mismatch.
"""

from __future__ import annotations

import csv
import functools
import glob
import json
import os
import re
import sys
import tempfile
import time

from fwe_cli.loader.tokenization.gpt2_vocab import (
    ENCODER_JSON_SHA256, EOT, VOCAB_BPE_SHA256, packaged_gpt2_tokenizer_json, verified_vocab_files)
from scripts.bench import harness
from scripts.bench.corpus import REAL_DIR
from scripts.bench.harness import say

NAME = "check_gpt2_offline"


# FineWeb anonymised e-mail and IP addresses after counting tokens: documents holding a placeholder were counted
# on other text. (Measured: all 9 of 300 whose count differs hold one; 3 others with one still match.)
PII_PLACEHOLDER = re.compile(r"@example\.(?:com|org)|\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")


def read_texts(data: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    subset = os.path.join(data, "fineweb_subset.json")
    if os.path.isfile(subset):
        out["fineweb_subset.json"] = [r["text"] for r in json.load(open(subset, encoding="utf-8"))]
    table = os.path.join(data, "training_data.csv")
    if os.path.isfile(table):
        csv.field_size_limit(1 << 30)
        with open(table, encoding="utf-8", newline="") as handle:
            out["training_data.csv"] = [row["text"] for row in csv.DictReader(handle)]
    sample = os.path.join(data, "fineweb_sample.txt")
    if os.path.isfile(sample):
        stream = open(sample, encoding="utf-8").read()
        out["fineweb_sample.txt (2,000-char pieces)"] = [stream[i : i + 2000] for i in range(0, len(stream), 2000)]
        out["fineweb_sample.txt (whole)"] = [stream]
    parquets = sorted(glob.glob(os.path.join(data, "other_web", "*.parquet")))
    if parquets:
        import pyarrow.parquet as pq

        out["other_web/*.parquet (C4)"] = [t for p in parquets for t in pq.read_table(p, columns=["text"])["text"].to_pylist()]
    return out


@functools.lru_cache(maxsize=1)
def gpt2_reference_encoding():
    """tiktoken's GPT-2 encoding as tiktoken_ext.openai_public.gpt2() builds it (tiktoken's data-gym loader and split
    pattern, `<|endoftext|>` as 50256) from the packaged encoder.json / vocab.bpe, never from a tokenizer.json. The
    files' sha256 are checked by `verified_vocab_files` (tiktoken's own check is off with its cache off, which keeps
    it from copying local files). One reference for this check and the tests (tests/loader/test_gpt2_offline.py,
    tests/tokens/support.py)."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import r50k_pat_str

    encoder, merges = verified_vocab_files()
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    try:
        ranks = data_gym_to_mergeable_bpe_ranks(merges, encoder, VOCAB_BPE_SHA256, ENCODER_JSON_SHA256)
    finally:
        os.environ.pop("TIKTOKEN_CACHE_DIR") if saved is None else os.environ.update(TIKTOKEN_CACHE_DIR=saved)
    return tiktoken.Encoding("gpt2-reference", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={EOT: 50256})


def tiktoken_reference():
    enc = gpt2_reference_encoding()
    return lambda texts: [enc.encode(t, allowed_special="all") for t in texts]


def hf_files_reference(directory: str):
    """GPT-2 as GPT2Converter builds it from the Hub repo's vocab.json / merges.txt."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = json.load(open(os.path.join(directory, "vocab.json"), encoding="utf-8"))
    lines = open(os.path.join(directory, "merges.txt"), encoding="utf-8").read().split("\n")
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]
    tok = Tokenizer(models.BPE(vocab, merges, dropout=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(EOT, special=True)])
    return lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def compare(got: list[list[int]], expected: list[list[int]], texts: list[str]) -> dict:
    bad = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    row = {"docs": len(texts), "chars": sum(map(len, texts)), "tokens": sum(map(len, expected)),
           "docs_differing": len(bad)}
    if bad:
        row["first_difference"] = {"doc": bad[0], "text": texts[bad[0]][:200]}
    return row


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--data", default=str(REAL_DIR), help="the real text (default ../shared/fineweb_real)")
    parser.add_argument("--hf-gpt2-dir", help="a directory with the Hub repo's vocab.json and merges.txt")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    from tokenizers import Tokenizer

    from fwe_cli.loader.tokenization.doc_tokenizer import HFTokenizer, load_tokenizer

    built = packaged_gpt2_tokenizer_json(tempfile.mkdtemp())
    offline = HFTokenizer(Tokenizer.from_file(built), "gpt2")
    fast = load_tokenizer(built, backend="tiktoken")
    references = {"tiktoken": tiktoken_reference(), "fwe-tiktoken": lambda texts: [fast.encode(t) for t in texts]}
    if args.hf_gpt2_dir:
        references["hf-files"] = hf_files_reference(args.hf_gpt2_dir)
    sources = read_texts(args.data)
    if not sources:
        sys.exit(f"no text found under {args.data}")
    report: dict = {"data": os.path.abspath(args.data), "references": sorted(references), "sources": {}}
    ok = True
    t0 = time.perf_counter()
    for name, texts in sources.items():
        got = [offline.encode(t) for t in texts]
        rows = {ref: compare(got, encode(texts), texts) for ref, encode in references.items()}
        ok &= all(r["docs_differing"] == 0 for r in rows.values())
        if name == "fineweb_subset.json":
            counts = [r["token_count"] for r in json.load(open(os.path.join(args.data, name), encoding="utf-8"))]
            clean = [i for i, t in enumerate(texts) if not PII_PLACEHOLDER.search(t)]
            off = [i for i in clean if len(got[i]) != counts[i]]
            rewritten = [i for i in range(len(texts)) if i not in set(clean)]
            rows["token_count"] = {"docs": len(clean), "tokens": sum(counts[i] for i in clean), "docs_differing": len(off),
                                   "skipped_pii_rewritten_docs": len(rewritten),
                                   "of_which_count_differs": sum(len(got[i]) != counts[i] for i in rewritten)}
            ok &= not off
        report["sources"][name] = rows
    report["totals"] = {ref: {"docs": sum(s[ref]["docs"] for s in report["sources"].values() if ref in s),
                              "tokens": sum(s[ref]["tokens"] for s in report["sources"].values() if ref in s),
                              "docs_differing": sum(s[ref]["docs_differing"] for s in report["sources"].values()
                                                    if ref in s)}
                        for ref in [*references, "token_count"]}
    report["identical"] = ok
    report["seconds"] = round(time.perf_counter() - t0, 2)
    harness.write_result(NAME, args, report)
    say(f"{json.dumps(report['totals'], indent=1)}\nidentical: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
