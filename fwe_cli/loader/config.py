"""Loader configuration: one frozen dataclass, and the one place that resolves a setting. Precedence is flag >
environment variable (the users' variables and how their text is read: loader.variables) > default, applied only in
`resolve_config`. Every bad value raises `ConfigError` with a one-line message naming the setting and the value."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.compose.mix_file import SOURCE_WORDS, named_source
from fwe_cli.loader.limits import LIMITS, check_limit
from fwe_cli.loader.remote.storage_options import parse_storage_options, redact_pairs
from fwe_cli.loader.shard import RANK_VARS, Shard, rank_from_env
from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec
from fwe_cli.loader.tokenization.names import TOKENIZER_BACKENDS
from fwe_cli.loader.variables import ENV_VARS, parse_variable

BAD_RECORD_POLICIES, PACKINGS = ("skip", "error"), ("stream", "greedy", "best-fit")
DEFAULT_PACK_BUFFER = 1000  # runbooks/benchmarks.md: best-fit's crop and speed by buffer size

SHARD_FROM = ("flags", *RANK_VARS, "default")

@dataclass(frozen=True)
class LoaderConfig:
    """Everything that decides which batches the loader yields and how fast."""

    seq_len: int = 1024
    """Tokens per row; the packed stream is cut into rows of exactly this length."""
    batch_size: int = 1
    """Rows per batch; a batch is an int32 array [batch_size, seq_len]."""
    doc_batch: int = 64
    """Documents tokenized per `encode_batch` call (NSA_FWE_DOC_BATCH); 1 means one call per document."""
    prefetch: bool = True
    """Produce batches on a background thread into a bounded queue (NSA_FWE_PREFETCH)."""
    queue_depth: int = 8
    """Capacity of the prefetch queue, in batches (NSA_FWE_Q)."""
    warmup_batches: int = 0
    """Before step 1, wait until this many batches are queued (NSA_FWE_WARMUP_BATCHES); 0 skips warmup."""
    warmup_timeout: float = 30.0
    """Seconds warmup may wait before giving up and starting anyway (NSA_FWE_WARMUP_TIMEOUT)."""
    report_docs: int = 1000
    """Write a progress heartbeat every this many documents (NSA_FWE_REPORT_DOCS); 0 turns it off."""
    shard: Shard = field(default_factory=Shard)
    """Which reader this loader is (a rank, or rank x DataLoader worker): its share is dealt unread (sources.deal)."""
    workers: int = 0
    """The DataLoader or Grain workers of the rank `shard` is one of (0: none; set by fwe_cli.train's adapters): worker
    w's i-th batch is its rank's batch i x workers + w, what a mix's schedule reads the job's step by."""
    shard_from: str = "default"
    """Where resolve_config took `shard` from: 'flags' (--shard-mod/--shard-rem), 'torchrun' (RANK/WORLD_SIZE),
    'slurm' (SLURM_PROCID/SLURM_NTASKS) or 'default' (none of them: one shard, or a LoaderConfig built directly)."""
    source: SourceSpec = field(default_factory=SourceSpec)
    """Where documents come from: a tree of sources (fwe_cli.loader.sources.spec); resolve_config builds it from the
    flags that name it (compose.mix_file.named_source: one source, or a mix)."""
    hub_cache: bool = True
    """Keep the native Hub reader's file listing and first row groups under the Hugging Face cache and use a cached
    Hub tokenizer.json as is, so a warm start needs at most one request before its first batch; False reads
    everything from the Hub and re-validates the tokenizer."""
    tokenizer: str | None = None
    """'byte' (UTF-8 bytes, no files), a path to a tokenizer.json, or a Hub model id ('gpt2'); None: the source's
    own (a token directory's recorded tokenizer), else 'byte'."""
    tokenizer_threads: int = 0
    """Threads that tokenize in parallel (NSA_FWE_TOKENIZER_THREADS); 0 means one per CPU core."""
    tokenizer_backend: str = "auto"
    """'auto' (tokenizers, then tiktoken once proven to give identical ids), 'tokenizers', or 'tiktoken' (required)."""
    loader_timeout: float = 60.0
    """Seconds to wait for the first batch (and any later one) before raising LoaderTimeout."""
    synthetic_on_fail: bool = False
    """If the first batch fails or times out, fall back (loudly, recorded) to the synthetic source."""
    bad_records: str = "skip"
    """A malformed record (local file or Hub row): 'skip' (counted and reported) or 'error' (fail naming where)."""
    allow_partial: bool = False
    """Accept a bootstrap directory whose manifest is not marked complete."""
    verify_parts: bool = False
    """Before reading a bootstrap, compare each part's sha256 with its manifest (reads every part once more, inside
    the first batch's timeout); its size is compared always. A part that differs fails the run, naming it."""
    grow: bool = False
    """With --tail hub: append the Hub documents read after the bootstrap's end to it as new parts (NSA_FWE_GROW), so
    the next job starts local for longer (compose.growth)."""
    labels: bool = False
    """Each batch is {"input", "labels"}, int32 [B, T] each, cut from windows of B*T + 1 tokens overlapping the next
    by one token: every token of the stream is an input once and a label once (rows.packing)."""
    boundaries: bool = False
    """Each batch also carries document boundaries: "positions" (each token's index within its document, [B, T]) and
    "cu_seqlens" (each row's segment starts, then T, [B, T + 1]); the batch is a dict."""
    bos: bool = False
    """Put the tokenizer's BOS (else its end-of-text) before each document instead of end-of-text after it (llm.c's
    layout)."""
    pack: str = "stream"
    """How rows are filled (PACKINGS): "stream" cuts the token stream wherever a row ends; "greedy" starts every row at
    a document and fills it with whole documents in stream order, cropping the one that does not fit; "best-fit" fills
    every row from a buffer of `pack_buffer` documents, cropping only when none fits. Crops are counted in stats."""
    pack_buffer: int = DEFAULT_PACK_BUFFER
    """best-fit: the documents held to choose each row's from (a resume re-reads 2 to 5 x as many)."""
    as_torch: bool = False
    """Yield torch tensors (pinned memory when CUDA is available) instead of numpy arrays."""
    heartbeat_dir: str | None = None
    """Directory for heartbeat_rank{rank}.jsonl telemetry; None disables it."""
    rank: int = 0
    """Rank written into heartbeat lines and file name; resolve_config makes it the shard's rem when the shard came
    from a launcher's variables and no rank was given."""
    shuffle_seed: int | None = None
    """Shuffle: units permuted per epoch, each reader's documents in windows of `shuffle_window`, a pure function of
    (seed, epoch, data, readers); None keeps stream order."""
    shuffle_window: int = 10_000
    """Documents per shuffle window (held in memory together)."""
    epochs: int = 1
    """Passes over the data; the stream ends after the last."""
    epoch: int = 0
    """The epoch the stream begins at (a DataLoader pass's: set_epoch); a resume takes its state's."""
    storage_options: tuple[str, ...] = ()
    """KEY=VALUE options of an object store's filesystem (--storage-option; NSA_FWE_STORAGE_OPTIONS: space apart)."""

    def __post_init__(self) -> None:
        for name in NUMERIC_FIELDS:
            if not (name == "shuffle_seed" and self.shuffle_seed is None):
                check_limit(name, getattr(self, name))
        if not isinstance(self.source, SourceSpec):
            raise ConfigError(f"source must be a SourceSpec, got {self.source!r}")
        for refusal in (self.shuffle_seed is not None and self.source.shuffle_refusal(),
                        self.shard.mod > 1 and self.source.dealing_refusal()):
            if refusal:
                raise ConfigError(refusal)
        check_reading_settings(self.bad_records, self.shard)
        object.__setattr__(self, "storage_options", tuple(self.storage_options))
        parse_storage_options(self.storage_options)
        if self.shard_from not in SHARD_FROM:
            raise ConfigError(f"shard_from must be one of {', '.join(SHARD_FROM)}; got {self.shard_from!r}")
        for name in ("verify_parts", "labels", "boundaries", "bos"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.grow and not self.source.grows():
            raise SettingError(lambda n: f"{n('grow')} appends the Hub tail read after a bootstrap to it: it needs "
                                         f"{n('tail')} hub")
        if self.pack not in PACKINGS:
            raise SettingError(lambda n: f"{n('pack')} must be one of {', '.join(PACKINGS)}; got {self.pack!r}")
        if self.tokenizer_backend not in TOKENIZER_BACKENDS:
            raise SettingError(lambda n: f"{n('tokenizer_backend')} must be one of {', '.join(TOKENIZER_BACKENDS)}; "
                                         f"got {self.tokenizer_backend!r}")
        if self.tokenizer is not None and (not self.tokenizer or not isinstance(self.tokenizer, str)):
            raise SettingError(lambda n: f"{n('tokenizer')} must be 'byte', a tokenizer.json path or a Hub id, "
                                         f"got {self.tokenizer!r}")
        if self.warmup_batches > self.queue_depth and self.prefetch:
            raise SettingError(lambda n: f"{n('warmup_batches')}={self.warmup_batches} cannot exceed "
                                         f"{n('queue_depth')}={self.queue_depth}: the queue could never hold that many")

    @property
    def align_rows(self) -> bool:
        """Every row starts at a document (pack greedy or best-fit)."""
        return self.pack != "stream"

    def replace(self, **changes: Any) -> "LoaderConfig":
        """A copy with `changes` (fields by name: the source as a SourceSpec), validated like any construction."""
        return dataclasses.replace(self, **changes)

    def to_json(self, secrets: bool = False) -> dict[str, Any]:
        """The config as JSON, keys named as the fields (the source as its spec's JSON, the shard as {mod, rem}): what
        artifacts record and a measured run's child process is handed (`from_json` reads it back). A storage option
        that holds a secret is redacted (remote.storage_options) unless `secrets`."""
        plain = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("source", "shard")}
        plain["storage_options"] = list(self.storage_options) if secrets else redact_pairs(self.storage_options)
        return {"source": self.source.to_json(), **plain, "shard": dataclasses.asdict(self.shard)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LoaderConfig":
        """The config `to_json` wrote (validated like any construction)."""
        values = dict(data)
        shard = values.pop("shard", None)
        source = values.pop("source", None)
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown config fields: {', '.join(sorted(unknown))}")
        return cls(source=SourceSpec.from_json(source) if source is not None else SourceSpec(),
                   shard=Shard(**shard) if shard else Shard(), **values)

    def read_options(self) -> ReadOptions:
        """How the source is read (policy, not which documents)."""
        return ReadOptions(strict=self.bad_records == "error", allow_partial=self.allow_partial,
                           verify_parts=self.verify_parts, hub_cache=self.hub_cache, tokenizer=self.tokenizer,
                           grow=self.grow, storage_options=parse_storage_options(self.storage_options))


def check_reading_settings(bad_records: str, shard: Any) -> None:
    """The checks every config that reads documents shares (the loader's and bootstrap's), besides its SourceSpec."""
    if not isinstance(shard, Shard):
        raise ConfigError(f"shard must be a Shard(mod, rem), got {shard!r}")
    if bad_records not in BAD_RECORD_POLICIES:
        raise SettingError(lambda n: f"{n('bad_records')} must be 'skip' or 'error', got {bad_records!r}")


NUMERIC_FIELDS = tuple(name for name in LoaderConfig.__dataclass_fields__ if name in LIMITS)


def resolve_config(env: Mapping[str, str] | None = None, flag_names: Mapping[str, str] | None = None,
                   **flags: Any) -> LoaderConfig:
    """Build the LoaderConfig: a flag given (not None) wins, then the NSA_FWE_* variable, then the default.

    `shard_mod`/`shard_rem` flags build the Shard; without them a launcher's RANK/WORLD_SIZE (torchrun) or
    SLURM_PROCID/SLURM_NTASKS give it (`rank_from_env`), and `rank` defaults to its rem (shard_from records which).
    The source comes as the settings that name it (SOURCE_WORDS: named_source; a mix file is read). Nothing else is
    read from disk: a token directory's own tokenizer is the default once it is opened (`tokenizer` stays None).
    `flag_names` maps a setting to the flag the user typed ('seq_len' -> '--seq-len') so a number out of range is
    reported under that name; a variable's is reported under the variable's.
    """
    env = os.environ if env is None else env
    flag_names = flag_names or {}
    defaults = LoaderConfig.__dataclass_fields__
    values: dict[str, Any] = {}
    typed = {name: flag_names.get(name, name) for name in flags}  # setting -> how the user set it, for SettingError
    source: dict[str, Any] = {}
    for var, name in ENV_VARS.items():
        raw = env.get(var)
        if raw is not None and raw.strip() != "":
            if name in SOURCE_WORDS:  # a source's word: its spec checks it
                source[name] = raw.strip()
            else:
                values[name] = parse_variable(var, raw, name, defaults[name].default)
            if flags.get(name) is None:
                typed[name] = var
    for name, value in flags.items():
        if name in LIMITS and value is not None:
            check_limit(name, value, flag_names.get(name))
    shard_mod = flags.pop("shard_mod", None)
    shard_rem = flags.pop("shard_rem", None)
    align_rows = flags.pop("align_rows", None)  # --align-rows: --pack greedy's old name
    source.update({name: value for name in SOURCE_WORDS if (value := flags.pop(name, None)) is not None})
    for name, value in flags.items():
        if name not in defaults:
            raise TypeError(f"resolve_config() got an unknown setting {name!r}")
        if value is not None:
            values[name] = value
    if align_rows:
        if values.setdefault("pack", "greedy") != "greedy":
            aligned, packed = flag_names.get("align_rows", "align_rows"), typed.get("pack", "pack")
            raise ConfigError(f"{aligned} is --pack greedy: it cannot go with {packed} {values['pack']}; give one")
    try:
        return _build(values, env, shard_mod, shard_rem, source)
    except SettingError as exc:
        raise exc.naming(lambda field: typed.get(field, field)) from None


def _build(values: dict[str, Any], env: Mapping[str, str], shard_mod: int | None, shard_rem: int | None,
           source: dict[str, Any]):
    """The tail of `resolve_config`: shard (flags, else a launcher's variables) and the source."""
    if shard_mod is not None or shard_rem is not None:
        values["shard"] = Shard(1 if shard_mod is None else shard_mod, 0 if shard_rem is None else shard_rem)
        values["shard_from"] = "flags"
    elif (launched := rank_from_env(env)) is not None:
        values["shard_from"], values["shard"] = launched
        values.setdefault("rank", values["shard"].rem)
    values["source"] = named_source(source)
    return LoaderConfig(**values)
