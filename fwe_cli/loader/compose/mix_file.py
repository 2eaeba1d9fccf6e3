"""A mix file (`--mix FILE`, NSA_FWE_MIX): JSON or TOML naming the sources of a mixture with their weights.

    {"by": "tokens", "sources": [{"weight": 0.7, "source": "hub", "name": "sample-10BT"},
                                 {"weight": 0.3, "local_path": "/data/mine.jsonl", "stop": "cycle"}]}

Each entry takes the keys of the single-source flags (`local_path` or `local-path` for --local-path, `where`, ...),
its `weight` (a share of tokens, or of documents with "by": "documents"), its `stop` ('first_exhausted', the
default, or 'cycle') and an `id` naming it. A `schedule` (compose.schedule) gives weights that change with the step
instead, each stage's by the sources' ids (or a list, one for each source):

    {"sources": [{"id": "edu", "name": "sample-10BT"},
                 {"id": "edu4", "name": "sample-10BT", "where": "int_score >= 4", "stop": "cycle"}],
     "schedule": [{"until_step": 9000, "weights": {"edu": 1}},
                  {"until_step": 10000, "weights": {"edu": 1, "edu4": 1}, "ramp": "linear"}]}

`mixture_spec` turns it into the mixture's SourceSpec, every mistake one ConfigError line naming the file and what
is wrong (a stage's: the stage and the key); `named_source` is the source the settings name: one source's flags, or
a mix.
"""

from __future__ import annotations

from typing import Any, Callable

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.sources.spec import SOURCE_FLAGS, SourceSpec

SOURCE_WORDS = (*SOURCE_FLAGS, "mix")
"""The settings that name the source: one source's flags, or a mix file naming several (--mix)."""
WHOLE_STREAM = ("where", "holdout", "holdout_split")
"""Source flags that, beside a mix, apply to each of its sources (where the mix file does not set them)."""
TOP_KEYS = ("by", "schedule", "sources", "stop")
ENTRY_KEYS = ("id", "weight", "stop")
STAGE_KEYS = ("until_step", "until_tokens", "weights", "ramp")


def named_source(given: dict[str, Any]) -> SourceSpec:
    """The source the settings name (SOURCE_WORDS, those given): one source's, from its flags, or a mixture's from
    its file (--mix), the whole-stream flags applied to each of its sources."""
    given = dict(given)
    mix = given.pop("mix", None)
    if mix is None:
        return SourceSpec.from_flags(given)
    single = sorted(name for name in given if name not in WHOLE_STREAM)
    if single:
        raise SettingError(lambda n: f"{n('mix')} names its sources itself: give {n(single[0])} in the mix file, "
                                     "not beside it")
    return mixture_spec(str(mix), defaults={name: given[name] for name in WHOLE_STREAM if name in given})


def refuse_mix(env, what: str) -> None:
    """ConfigError for a command that reads one source (`what` it does) run with NSA_FWE_MIX set."""
    if env.get("NSA_FWE_MIX", "").strip():
        raise ConfigError(f"{what}; NSA_FWE_MIX={env['NSA_FWE_MIX']!r} names a mix: unset it, and run it for each of "
                          "the mix's sources")


