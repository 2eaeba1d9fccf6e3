"""Where tiktoken's ids cannot be shown identical, fwe stays on `tokenizers` (backend 'auto') or refuses (backend
'tiktoken') and says why; where they can, the loader switches after its first batch without changing the stream."""

import numpy as np
import orjson
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.errors import ConfigError, TokenizerError
from fwe_cli.loader.tokenization.tiktoken_backend import NotExpressible, try_tiktoken
from fwe_cli.loader.tokenization.doc_tokenizer import HFTokenizer, UpgradingTokenizer, load_tokenizer
from tests.helpers import invoke


@pytest.fixture(scope="module")
def gpt2_spec(gpt2_tokenizer_json) -> bytes:
    """GPT-2's tokenizer.json as bytes: each variant parses its own copy (faster than a deep copy of the dict)."""
    with open(gpt2_tokenizer_json, "rb") as handle:
        return handle.read()


def variant(tmp_path, spec: bytes, change, name="tokenizer.json"):
    """Write a changed copy of GPT-2's tokenizer.json; return its path."""
    spec = orjson.loads(spec)
    change(spec)
    path = tmp_path / name
    path.write_bytes(orjson.dumps(spec))
    return str(path)


def refusal(path):
    """The reason try_tiktoken gives (and check that tokenizers itself still loads the file)."""
    hf = load_tokenizer(path, backend="tokenizers")
    assert isinstance(hf, HFTokenizer)
    with pytest.raises(NotExpressible) as info:
        try_tiktoken(path, hf)
    return str(info.value)


def _set(section, value):
    def change(spec):
        spec[section] = value
    return change


def _swap_merge_order(spec):
    merges = spec["model"]["merges"]
    merges[100], merges[101] = merges[101], merges[100]


def _drop_merge(spec):
    merged = "".join(spec["model"]["merges"][500])
    del spec["model"]["merges"][500]
    assert merged in spec["model"]["vocab"]  # the token stays in the vocabulary, now unreachable by merges


def _swap_vocab_ids(spec):
    vocab = spec["model"]["vocab"]
    a, b = "Ġthe", "Ġand"
    vocab[a], vocab[b] = vocab[b], vocab[a]


def _prefix_added_tokens(spec):
    spec["added_tokens"].append({**spec["added_tokens"][0], "id": 50257, "content": "<|endoftext|>X"})


def _overlapping_added_token(spec):
    spec["added_tokens"].append({**spec["added_tokens"][0], "id": 50257, "content": "x<|endo"})


def _lstrip_added_token(spec):
    spec["added_tokens"][0]["lstrip"] = True


