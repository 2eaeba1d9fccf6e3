"""Configuration: precedence flag > NSA_FWE_* variable > default, and one-line errors naming the bad value."""

import dataclasses
import re

import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig, Shard, resolve_config
from fwe_cli.loader.variables import ENV_VARS
from tests.helpers import invoke


def test_defaults_when_nothing_is_set():
    """With no flags and no variables, resolve_config gives exactly the dataclass defaults."""
    assert resolve_config(env={}) == LoaderConfig()


@pytest.mark.parametrize(
    "var,raw,field,expected",
    [
        ("NSA_FWE_DOC_BATCH", "17", "doc_batch", 17),
        ("NSA_FWE_Q", "3", "queue_depth", 3),
        ("NSA_FWE_PREFETCH", "0", "prefetch", False),
        ("NSA_FWE_PREFETCH", "yes", "prefetch", True),
        ("NSA_FWE_REPORT_DOCS", "0", "report_docs", 0),
        ("NSA_FWE_WARMUP_BATCHES", "2", "warmup_batches", 2),
        ("NSA_FWE_WARMUP_TIMEOUT", "1.5", "warmup_timeout", 1.5),
        ("NSA_FWE_TOKENIZER_THREADS", "1", "tokenizer_threads", 1),
    ],
)
def test_each_user_variable_sets_its_field(var, raw, field, expected):
    """Every user variable keeps its meaning: it lands in the documented field, parsed to its type."""
    assert getattr(LoaderConfig(), field) != expected or field == "prefetch"
    assert getattr(resolve_config(env={var: raw}), field) == expected


def test_every_variable_is_covered_by_the_table():
    """The six variables the users already set are all read (and only through ENV_VARS)."""
    users = {"NSA_FWE_DOC_BATCH", "NSA_FWE_PREFETCH", "NSA_FWE_Q", "NSA_FWE_REPORT_DOCS",
             "NSA_FWE_WARMUP_BATCHES", "NSA_FWE_WARMUP_TIMEOUT"}
    assert users <= set(ENV_VARS)


def test_flag_beats_variable_beats_default():
    """A flag given wins over the variable; a flag left None lets the variable through."""
    env = {"NSA_FWE_Q": "5", "NSA_FWE_DOC_BATCH": "9"}
    cfg = resolve_config(env=env, queue_depth=2, doc_batch=None)
    assert cfg.queue_depth == 2
    assert cfg.doc_batch == 9


def test_storage_option_secrets_reach_the_filesystem_and_are_redacted_where_recorded():
    """--storage-option pairs reach the filesystem's options whole (dotted keys nested, JSON values read), but a
    secret's value (key, secret, token, sas, account_key, ...) is `<redacted>` in the config's JSON (what artifacts
    record) and in the variables' record, whether it came as a flag or NSA_FWE_STORAGE_OPTIONS; the rest as given."""
    from fwe_cli.loader.variables import env_snapshot

    pairs = ["key=AKIA1", "secret=s3cr3t", "client_kwargs.aws_session_token=tok", "anon=false",
             "client_kwargs.region_name=eu-west-1", "sas_token=sv=1&sig=2", "account_key=k"]
    config = resolve_config(env={}, storage_options=pairs)
    assert config.read_options().storage_options == {
        "key": "AKIA1", "secret": "s3cr3t", "anon": False, "sas_token": "sv=1&sig=2", "account_key": "k",
        "client_kwargs": {"aws_session_token": "tok", "region_name": "eu-west-1"}}
    recorded = config.to_json()["storage_options"]
    assert recorded == ["key=<redacted>", "secret=<redacted>", "client_kwargs.aws_session_token=<redacted>",
                        "anon=false", "client_kwargs.region_name=eu-west-1", "sas_token=<redacted>",
                        "account_key=<redacted>"]
    assert "s3cr3t" not in str(config.to_json()) and config.to_json(secrets=True)["storage_options"] == pairs
    env = {"NSA_FWE_STORAGE_OPTIONS": "secret=s3cr3t anon=true"}
    assert resolve_config(env=env).read_options().storage_options == {"secret": "s3cr3t", "anon": True}
    assert env_snapshot(env) == {"NSA_FWE_STORAGE_OPTIONS": "secret=<redacted> anon=true"}
    with pytest.raises(ConfigError, match=r"--storage-option 'token' must be KEY=VALUE"):
        resolve_config(env={}, storage_options=["token"])