def read_mix(path: str) -> dict:
    """The file's content (JSON, or TOML by its .toml suffix); ConfigError naming it when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"--mix {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        if path.endswith(".toml"):
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            return tomllib.loads(raw.decode("utf-8"))
        import orjson

        return orjson.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.endswith(".toml") else "JSON"
        raise ConfigError(f"--mix {path} is not {kind} ({str(exc).splitlines()[0]})") from None


def mixture_spec(path: str, wrap: Callable[[SourceSpec], SourceSpec] = lambda spec: spec,
                 defaults: dict[str, Any] | None = None) -> SourceSpec:
    """The mixture `path` describes: each entry a leaf spec (its keys over `defaults`, the flags given for the whole
    stream, e.g. where), passed through `wrap` (what the flags put around each source, e.g. a held-out split)."""
    data = read_mix(path)
    where = f"--mix {path}"
    if not isinstance(data, dict) or not isinstance(data.get("sources"), list) or not data["sources"]:
        raise ConfigError(f"{where} must hold an object with a non-empty list \"sources\"")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"{where} has unknown key {unknown[0]!r} (it takes {', '.join(TOP_KEYS)})")
    scheduled = "schedule" in data
    children, weights, stops, ids = [], [], [], []
    for i, entry in enumerate(data["sources"], start=1):
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: source #{i} must be an object, got {entry!r}")
        keys = {str(k).replace("-", "_"): v for k, v in entry.items()}
        bad = sorted(set(keys) - set(SOURCE_FLAGS) - set(ENTRY_KEYS))
        if bad:
            raise ConfigError(f"{where}: source #{i} has unknown key {bad[0]!r} (it takes {', '.join(ENTRY_KEYS)} and "
                              f"the source flags: {', '.join(k for k in SOURCE_FLAGS if k != 'tail')})")
        if scheduled and "weight" in keys:
            raise ConfigError(f"{where}: source #{i} has a \"weight\" and the mix a \"schedule\": with a schedule the "
                              "stages give the weights")
        if not scheduled and "weight" not in keys:
            raise ConfigError(f"{where}: source #{i} has no \"weight\"")
        if not scheduled:
            weights.append(keys.pop("weight"))
        stops.append(keys.pop("stop", data.get("stop", "first_exhausted")))
        ids.append(keys.pop("id", ""))
        if not isinstance(ids[-1], str) or (ids[-1] and ids[-1] in ids[:-1]) or ("id" in entry and not ids[-1]):
            raise ConfigError(f"{where}: source #{i}'s \"id\" must be a name no other source has, got {ids[-1]!r}")
        flags = {**(defaults or {}), **keys}
        try:
            children.append(wrap(_leaf(flags)))
        except SettingError as exc:
            raise ConfigError(f"{where}: source #{i}: {exc.naming(lambda field: field)}") from None
        except ConfigError as exc:
            raise ConfigError(f"{where}: source #{i}: {exc}") from None
    named = ids if any(ids) else []
    schedule = _schedule(where, data["schedule"], ids) if scheduled else ()
    try:
        return SourceSpec.of("mixture", *children, by=data.get("by", "tokens"), weights=weights, stops=stops,
                             ids=named, schedule=schedule)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _schedule(where: str, schedule: Any, ids: list[str]) -> list[dict]:
    """A mix file's stages as the spec takes them: keys as field names, weights a list in the sources' order (the
    sources a stage's object does not name weigh 0); ConfigError naming the stage and the key for what is not."""
    if not isinstance(schedule, list) or not schedule:
        raise ConfigError(f"{where}: \"schedule\" must be a non-empty list of stages, got {schedule!r}")
    stages = []
    for k, stage in enumerate(schedule, start=1):
        if not isinstance(stage, dict):
            raise ConfigError(f"{where}: stage #{k} must be an object, got {stage!r}")
        keys = {str(key).replace("-", "_"): value for key, value in stage.items()}
        unknown = sorted(set(keys) - set(STAGE_KEYS))
        if unknown:
            raise ConfigError(f"{where}: stage #{k} has unknown key {unknown[0]!r} (it takes {', '.join(STAGE_KEYS)})")
        weights = keys.get("weights")
        if isinstance(weights, dict):
            named = [name for name in ids if name]
            stray = [str(name) for name in weights if name not in named]
            if stray:
                known = f"its ids: {', '.join(named)}" if named else "no source has an \"id\""
                raise ConfigError(f"{where}: stage #{k}'s \"weights\" name {stray[0]!r}, not a source of the mix "
                                  f"({known})")
            keys["weights"] = [weights.get(name, 0) if name else 0 for name in ids]
        elif not isinstance(weights, list):
            raise ConfigError(f"{where}: stage #{k} has no \"weights\": an object of each source's id and its weight "
                              "(or a list of one weight for each source)")
        stages.append(keys)
    return stages


def _leaf(flags: dict[str, Any]) -> SourceSpec:
    """The source an entry names; a key its kind does not read is a mistake here (a file says what it means)."""
    import dataclasses

    from fwe_cli.loader.sources.registry import LEAF_KINDS, options_class

    kind = flags.get("source") or ("local" if flags.get("local_path") else "hub")
    if kind in LEAF_KINDS:
        takes = {f.name for f in dataclasses.fields(options_class(kind))} | {"source", "tail", "holdout",
                                                                            "holdout_split"}
        stray = sorted(k for k, v in flags.items() if k not in takes and v is not None)
        if stray:
            raise ConfigError(f"{stray[0]!r} is not an option of a {kind} source")
    return SourceSpec.from_flags(flags)

