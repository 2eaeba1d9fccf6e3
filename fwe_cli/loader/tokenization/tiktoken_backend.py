"""tiktoken as a fast backend for GPT-2-style byte-level BPE tokenizers, used only where its ids are provably
those of `tokenizers`.

`try_tiktoken(path, hf)` reads the tokenizer.json that `hf` (an HFTokenizer) was loaded from and either
returns a TiktokenTokenizer or raises NotExpressible with the reason. It goes through four gates:

1. Structure. Model BPE without dropout, subword prefix/suffix or byte fallback, merges honoured
   (ignore_merges false); no normalizer; a ByteLevel pre-tokenizer with GPT-2's split regex and no prefix
   space; a post-processor that adds nothing when add_special_tokens is false; no truncation or padding;
   added tokens that match plainly (no lstrip/rstrip/single_word, one `normalized` setting, none a prefix
   of another, so tiktoken's leftmost alternation and tokenizers' leftmost-longest scan pick the same).
2. Ranks. Every vocabulary string is made of the 256 byte-level characters; all 256 bytes are present;
   each merge (a, b) yields a vocabulary token whose id grows strictly with the merge's position. tiktoken
   merges the adjacent pair whose concatenation has the lowest id; with this order its priorities are
   those of the merge list.
3. Vocabulary. tiktoken differs from merge-list BPE only by (i) taking a whole piece that is in the
   vocabulary at once and (ii) merging an adjacent pair (x, y) whose concatenation t is a token although
   (x, y) is not a listed merge. Both are ruled out by checking that the `tokenizers` model turns every
   token's own characters back into that one token: a state [.., x, y, ..] with x+y = t covering exactly
   t's bytes is one the merge list also reaches on t alone, where it would stop at [x, y]. The check runs
   over the whole vocabulary, one encode per token.
4. Probes. `fwe_cli.loader.tokenization.probes` texts (scripts, a code-point sampler, whitespace runs, long words,
   added tokens in text, lone surrogates, empty documents) give identical ids through both encode_docs.

Lone surrogates (invalid Unicode) are replaced by U+FFFD in both backends before encoding (tiktoken's own
rule; `tokenizers` would reject the text), so both agree on them too.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import orjson

from fwe_cli.loader.tokenization.probes import SURROGATE_SAMPLES, probe_texts

# GPT-2's split regex as tiktoken's r50k_base writes it: the same matches as the original
# r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""", with possessive
# quantifiers that run faster. Checked against tokenizers' ByteLevel on every code point (tests).
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

# Post-processors that add nothing when encode() is called with add_special_tokens=False.
INERT_POST_PROCESSORS = {None, "ByteLevel", "TemplateProcessing", "RobertaProcessing", "BertProcessing"}


class NotExpressible(Exception):
    """tiktoken cannot be shown to give this tokenizer's ids; the message says why."""