def test_local_path_implies_local_source_unless_source_given():
    """Giving only local_path selects source 'local'; an explicit source is kept."""
    assert resolve_config(env={}, local_path="x.jsonl").source.kind == "local"
    assert resolve_config(env={}, local_path="x.jsonl", source="synthetic").source.kind == "synthetic"


@pytest.mark.parametrize(
    "kwargs,env,needle",
    [
        ({}, {"NSA_FWE_Q": "abc"}, "NSA_FWE_Q='abc'"),
        ({}, {"NSA_FWE_PREFETCH": "maybe"}, "NSA_FWE_PREFETCH='maybe'"),
        ({"seq_len": 0}, {}, "seq_len must be an integer from 1 to 1,048,576, got 0"),
        ({"source": "s3"}, {}, "'s3'"),
        ({"source": "local"}, {}, "local_path"),
        ({"shard_mod": 4, "shard_rem": 4}, {}, "got 4"),
        ({"bad_records": "ignore"}, {}, "'ignore'"),
        ({"loader_timeout": -1.0}, {}, "loader_timeout must be a number > 0 and <= 86,400, got -1.0"),
    ],
)
def test_bad_values_name_the_setting_and_value(kwargs, env, needle):
    """Each bad value raises ConfigError whose one-line message contains the setting and the value."""
    with pytest.raises(ConfigError, match=re.escape(needle)) as info:
        resolve_config(env=env, **kwargs)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_config_is_frozen():
    """A LoaderConfig cannot be changed after validation: assigning a field raises."""
    cfg = LoaderConfig()
    with pytest.raises(dataclasses.FrozenInstanceError, match="seq_len"):
        cfg.seq_len = 5  # type: ignore[misc]


def test_shard_owns_by_modulo():
    """Document i belongs to the shard with i % mod == rem: the users' semantics."""
    shard = Shard(4, 1)
    assert [i for i in range(12) if shard.owns(i)] == [1, 5, 9]


@pytest.mark.parametrize("start", range(9))
def test_first_owned_is_the_next_index_the_shard_owns(start):
    """first_owned(start) is the smallest index >= start that owns() accepts, for every start."""
    shard = Shard(4, 1)
    assert shard.first_owned(start) == next(i for i in range(start, start + 4) if shard.owns(i))


