"""Tokenizers the loader can use, behind one small interface.

`encode_docs(texts)` returns one int32 array: ids(doc0) + [eos] + ids(doc1) + [eos] + ..., which is
exactly what the packer consumes, so no per-document arrays travel further than this module.

Specs: 'byte' (UTF-8 bytes 0..255, end-of-document id 256, vocab 257; needs no files), a path to a
tokenizer.json (or a directory holding one), or a Hub model id fetched through the Hugging Face cache
('gpt2' is an alias of 'openai-community/gpt2'; `hub_fetch` fails fast when the Hub cannot be reached).
GPT-2 works without the Hub: with HF_HUB_OFFLINE=1 or an unreachable Hub and no cached Hub copy, its
tokenizer.json is built from the packaged vocabulary (`gpt2_vocab`, same ids), with one warning, and
`source` / `backend_reason` say so.

Backends for a tokenizer.json: 'tokenizers' (HFTokenizer) always works; 'tiktoken'
(fwe_cli.loader.tokenization.tiktoken_backend; several times faster than encode_batch on GPT-2, see
runbooks/throughput.md) is used only once it is shown to give identical ids. Backend 'auto' returns an
UpgradingTokenizer: tokenizers at once, tiktoken from the moment its proof (run on a background thread, a fraction
of a second of CPU) has passed; the pipeline starts that proof after its first batch, so the check never
delays the first batch, and since ids are identical the switch cannot be seen in the batches. `backend` says
which backend encodes now, `backend_reason` why. Lone surrogates become U+FFFD in both backends.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from functools import lru_cache
from typing import Protocol, Sequence

import numpy as np

from fwe_cli.errors import TokenizerError
from fwe_cli.loader.remote.transient import attempts_note
from fwe_cli.loader.tokenization.names import BYTE, BYTE_EOS_ID, TOKENIZER_BACKENDS, hub_repo, vocabulary_hash
from fwe_cli.loader.tokenization.tiktoken_backend import NotExpressible, replace_lone_surrogates, try_tiktoken

PACKAGED_REPOS = frozenset({"openai-community/gpt2", "gpt2"})  # Hub ids whose tokenizer.json ships offline
EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eot_id|>", "[SEP]")
BOS_CANDIDATES = ("<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>")  # else the end-of-text id delimits


class DocTokenizer(Protocol):
    name: str
    backend: str
    backend_reason: str
    source: str
    vocab_size: int
    eos_id: int
    bos_id: int  # the delimiter put before each document with `bos`: a BOS token, else the end-of-text id

    def encode(self, text: str) -> list[int]: ...

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray: ...


class ByteTokenizer:
    """UTF-8 bytes as ids; documents separated by id 256."""

    name = "byte"
    backend = "byte"
    backend_reason = "the byte tokenizer has one backend"
    source = "builtin"
    vocab_size = 257
    eos_id = bos_id = BYTE_EOS_ID

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8", errors="surrogatepass"))

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        blobs = [t.encode("utf-8", errors="surrogatepass") for t in texts]
        out = np.empty(sum(len(b) for b in blobs) + len(blobs), dtype=np.int32)
        pos = 0
        for blob in blobs:
            n = len(blob)
            out[pos : pos + n] = np.frombuffer(blob, dtype=np.uint8)
            out[pos + n] = BYTE_EOS_ID
            pos += n + 1
        return out


class HFTokenizer:
    """A `tokenizers.Tokenizer`; batches go through `encode_batch` (Rust, GIL released)."""

    backend = "tokenizers"

    def __init__(self, tokenizer, name: str, backend_reason: str = "requested", source: str = "file",
                 source_note: str = ""):
        self.tokenizer = tokenizer
        self.name = name
        self.source = source
        """Where the tokenizer.json came from: 'file', 'hub' or 'packaged' (GPT-2's packaged vocabulary)."""
        self.source_note = source_note
        self.backend_reason = _noted(source_note, backend_reason)
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        eos = next((t for t in EOS_CANDIDATES if tokenizer.token_to_id(t) is not None), None)
        if eos is None:
            raise TokenizerError(f"tokenizer {name!r} has no end-of-document token (looked for {', '.join(EOS_CANDIDATES)})")
        self.eos_token = eos
        self.eos_id = tokenizer.token_to_id(eos)
        bos = next((t for t in BOS_CANDIDATES if tokenizer.token_to_id(t) is not None), eos)
        self.bos_id = tokenizer.token_to_id(bos)

    def encode(self, text: str) -> list[int]:
        try:
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        except TypeError:  # tokenizers rejects a str holding lone surrogates as "not a str"
            return self.tokenizer.encode(replace_lone_surrogates(text), add_special_tokens=False).ids

    def _encodings(self, texts: list[str]) -> list:
        if len(texts) == 1:
            return [self.tokenizer.encode(texts[0], add_special_tokens=False)]
        return self.tokenizer.encode_batch(texts, add_special_tokens=False)

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        try:
            encodings = self._encodings(texts)
        except TypeError:
            encodings = self._encodings([replace_lone_surrogates(t) for t in texts])
        ids: list[int] = []
        eos = self.eos_id
        for enc in encodings:
            ids += enc.ids
            ids.append(eos)
        return np.array(ids, dtype=np.int32)


class UpgradingTokenizer:
    """An HFTokenizer that hands its work to tiktoken once `try_tiktoken` has proven the ids identical.

    The proof thread belongs to this process-wide (cached) tokenizer, not to a loader, so loaders do not join it:
    it does no I/O beyond re-reading the tokenizer.json and ends after a fraction of a second of CPU (a daemon thread,
    it never keeps the process alive); its verdict lands in `backend_reason`, its duration in `check_s`."""

    def __init__(self, hf: HFTokenizer, path: str):
        self.hf = hf
        self.path = path
        self.name, self.vocab_size, self.eos_id, self.eos_token = hf.name, hf.vocab_size, hf.eos_id, hf.eos_token
        self.bos_id = hf.bos_id
        self.source, self.source_note = hf.source, hf.source_note
        self.backend_reason = "tiktoken check not started yet"
        self.check_s: float | None = None
        """Wall seconds the tiktoken proof took (None until it has ended)."""
        self._current: DocTokenizer = hf
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._checked = threading.Event()

    @property
    def backend(self) -> str:
        return self._current.backend

    @property
    def backend_reason(self) -> str:
        return _noted(self.source_note, self._reason)

    @backend_reason.setter
    def backend_reason(self, value: str) -> None:
        self._reason = value

    def current(self) -> DocTokenizer:
        """The backend that encodes now (callers that count per backend encode with it directly)."""
        return self._current

    def start_upgrade(self) -> None:
        """Start the tiktoken proof on a named daemon thread (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None:
                return
            self.backend_reason = "tiktoken check running"
            self._thread = threading.Thread(target=self._upgrade, name="fwe-tiktoken-check", daemon=True)
            self._thread.start()

    def wait_upgrade(self, timeout: float = 30.0) -> str:
        """Start the proof if needed, wait for its verdict (at most `timeout` s); return the backend in use."""
        self.start_upgrade()
        self._checked.wait(timeout)
        return self.backend

    def _upgrade(self) -> None:
        t0 = time.perf_counter()
        try:
            self._current = try_tiktoken(self.path, self.hf)
            self.backend_reason = self._current.backend_reason
        except NotExpressible as exc:
            self.backend_reason = f"tiktoken not used: {exc}"
        except Exception as exc:  # noqa: BLE001 - a bug in the check must leave tokenizers running, and say so
            self.backend_reason = f"tiktoken not used: its check failed with {type(exc).__name__}: {exc}"
        finally:
            self.check_s = round(time.perf_counter() - t0, 4)
            self._checked.set()

    def encode(self, text: str) -> list[int]:
        return self._current.encode(text)

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        return self._current.encode_docs(texts)


def _noted(note: str, reason: str) -> str:
    return f"{note}; {reason}" if note else reason


def _resolve(spec: str, revalidate: bool = False) -> tuple[str, str, str]:
    """(path of the tokenizer.json a spec names, source, source note); `revalidate`: see fetch_hub_file."""
    if os.path.isfile(spec):
        return spec, "file", ""
    if os.path.isdir(spec):
        path = os.path.join(spec, "tokenizer.json")
        if os.path.isfile(path):
            return path, "file", ""
        raise TokenizerError(f"tokenizer directory {spec!r} has no tokenizer.json")
    if spec.endswith(".json") or spec.startswith((".", "/", "~")):
        raise TokenizerError(f"tokenizer file {spec!r} does not exist")
    repo = hub_repo(spec)
    from fwe_cli.loader.remote.hub_env import hub_cache_dir
    from fwe_cli.loader.tokenization.hub_fetch import HubUnreachable, fetch_hub_file

    try:
        return fetch_hub_file(repo, "tokenizer.json", revalidate=revalidate), "hub", ""
    except HubUnreachable as exc:
        if repo not in PACKAGED_REPOS:
            raise TokenizerError(f"cannot fetch tokenizer.json of {repo!r}: {exc.reason}") from None
        from fwe_cli.loader.tokenization.gpt2_vocab import packaged_gpt2_tokenizer_json

        path = packaged_gpt2_tokenizer_json(hub_cache_dir())
        offline = exc.reason.startswith("HF_HUB_OFFLINE")
        warnings.warn(f"fwe: {repo} tokenizer.json built from the packaged GPT-2 vocabulary (same ids): "
                      f"{exc.reason}", RuntimeWarning, stacklevel=3)
        note = "tokenizer.json built from the packaged GPT-2 vocabulary (" + (
            "HF_HUB_OFFLINE=1, no cached Hub copy)" if offline else "the Hub could not be reached)")
        return path, "packaged", note
    except Exception as exc:  # auth, missing repo, a Hub that keeps failing: all end here with the cause chained
        raise TokenizerError(f"cannot fetch tokenizer.json of {repo!r} from the Hub{attempts_note(exc)}: {exc}") from exc


def resolve_tokenizer_file(spec: str) -> str:
    """Path of the tokenizer.json a spec names, downloading a Hub id through the HF cache (GPT-2: built from the
    packaged vocabulary when the Hub cannot be reached)."""
    return _resolve(spec)[0]


def tokenizer_vocabulary_hash(spec: str) -> str:
    """`names.vocabulary_hash` of the tokenizer a spec names (its tokenizer.json fetched as for loading)."""
    if spec == BYTE:
        return vocabulary_hash(None)
    path = resolve_tokenizer_file(spec)
    try:
        with open(path, "rb") as handle:
            return vocabulary_hash(handle.read())
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"cannot read tokenizer {path}: {exc}") from exc


def load_tokenizer(spec: str, backend: str = "auto", revalidate: bool = False) -> DocTokenizer:
    """Load a tokenizer from a spec ('byte', a tokenizer.json path or directory, or a Hub id; a Hub copy cached
    earlier is used as is unless `revalidate`).

    backend 'auto': an UpgradingTokenizer (tokenizers, then tiktoken once proven identical); 'tokenizers':
    always tokenizers; 'tiktoken': tiktoken, proven before this returns, or TokenizerError saying why not."""
    if backend not in TOKENIZER_BACKENDS:
        raise TokenizerError(f"tokenizer backend must be one of {', '.join(TOKENIZER_BACKENDS)}; got {backend!r}")
    if spec == BYTE:
        return ByteTokenizer()
    path, source, note = _resolve(spec, revalidate)
    stat = os.stat(path)
    return _load_file(os.path.realpath(path), stat.st_mtime_ns, stat.st_size, spec, backend, source, note)


@lru_cache(maxsize=8)
def _load_file(path: str, mtime_ns: int, size: int, name: str, backend: str, source: str = "file",
               note: str = "") -> DocTokenizer:
    """Parse a tokenizer.json once per process (a visible part of a first batch; more for backend 'tiktoken'):
    loaders built later reuse it, upgraded if the proof has passed (the backends are stateless and thread-safe)."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:
        raise TokenizerError(f"cannot load tokenizer from {path}: {exc}") from exc
    hf = HFTokenizer(tokenizer, name=name, source=source, source_note=note)
    if backend == "auto":
        return UpgradingTokenizer(hf, path)
    if backend == "tiktoken":
        try:
            fast = try_tiktoken(path, hf)
        except NotExpressible as exc:
            raise TokenizerError(f"tiktoken cannot stand in for {name!r}: {exc}") from None
        fast.source, fast.source_note = source, note
        fast.backend_reason = _noted(note, fast.backend_reason)
        return fast
    return hf