def byte_level_alphabet() -> dict[str, int]:
    """The byte-level character of each byte -> the byte: printable Latin-1 bytes stand for themselves,
    the other 68 bytes, in increasing order, for the characters 256, 257, ..."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {chr(b): b for b in printable}
    shifted = (b for b in range(256) if b not in chars.values())
    for offset, b in enumerate(shifted):
        chars[chr(256 + offset)] = b
    return chars


def replace_lone_surrogates(text: str) -> str:
    """Pair up surrogate halves and replace the lone ones with U+FFFD (what tiktoken does on its own)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _check_structure(spec: dict, hf_tokenizer) -> None:
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        raise NotExpressible(f"model is {model.get('type')!r}, not BPE")
    for key, ok in (("dropout", (None,)), ("continuing_subword_prefix", (None, "")),
                    ("end_of_word_suffix", (None, "")), ("byte_fallback", (None, False)),
                    ("ignore_merges", (None, False))):
        if model.get(key) not in ok:
            raise NotExpressible(f"BPE {key} is {model.get(key)!r}")
    if spec.get("normalizer") is not None:
        raise NotExpressible(f"has a normalizer ({spec['normalizer'].get('type')})")
    pre = spec.get("pre_tokenizer")
    if pre and pre.get("type") == "Sequence" and len(pre.get("pretokenizers", [])) == 1:
        pre = pre["pretokenizers"][0]
    if not pre or pre.get("type") != "ByteLevel":
        raise NotExpressible(f"pre-tokenizer is {pre and pre.get('type')!r}, not ByteLevel")
    if pre.get("add_prefix_space"):
        raise NotExpressible("ByteLevel pre-tokenizer adds a prefix space")
    if not pre.get("use_regex", True):
        raise NotExpressible("ByteLevel pre-tokenizer does not split with GPT-2's regex (use_regex false)")
    post = spec.get("post_processor")
    if (post or {}).get("type") not in INERT_POST_PROCESSORS:
        raise NotExpressible(f"post-processor {post.get('type')!r} is not known to leave ids alone")
    for key in ("truncation", "padding"):
        if spec.get(key) is not None:
            raise NotExpressible(f"tokenizer.json sets {key}")
    if getattr(hf_tokenizer, "encode_special_tokens", False):
        raise NotExpressible("encode_special_tokens is on (added tokens are not split out of the text)")
    added = spec.get("added_tokens") or []
    for tok in added:
        if tok.get("lstrip") or tok.get("rstrip") or tok.get("single_word") or not tok.get("content"):
            raise NotExpressible(f"added token {tok.get('content')!r} strips, is single_word or is empty")
    if len({bool(tok.get("normalized")) for tok in added}) > 1:
        raise NotExpressible("added tokens mix normalized and not normalized (two matching passes)")
    contents = sorted(tok["content"] for tok in added)
    for a, b in zip(contents, contents[1:]):
        if b.startswith(a):
            raise NotExpressible(f"added token {a!r} is a prefix of {b!r}")


def _merge_pairs(merges: list) -> list[tuple[str, str]]:
    pairs = []
    for merge in merges:
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if len(parts) != 2:
            raise NotExpressible(f"merge {merge!r} is not a pair")
        pairs.append((parts[0], parts[1]))
    return pairs


def mergeable_ranks(spec: dict) -> tuple[dict[bytes, int], dict[str, int]]:
    """(bytes -> id of every BPE token, added token content -> id), checked as gate 2 says."""
    vocab: dict[str, int] = spec["model"]["vocab"]
    added = {tok["content"]: tok["id"] for tok in spec.get("added_tokens") or []}
    added_ids = set(added.values())
    if len(set(vocab.values())) != len(vocab):
        raise NotExpressible("vocabulary has repeated ids")
    alphabet = byte_level_alphabet()
    outside = set("".join(vocab)) - alphabet.keys()
    to_latin1 = str.maketrans({ch: chr(b) for ch, b in alphabet.items()})
    ranks: dict[bytes, int] = {}
    for token, index in vocab.items():
        if index in added_ids:
            if added.get(token) != index:
                raise NotExpressible(f"id {index} is both vocabulary token {token!r} and another added token")
            continue
        if outside and not outside.isdisjoint(token):
            raise NotExpressible(f"vocabulary token {token!r} is not byte-level")
        ranks[token.translate(to_latin1).encode("latin-1")] = index  # byte-level chars -> their bytes
    if any(bytes([b]) not in ranks for b in range(256)):
        raise NotExpressible("vocabulary lacks some of the 256 byte tokens")
    pairs = _merge_pairs(spec["model"].get("merges") or [])
    merged = np.array([vocab.get(a + b, -1) if a in vocab and b in vocab else -1 for a, b in pairs], dtype=np.int64)
    for k in np.flatnonzero((merged < 0) | np.isin(merged, list(added_ids)))[:1]:
        raise NotExpressible(f"merge {pairs[k][0]!r} + {pairs[k][1]!r} does not yield a BPE vocabulary token")
    for k in np.flatnonzero(np.diff(merged) <= 0)[:1]:
        a, b = pairs[k + 1]
        raise NotExpressible(f"merge {a!r} + {b!r} -> id {merged[k + 1]} breaks the id order of the merge list")
    return ranks, added