def test_cli_bad_variable_is_usage_error_with_one_line(tmp_path):
    """`NSA_FWE_Q=abc fwe smoke` exits with the usage code and one line naming the variable, no traceback."""
    result = invoke("smoke", "--source", "synthetic", "--artifacts-dir", str(tmp_path), env={"NSA_FWE_Q": "abc"})
    assert result.exit_code == 2
    assert "NSA_FWE_Q='abc'" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_bad_flag_is_usage_error(tmp_path):
    """`fwe smoke --seq-len 0` exits 2 naming the flag --seq-len and 0."""
    result = invoke("smoke", "--source", "synthetic", "--seq-len", "0", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "--seq-len" in result.stderr and "got 0" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_numeric_field_has_a_limit():
    """Every int/float field of LoaderConfig is range-checked from the one LIMITS table (a new numeric field without
    a limit fails here), so no number reaches a wait, an allocation or orjson unchecked."""
    from fwe_cli.loader.config import NUMERIC_FIELDS
    from fwe_cli.loader.limits import LIMITS

    numeric = {f.name for f in dataclasses.fields(LoaderConfig) if str(f.type).replace(" | None", "") in ("int", "float")}
    assert numeric == set(NUMERIC_FIELDS) and numeric <= set(LIMITS)


@pytest.mark.parametrize("field, value", [
    ("seq_len", 2**70), ("batch_size", 2**70), ("queue_depth", 2**64), ("seed", 2**63), ("rank", 2**70),
    ("loader_timeout", float("inf")), ("loader_timeout", 1e308), ("warmup_timeout", float("nan")),
    ("loader_timeout", 10**400),
])
def test_from_json_checks_limits_like_flags(field, value):
    """from_json (and any construction) goes through the same limits as flags and variables: a value past 64 bits
    or an infinite timeout is a ConfigError naming the field, never a later TypeError/OverflowError."""
    with pytest.raises(ConfigError, match=re.escape(field)) as info:
        LoaderConfig.from_json(dict(LoaderConfig().to_json(), **{field: value}))
    assert "\n" not in str(info.value)


def test_out_of_range_flag_and_variable_are_named_as_typed():
    """resolve_config names the flag (given flag_names) or the variable, with the value as typed."""
    with pytest.raises(ConfigError, match=re.escape(f"--seq-len must be an integer from 1 to 1,048,576, got {2**70}")):
        resolve_config(env={}, flag_names={"seq_len": "--seq-len"}, seq_len=2**70)
    with pytest.raises(ConfigError, match=re.escape("NSA_FWE_WARMUP_TIMEOUT must be a number > 0 and <= 86,400, "
                                                    "got 'inf'")):
        resolve_config(env={"NSA_FWE_WARMUP_TIMEOUT": "inf"})


TORCHRUN = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
SLURM = {"SLURM_PROCID": "2", "SLURM_NTASKS": "3"}


@pytest.mark.parametrize("env,shard,launcher", [
    (TORCHRUN, Shard(4, 1), "torchrun"),
    (SLURM, Shard(3, 2), "slurm"),
    ({**SLURM, **TORCHRUN}, Shard(4, 1), "torchrun"),  # torchrun inside a SLURM job: per process beats per task
    ({"LOCAL_RANK": "1", "SLURM_PROCID": " ", "SLURM_NTASKS": ""}, Shard(), "default"),  # blank = unset
    ({}, Shard(), "default"),
])
def test_shard_comes_from_the_launcher_without_flags(env, shard, launcher):
    """With no shard flags, RANK/WORLD_SIZE (else SLURM_PROCID/SLURM_NTASKS) give the shard, shard_from names the
    launcher, and the heartbeat rank follows the shard's rem."""
    config = resolve_config(env=env)
    assert (config.shard, config.shard_from, config.rank) == (shard, launcher, shard.rem)
    assert config.to_json()["shard_from"] == launcher
    assert LoaderConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize("flags", [{"shard_mod": 2, "shard_rem": 0}, {"shard_mod": 2}, {"shard_rem": 0}])
def test_shard_flags_beat_launcher_variables(flags):
    """An explicit --shard-mod/--shard-rem wins over every launcher variable, even malformed ones, which are then
    not read; shard_from is 'flags' and the heartbeat rank keeps its own default."""
    config = resolve_config(env={**TORCHRUN, **SLURM, "RANK": "x"}, **flags)
    assert config.shard == Shard(flags.get("shard_mod", 1), 0) and config.shard_from == "flags"
    assert config.rank == 0


def test_explicit_rank_beats_the_launcher_rank():
    """--rank given is the heartbeat rank even when the shard comes from the launcher."""
    config = resolve_config(env=TORCHRUN, rank=7)
    assert (config.shard, config.shard_from, config.rank) == (Shard(4, 1), "torchrun", 7)


@pytest.mark.parametrize("env,needles", [
    ({"RANK": "0", "WORLD_SIZE": "0"}, ["WORLD_SIZE must be an integer from 1 to", "WORLD_SIZE='0'", "RANK='0'"]),
    ({"RANK": "2", "WORLD_SIZE": "2"}, ["RANK must be from 0 to WORLD_SIZE - 1", "RANK='2'", "WORLD_SIZE='2'"]),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, ["RANK='-1'"]),
    ({"RANK": "one", "WORLD_SIZE": "2"}, ["must be integers", "RANK='one'", "WORLD_SIZE='2'"]),
    ({"RANK": "1"}, ["needs both RANK and WORLD_SIZE", "RANK='1'", "WORLD_SIZE=None"]),
    ({"WORLD_SIZE": "2", **SLURM}, ["needs both RANK and WORLD_SIZE", "WORLD_SIZE='2'"]),
    ({"SLURM_NTASKS": "2"}, ["needs both SLURM_PROCID and SLURM_NTASKS", "SLURM_NTASKS='2'"]),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "3"}, ["SLURM_PROCID must be from 0 to SLURM_NTASKS - 1", "'3'"]),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2.5"}, ["must be integers", "SLURM_NTASKS='2.5'"]),
    ({"RANK": "0", "WORLD_SIZE": str(2**70)}, ["WORLD_SIZE must be an integer from 1 to 1,048,576"]),
])
def test_bad_launcher_variables_name_them_and_their_values(env, needles):
    """A malformed pair (world size 0 or out of range, rank not below it, a non-integer, one of the two alone) is a
    one-line ConfigError naming the variables and what they hold, not a silent single shard."""
    with pytest.raises(ConfigError) as info:
        resolve_config(env=env)
    message = str(info.value)
    assert all(needle in message for needle in needles), message
    assert "\n" not in message


