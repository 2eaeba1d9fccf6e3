"""The tiktoken backend gives exactly the ids of `tokenizers` for GPT-2: on generated text, on adversarial text
(each kind separately, so a failure names it) and on every Unicode code point. Real FineWeb text is checked by
scripts/bench/check_gpt2_offline.py (its `fwe-tiktoken` reference): the data lies outside the repository."""

import random

import numpy as np
import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer
from fwe_cli.loader.tokenization.tiktoken_backend import replace_lone_surrogates

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def pair(gpt2_tokenizer_json):
    """(tiktoken backend, tokenizers backend) for GPT-2; loading the first runs the whole proof."""
    fast = load_tokenizer(gpt2_tokenizer_json, backend="tiktoken")
    assert fast.backend == "tiktoken"
    return fast, load_tokenizer(gpt2_tokenizer_json, backend="tokenizers")


def assert_same(pair, texts, what):
    fast, hf = pair
    a, b = fast.encode_docs(texts), hf.encode_docs(texts)
    assert a.dtype == np.int32
    assert len(a) == len(b) and np.array_equal(a, b), f"{what}: stream ids differ"
    for text in texts:
        assert fast.encode(text) == hf.encode(text), f"{what}: ids differ for {text[:60]!r}"
    return a


def test_generated_fineweb_records(pair):
    """200 synthetic FineWeb-Edu documents give identical id streams (and really hold ~100k tokens)."""
    ids = assert_same(pair, [synthetic_record(3, i)["text"] for i in range(200)], "synthetic records")
    assert len(ids) > 50_000


def test_special_tokens_inside_text(pair):
    """<|endoftext|> written in a document is the special id 50256 in both, whole or glued; broken halves stay text."""
    texts = [EOT, f"a{EOT}b", f"{EOT}{EOT}", f" {EOT} ", f"x{EOT[:-1]}", f"{EOT[1:]}y", f"<|{EOT}|>", "<|endoftext"]
    fast, _ = pair
    assert fast.encode(f"a{EOT}b").count(50256) == 1 and 50256 not in fast.encode("<|endoftext")
    assert_same(pair, texts, "special tokens")


def test_whitespace_runs(pair):
    """Runs of spaces, tabs, newlines, NBSP and ideographic spaces, at the start, middle and end of documents."""
    texts = [" " * n + "x" + " " * n for n in range(0, 9)] + ["a\n\n\n\nb", "\t\t x \t", "\u00a0\u00a0a \u3000 b  ",
                                                                 "x \n", "\r\n\r\n", "   ", "\n", " \u2028 \u2029 "]
    assert_same(pair, texts, "whitespace")


def test_very_long_words(pair):
    """Pieces of thousands of bytes (letters, digits, punctuation, one repeated character, random letters)."""
    rng = random.Random(5)
    texts = ["a" * 20_000, "ab" * 7_000, "9" * 12_000, "!" * 9_000, "é" * 5_000,
             "".join(rng.choice("qwertyuiopasdfghjklzxcvbnm") for _ in range(30_000))]
    assert_same(pair, texts, "long words")


def test_non_latin_scripts_and_emoji(pair):
    """CJK, Arabic, Devanagari, Thai, Hebrew, Cyrillic, combining marks, ZWJ emoji sequences, flags, skin tones."""
    texts = ["机器学习是人工智能的一个分支。", "التعلم الآلي هو فرع من الذكاء الاصطناعي ١٢٣", "मशीन लर्निंग कृत्रिम बुद्धिमत्ता है। १२३",
             "การเรียนรู้ของเครื่อง", "למידת מכונה", "Машинное обучение", "e\u0301\u0301 a\u0308 ñ",
             "👩‍👩‍👧‍👦 👍🏽 🇫🇷🇯🇵 ❤️‍🔥 1️⃣", "漢字かなカナ한국어 mixed with English 123"]
    assert_same(pair, texts, "scripts and emoji")


def test_lone_surrogates_become_replacement_characters(pair):
    """Invalid Unicode (lone surrogate halves) is encoded as U+FFFD by both backends instead of failing; a pair of
    halves is joined into its character."""
    fast, hf = pair
    texts = ["\ud800", "a\udfffb", "x\udc00\ud800y", "\ud83d\ude00"]
    assert_same(pair, texts, "lone surrogates")
    assert fast.encode("a\udfffb") == hf.encode("a\ufffdb")
    assert fast.encode("\ud83d\ude00") == hf.encode("😀")
    assert replace_lone_surrogates("a\ud800") == "a\ufffd"


def test_empty_documents(pair):
    """An empty document is just the end-of-document id, in any position."""
    fast, _ = pair
    assert fast.encode_docs([""]).tolist() == [50256]
    assert fast.encode_docs([]).tolist() == []
    assert_same(pair, ["", "", "a", "", " "], "empty documents")


def test_every_code_point(pair):
    """Every code point of planes 0-3 and 14 and a sample of 15-16, in letter/number/space contexts: the split
    regex and byte-level BPE agree on all Unicode classes (catches Unicode-version drift between the engines)."""
    points = [c for c in range(0x32400) if not 0xD800 <= c <= 0xDFFF]
    points += list(range(0xE0000, 0xE0200)) + list(range(0xF0000, 0x110000, 4099))
    docs = ["".join(f"{chr(c)}a{chr(c)} {chr(c)}1 {chr(c)}{chr(c)}\n" for c in points[i : i + 512])
            for i in range(0, len(points), 512)]
    fast, hf = pair
    a, b = fast.encode_docs(docs), hf.encode_docs(docs)
    assert len(a) > 500_000
    if not np.array_equal(a, b):
        bad = next(d for d in docs if fast.encode(d) != hf.encode(d))
        pytest.fail(f"ids differ in the chunk starting with {bad[:1]!r} (U+{ord(bad[0]):04X})")