def _check_vocabulary(spec: dict, hf_tokenizer, added: dict[str, int]) -> None:
    """Gate 3: the tokenizers model must give every vocabulary token back as itself."""
    model = hf_tokenizer.tokenizer.model
    added_ids = set(added.values())
    for token, index in spec["model"]["vocab"].items():
        if index in added_ids:
            continue
        pieces = model.tokenize(token)
        if len(pieces) != 1 or pieces[0].id != index:
            raise NotExpressible(f"tokenizers' merges turn vocabulary token {token!r} into "
                                 f"{[p.id for p in pieces]}, not [{index}]")


class TiktokenTokenizer:
    """The same ids as an HFTokenizer, computed by tiktoken (Rust; the GIL is released while it encodes)."""

    backend = "tiktoken"
    source = "file"  # set by the loader to the HFTokenizer's source ('hub', 'packaged') when it builds one itself
    source_note = ""

    def __init__(self, encoding, hf):
        self.encoding = encoding
        self.name = hf.name
        self.vocab_size = hf.vocab_size
        self.eos_token = hf.eos_token
        self.eos_id, self.bos_id = hf.eos_id, hf.bos_id
        self.backend_reason = "tiktoken gives ids identical to tokenizers (structure, vocabulary and probes checked)"
        self._special = frozenset(encoding.special_tokens_set)
        if self.eos_token not in self._special:
            raise NotExpressible(f"end-of-document token {self.eos_token!r} is not an added token")
        # tokenizers splits every added token out of any text, the end-of-document one included; so
        # "doc0<eos>doc1<eos>" encodes, in one call, to ids(doc0) + [eos] + ids(doc1) + [eos] -- unless another
        # added token could match across a document's end and the separator.
        sep = self.eos_token
        for token in self._special - {sep}:
            if sep in token or any(token.endswith(sep[:k]) for k in range(1, len(sep))):
                raise NotExpressible(f"added token {token!r} overlaps the end-of-document token {sep!r}")
        self._separator = sep

    def _encode_array(self, text: str) -> np.ndarray:
        """uint32 ids (read-only), lone surrogates replaced as in HFTokenizer."""
        try:
            return self.encoding.encode_to_numpy(text, allowed_special=self._special, disallowed_special=())
        except UnicodeEncodeError:
            return self.encoding.encode_to_numpy(replace_lone_surrogates(text), allowed_special=self._special,
                                                 disallowed_special=())

    def encode(self, text: str) -> list[int]:
        return self._encode_array(text).tolist()

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty(0, dtype=np.int32)
        # One call for the whole doc batch: a single GIL release, no per-document arrays to stitch.
        joined = self._separator.join(texts) + self._separator
        return self._encode_array(joined).astype(np.int32)


def _check_probes(fast: TiktokenTokenizer, hf) -> None:
    """Gate 4: identical ids on the probe texts, through encode_docs and through encode."""
    texts = probe_texts(fast.encoding.special_tokens_set) + list(SURROGATE_SAMPLES)
    if not np.array_equal(fast.encode_docs(texts), hf.encode_docs(texts)):
        raise NotExpressible("ids differ from tokenizers on the probe texts")
    for text in texts[-len(SURROGATE_SAMPLES):] + texts[:5]:
        if fast.encode(text) != hf.encode(text):
            raise NotExpressible(f"ids differ from tokenizers on probe {text[:40]!r}")


def build_encoding(spec: dict, name: str = "fwe-bytelevel-bpe"):
    """A tiktoken Encoding (and the added tokens) from a parsed tokenizer.json, checked as gate 2 says; no network."""
    import tiktoken

    ranks, added = mergeable_ranks(spec)
    return tiktoken.Encoding(name, pat_str=GPT2_SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens=added), added


def try_tiktoken(path: str, hf) -> TiktokenTokenizer:
    """The fast backend for the tokenizer.json at `path` (loaded as `hf`), or NotExpressible(reason)."""
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        raise NotExpressible("tiktoken is not installed") from None
    try:
        with open(path, "rb") as handle:
            spec = orjson.loads(handle.read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise NotExpressible(f"cannot read {path} as JSON: {exc}") from None
    _check_structure(spec, hf.tokenizer)
    encoding, added = build_encoding(spec)
    _check_vocabulary(spec, hf, added)
    fast = TiktokenTokenizer(encoding, hf)
    _check_probes(fast, hf)
    return fast