def test_shard_from_is_validated():
    """shard_from takes only the documented values, so an artifact never records an unknown origin."""
    with pytest.raises(ConfigError, match="shard_from must be one of flags, torchrun, slurm, default; got 'env'"):
        LoaderConfig(shard_from="env")


def test_cli_bad_launcher_variable_is_usage_error(tmp_path):
    """`WORLD_SIZE=0 RANK=0 fwe smoke` exits 2 with one line naming WORLD_SIZE and its value, and writes nothing."""
    result = invoke("smoke", "--source", "synthetic", "--artifacts-dir", str(tmp_path / "art"),
                    env={"RANK": "0", "WORLD_SIZE": "0"})
    assert result.exit_code == 2
    assert "WORLD_SIZE='0'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "art").exists()


@pytest.mark.parametrize("flags, env, message", [
    ({"warmup_batches": 4, "queue_depth": 1}, {}, "--warmup-batches=4 cannot exceed --q=1"),
    ({}, {"NSA_FWE_WARMUP_BATCHES": "4", "NSA_FWE_Q": "2"}, "NSA_FWE_WARMUP_BATCHES=4 cannot exceed NSA_FWE_Q=2"),
    ({"queue_depth": 2}, {"NSA_FWE_WARMUP_BATCHES": "4", "NSA_FWE_Q": "16"}, "NSA_FWE_WARMUP_BATCHES=4 cannot exceed --q=2"),
    ({"shard_mod": 2, "shard_rem": 5}, {}, "--shard-rem must be an integer from 0 to 1 (one of --shard-mod 2 shards), got 5"),
    ({"source": "disk"}, {}, "--source must be one of hub, local, synthetic; got 'disk'"),
    ({"hub_reader": "x"}, {}, "--hub-reader must be one of native, datasets; got 'x'"),
    ({"tokenizer_backend": "x"}, {}, "--tokenizer-backend must be one of auto, tokenizers, tiktoken; got 'x'"),
    ({"bad_records": "x"}, {}, "--bad-records must be 'skip' or 'error', got 'x'"),
])
def test_choice_and_combination_errors_name_what_the_user_typed(flags, env, message):
    """A bad choice or combination names each setting as the user set it (the flag, or the NSA_FWE_* variable when
    no flag overrides it) with the value, never the internal field name."""
    from fwe_cli.cli.options import FLAG_NAMES

    with pytest.raises(ConfigError) as info:
        resolve_config(env=env, flag_names=FLAG_NAMES, **flags)
    assert str(info.value).startswith(message)
