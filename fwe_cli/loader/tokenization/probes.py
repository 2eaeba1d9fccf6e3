"""Probe texts on which two tokenizer backends must give identical ids before the fast one is trusted.

The set aims at the places where a byte-level BPE reimplementation can drift from `tokenizers`: the
pre-tokenizer regex (whitespace runs, contractions, digits, punctuation, every Unicode general category
through a code-point sampler), the BPE merge loop (very long words), added tokens inside the text
(whole, doubled, broken, glued to words), invalid text (lone surrogates) and empty documents. It is
deterministic, about 60 KB, and cheap enough to run at every load.

    python -m fwe_cli.loader.tokenization.probes      # prints the probe texts' count and size
"""

from __future__ import annotations

import random
from typing import Iterable

# A fixed sample of scripts and symbols: CJK, kana, hangul, Arabic, Hebrew, Devanagari, Bengali, Thai,
# Cyrillic, Greek, combining marks, emoji (ZWJ sequences, skin tones, flags), math and currency.
SCRIPT_SAMPLES = (
    "机器学习是人工智能的一个分支。数据集包含十亿个词元。",
    "これは日本語の文です。カタカナとひらがな、漢字。",
    "한국어 문장입니다. 토큰화 테스트.",
    "التعلم الآلي هو فرع من فروع الذكاء الاصطناعي، ١٢٣٤٥.",
    "למידת מכונה היא תחום במדעי המחשב.",
    "मशीन लर्निंग कृत्रिम बुद्धिमत्ता की एक शाखा है। १२३",
    "মেশিন লার্নিং কৃত্রিম বুদ্ধিমত্তার একটি শাখা।",
    "การเรียนรู้ของเครื่องเป็นสาขาหนึ่งของปัญญาประดิษฐ์",
    "Машинное обучение — это раздел искусственного интеллекта.",
    "Η μηχανική μάθηση είναι κλάδος της τεχνητής νοημοσύνης.",
    "Ça coûte 5 € — naïve café, Zürich, São Paulo, Ångström, e\u0301\u0301 a\u0308",
    "emoji 😀👍🏽 👩‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️‍🔥 🏳️‍🌈 1️⃣ 🤖🤖🤖",
    "∑∫√∞ ≤ ≥ ≠ ≈ ± × ÷ ½ ¾ ² ³ ℕ ℝ ∀x∃y £¥₹₿ ©®™ §¶ •…‰",
    "\u200b\u200c\u200d\ufeff\u00ad soft\u00adhyphen zero\u200bwidth",
)

WHITESPACE_SAMPLES = (
    "", " ", "  ", "   x", "x   ", "a  b", "a   b", "a\tb", "a\t\t b", "\n", "\n\n\n", "a\n\nb", "a \n b",
    "x\r\ny\r\n", "\u00a0a\u00a0\u00a0b", "a\u3000\u3000b", "a\u2028b\u2029c", "\u0085x\u000by\u000cz",
    " \t \n \r ", "word  ", "  word", "end with newline\n", "tabs\t\t\t", "mixed \u00a0\t\n ",
)

CONTRACTION_SAMPLES = (
    "I'm you're he's we'll they've she'd don't can't isn't", "I'M YOU'RE WE'LL 'S 'T 'Re", "'s's's", "''''",
    "rock'n'roll o'clock ma'am y'all", "it’s don’t (curly)", "12,345.67 1e10 0x1F 3.14159 10,000,000",
    "#hashtag @user https://example.com/a?b=c&d=e#f user@example.com", "C++ C# F# .NET node.js",
    "def f(x):\n    return x**2  # comment\n\n\tif (a && b) { c++; }",
)


def _long_words() -> tuple[str, ...]:
    rng = random.Random(7)
    letters = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6000))
    return (
        "a" * 5000, "ab" * 2500, letters, " " + letters[:3000], "1234567890" * 400, "!?" * 1500,
        "-" * 3000, "é" * 2000, "漢" * 2000, "😀" * 1000, " " * 4000, "\n" * 2000, "x" + " " * 3000 + "y",
        "supercalifragilisticexpialidocious" * 50, "https://" + "a/b" * 800,
    )


def _codepoint_sampler(step: int = 61, limit: int = 0x30000) -> tuple[str, ...]:
    """Code points 0..limit every `step` (surrogates excluded, planes 14-16 touched), each in contexts
    that exercise the letter/number/space classes of the split pattern, chunked into documents."""
    points = [c for c in range(0, limit, step) if not 0xD800 <= c <= 0xDFFF]
    points += [0xE0001, 0xE0020, 0xE0100, 0xF0000, 0x10FFFD, 0x10FFFF]
    pieces = [f"{chr(c)}a{chr(c)} {chr(c)}1{chr(c)}  {chr(c)}" for c in points]
    return tuple("".join(pieces[i : i + 200]) for i in range(0, len(pieces), 200))


def _random_mix(count: int = 30, seed: int = 11) -> tuple[str, ...]:
    """Documents drawn from a pool of characters that mixes every sample above with ASCII."""
    pool = "".join(SCRIPT_SAMPLES + WHITESPACE_SAMPLES + CONTRACTION_SAMPLES) + "abcdefghij ABC 0123 .,;:'\"!?-\n\t"
    rng = random.Random(seed)
    return tuple("".join(rng.choice(pool) for _ in range(rng.randint(0, 600))) for _ in range(count))


def special_token_samples(added: Iterable[str]) -> tuple[str, ...]:
    """Each added token whole, doubled, glued to words and spaces, and broken (which must stay text)."""
    out: list[str] = []
    for token in added:
        half = len(token) // 2
        out += [token, token + token, f"a{token}b", f" {token} ", f"text.{token}\n\nnext", f"{token[:-1]}",
                f"{token[1:]}", f"{token[:half]} {token[half:]}", f"x {token[:half]}{token}{token[half:]} y",
                f"  {token}  {token}", f"'s{token}'ll"]
    return tuple(out)


SURROGATE_SAMPLES = ("\ud800", "a\udfffb", "\ud83d\ude00 pair as two halves", "x\udc00\ud800y", "ok \ud834")


def probe_texts(added_tokens: Iterable[str] = ()) -> list[str]:
    """All probe documents, valid Unicode only (surrogates are probed separately, after the fix-up)."""
    return [*SCRIPT_SAMPLES, *WHITESPACE_SAMPLES, *CONTRACTION_SAMPLES, *_long_words(), *_codepoint_sampler(),
            *_random_mix(), *special_token_samples(added_tokens)]


if __name__ == "__main__":
    texts = probe_texts(["<|endoftext|>"])
    print(f"{len(texts)} probe texts, {sum(len(t) for t in texts)} characters, "
          f"{len(SURROGATE_SAMPLES)} surrogate samples")