CASES = {
    "normalizer": (_set("normalizer", {"type": "NFC"}), "normalizer"),
    "whitespace pre-tokenizer": (_set("pre_tokenizer", {"type": "Whitespace"}), "not ByteLevel"),
    "prefix space": (_set("pre_tokenizer", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                            "use_regex": True}), "prefix space"),
    "no regex split": (_set("pre_tokenizer", {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                              "use_regex": False}), "regex"),
    "merge order tampered": (_swap_merge_order, "id order"),
    "vocab ids tampered": (_swap_vocab_ids, "id order"),
    "merge removed": (_drop_merge, "turn vocabulary token"),
    "added token prefix of another": (_prefix_added_tokens, "prefix"),
    "added token strips": (_lstrip_added_token, "strips"),
    "added token overlaps the separator": (_overlapping_added_token, "overlaps the end-of-document token"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_with_reason(tmp_path, gpt2_spec, case):
    """Each change that breaks the equality proof is refused, and the reason names what broke."""
    change, words = CASES[case]
    assert words in refusal(variant(tmp_path, gpt2_spec, change))


def test_hub_file_format_is_accepted(tmp_path, gpt2_spec):
    """The Hub's older gpt2 tokenizer.json spelling (merges as "a b" strings, no use_regex key, the added token
    marked normalized) is the same tokenizer: accepted, same ids."""
    def hub_format(spec):
        spec["model"]["merges"] = [" ".join(pair) for pair in spec["model"]["merges"]]
        del spec["pre_tokenizer"]["use_regex"]
        spec["added_tokens"][0]["normalized"] = True

    path = variant(tmp_path, gpt2_spec, hub_format)
    hf = load_tokenizer(path, backend="tokenizers")
    fast = try_tiktoken(path, hf)
    assert fast.encode("Hello world<|endoftext|>") == hf.encode("Hello world<|endoftext|>") == [15496, 995, 50256]


def test_probe_gate_catches_a_different_split_rule(gpt2_tokenizer_json, monkeypatch):
    """Gate 4 is live: with a split regex that lacks the contraction rule, the probes differ and it is refused."""
    import fwe_cli.loader.tokenization.tiktoken_backend as backend

    monkeypatch.setattr(backend, "GPT2_SPLIT_PATTERN", r""" ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""")
    hf = load_tokenizer(gpt2_tokenizer_json, backend="tokenizers")
    with pytest.raises(NotExpressible, match="probe"):
        try_tiktoken(gpt2_tokenizer_json, hf)


def test_non_bpe_model_is_refused(tmp_path):
    """A WordLevel model is not BPE: refused before anything else."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"a": 0, "b": 1, "</s>": 2, "[UNK]": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    assert "not BPE" in refusal(str(path))


def test_auto_falls_back_and_says_why(tmp_path, gpt2_spec):
    """Backend 'auto' on a tokenizer with a normalizer keeps tokenizers, and backend_reason carries the refusal."""
    path = variant(tmp_path, gpt2_spec, _set("normalizer", {"type": "NFC"}))
    tok = load_tokenizer(path, backend="auto")
    assert tok.wait_upgrade(timeout=60) == "tokenizers"
    assert tok.backend == "tokenizers" and "normalizer" in tok.backend_reason
    assert tok.encode_docs(["Hello world"]).tolist() == [15496, 995, 50256]


def test_backend_tiktoken_refuses_loudly(tmp_path, gpt2_spec):
    """Backend 'tiktoken' on a tokenizer it cannot express is a TokenizerError naming the reason."""
    path = variant(tmp_path, gpt2_spec, _swap_merge_order)
    with pytest.raises(TokenizerError, match="id order"):
        load_tokenizer(path, backend="tiktoken")


def test_auto_upgrades_to_tiktoken_with_the_same_ids(tmp_path, gpt2_spec):
    """'auto' encodes with tokenizers until the proof passes, then with tiktoken, giving the same ids."""
    path = variant(tmp_path, gpt2_spec, lambda spec: None, name="fresh.json")  # not cached by other tests
    tok = load_tokenizer(path, backend="auto")
    assert isinstance(tok, UpgradingTokenizer) and tok.backend == "tokenizers" and tok.check_s is None
    before = tok.encode_docs(["some text", "more"])
    assert tok.wait_upgrade(timeout=60) == "tiktoken", tok.backend_reason
    assert tok.current().backend == "tiktoken" and tok.check_s > 0 and "identical" in tok.backend_reason
    assert np.array_equal(before, tok.encode_docs(["some text", "more"]))


def test_loader_stream_is_the_same_for_every_backend(synthetic_jsonl, gpt2_tokenizer_json):
    """The whole batch stream of a loader is identical with backends tokenizers, tiktoken and auto (which switches
    mid-stream), and stats name the backend that ran."""
    streams, stats = {}, {}
    for backend in ("tokenizers", "tiktoken", "auto"):
        config = resolve_config(env={}, local_path=str(synthetic_jsonl), tokenizer=gpt2_tokenizer_json, seq_len=256,
                                batch_size=4, tokenizer_backend=backend, doc_batch=8, report_docs=0)
        with FineWebLoader(config) as loader:
            batches = list(loader)
            stats[backend] = loader.stats()["tokenizer"]
        streams[backend] = np.concatenate(batches)
    assert len(streams["tokenizers"]) > 100
    assert np.array_equal(streams["tokenizers"], streams["tiktoken"])
    assert np.array_equal(streams["tokenizers"], streams["auto"])
    assert stats["tokenizers"]["backend"] == "tokenizers" and stats["tiktoken"]["backend"] == "tiktoken"
    assert stats["tiktoken"]["docs_by_backend"] == {"tiktoken": 200}
    assert stats["tokenizers"]["docs_by_backend"] == {"tokenizers": 200}
    assert sum(stats["auto"]["docs_by_backend"].values()) == 200


def test_config_rejects_unknown_backend():
    """A bad tokenizer_backend is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match="'fast'"):
        resolve_config(env={}, tokenizer_backend="fast")


def test_cli_flag_and_exit_code(tmp_path, gpt2_tokenizer_json, synthetic_jsonl):
    """--tokenizer-backend is a loader flag: a bad value exits 2; 'tiktoken' runs and the JSON names the backend."""
    bad = invoke("smoke", "--source", "synthetic", "--tokenizer-backend", "fast", "--artifacts-dir", str(tmp_path))
    assert bad.exit_code == 2 and "--tokenizer-backend" in bad.stderr
    ok = invoke("smoke", "--local-path", str(synthetic_jsonl), "--tokenizer", gpt2_tokenizer_json,
                "--tokenizer-backend", "tiktoken", "--json", "--artifacts-dir", str(tmp_path))
    assert ok.exit_code == 0, ok.stderr
    assert orjson.loads(ok.stdout)["tokenizer"]["backend"] == "tiktoken"
