"""The loader's resume state: what it is, what must match to use it, and how it is checked.

    state = loader.state_dict()          # JSON-able; with the training checkpoint
    loader = FineWebLoader(config, state=state)      # or loader.load_state_dict(state)

The state holds the position of the last batch the consumer received (not the producer's: batches waiting in the
prefetch queue are neither lost nor repeated), the settings a position only means something under (the source and
what it resolved — the Hub commit read —, tokenizer, batch shape, shard, shuffle: `matching`), and the files it read
as they were (`source_files`: path, size and modification time), so that a file rewritten since is refused by name
rather than read from a stale offset. Names follow torch.distributed.checkpoint's `Stateful` protocol, so a
FineWebLoader can go straight into a training checkpoint.

Version 2 added `source_files`; a version 1 state (its files by path only, inside `matching`) is still read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.elastic import ElasticPlan, replan
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.registry import source_class

if TYPE_CHECKING:
    from fwe_cli.loader.sources.stream import DocumentStream

STATE_VERSION = 2
READABLE_VERSIONS = (1, 2)
ADOPTED = ("revision", "tokenizer")
"""Settings a resumed config left unset takes from the state: the commit a branch was read at, and the tokenizer
the documents were encoded with (a token directory's own)."""


def _shape(config: LoaderConfig) -> dict:
    return {"tokenizer": config.tokenizer, "seq_len": config.seq_len, "batch_size": config.batch_size,
            "shard_mod": config.shard.mod, "shard_rem": config.shard.rem, "shuffle_seed": config.shuffle_seed,
            "shuffle_window": config.shuffle_window if config.shuffle_seed is not None else None}


def matching(config: LoaderConfig, stream: DocumentStream) -> dict:
    """The settings a position is only valid under (JSON-able), for `config` reading `stream` (opened)."""
    return {"source": config.source.kind, **_shape(config), "tokenizer": stream.tokenizer(),
            **stream.source.pinned()}


def build_state(config: LoaderConfig, stream: DocumentStream, position: dict | None, batches: int,
                consumed: list[int] | None = None) -> dict:
    """The state after `batches` batches, the last one's `position` (None before the first: nothing to check then)
    with the document it ended in (`consumed`: [epoch, document, tokens of it delivered, its tokens]: what a change
    of world size starts from), and the rank's plan when the world changed in this epoch (loader.elastic)."""
    files = stream.source.fingerprint() if position is not None else None
    if position is not None and consumed is not None:
        position = dict(position, consumed=consumed)
    state = {"version": STATE_VERSION, "matching": matching(config, stream), "source_files": files,
             "position": position, "batches": batches}
    if stream.plan is not None:
        state["plan"] = stream.plan.to_dict()
    return state


def check_state(state: object, config: LoaderConfig) -> tuple[LoaderConfig, dict | None, list[dict] | None]:
    """(config to resume with, position, the files the position was saved over), or ConfigError naming the first
    setting that differs. A config that leaves the revision or the tokenizer unset takes the state's (a Hub branch
    resumes at the commit it was read at). The state's shard must be the config's: `check_states` takes the states of
    every rank of another world size."""
    version = state.get("version") if isinstance(state, dict) else None
    if version not in READABLE_VERSIONS or "matching" not in state:
        raise ConfigError(f"not a fwe loader resume state of version {STATE_VERSION} (version {version!r})")
    saved = dict(state["matching"])
    files = state.get("source_files") if version == 2 else _paths(saved.pop("files", None))
    adopt = {key: saved[key] for key in ADOPTED if saved.get(key) and key in saved}
    config = config.replace(**{k: v for k, v in adopt.items() if _unset(config, k)})
    static = source_class(config.source)(config.source, config.read_options())
    now = {"source": config.source.kind, **_shape(config), **static.pinned()}
    for key in sorted(set(saved) | set(now)):
        if saved.get(key) != now.get(key):
            raise ConfigError(f"resume state was saved with {key}={saved.get(key)!r}, this loader has "
                              f"{key}={now.get(key)!r}: resume with the same setting, or start without the state")
    position = state.get("position")
    if position is not None and not (isinstance(position, dict) and isinstance(position.get("doc"), dict)):
        raise ConfigError(f"resume state has no usable position ({position!r})")
    return config, position, files


def _unset(config: LoaderConfig, key: str) -> bool:
    return (config.tokenizer if key == "tokenizer" else getattr(config.source, key)) is None


def _paths(files: list | None) -> list[dict] | None:
    """A version 1 state's files (paths as listed) in the fingerprint's shape."""
    return None if files is None else [{"path": path} for path in files]


def check_states(states: list, config: LoaderConfig) -> tuple[LoaderConfig, dict | None, list[dict] | None,
                                                                ElasticPlan | None]:
    """`check_state` for one state, or for every rank's state of a world (a list): (config, position, files, plan).
    A list of another world size than the config's (or of this rank's world, in another shard) is replanned: this
    rank's share of what those ranks left (loader.elastic); the states must agree in everything but their shard,
    else ConfigError naming the field."""
    if not isinstance(states, list):
        config, position, files = check_state(states, config)
        saved = states.get("plan")
        return config, position, files, ElasticPlan.from_dict(saved) if saved else None
    if not states:
        raise ConfigError("an empty list of resume states: give every rank's state of one world, once")
    checked = []
    for state in states:
        matching = state.get("matching") if isinstance(state, dict) else None
        if not isinstance(matching, dict) or "shard_mod" not in matching:
            raise ConfigError("not a fwe loader resume state (no `matching`): give the states `state_dict()` saved")
        shard = Shard(matching["shard_mod"], matching["shard_rem"])
        checked.append(check_state(state, config.replace(shard=shard)))
    first = [dict(s["matching"], shard_rem=None) for s in states]
    for key in sorted(set(first[0])):
        values = {repr(m.get(key)) for m in first}
        if len(values) > 1:
            raise ConfigError(f"the resume states were saved with different {key} ({', '.join(sorted(values))}): "
                              "give the states of one run")
    plan, position = replan(states, config.shard)
    return checked[0][0].replace(shard=config.shard), position, checked[0][2], plan
