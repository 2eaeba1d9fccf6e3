"""The loader's resume state: what it is, what must match to use it, and how it is checked.

    state = loader.state_dict()          # JSON-able; with the training checkpoint
    loader = FineWebLoader(config, state=state)      # or loader.load_state_dict(state)

The state holds the position of the last batch the consumer received (not the producer's: batches waiting in the
prefetch queue are neither lost nor repeated: a document's `resume`, its source position typed, sources.position),
the settings a position only means something under (`matching`: tokenizer, batch shape, shard, shuffle, and the
source tree as opened, with what it resolved pinned — a Hub commit), and the files each node of the tree read as they
were (`source_files`), so that a file rewritten since is refused by name rather than read from a stale offset. Both
are checked node by node, an error naming the node. Names follow torch.distributed.checkpoint's `Stateful` protocol.

Version 3 typed the positions and made the source a tree; states of versions 1 and 2 (flat settings, positions as
plain lists) are still read (sources.legacy_state).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import orjson

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.elastic import ElasticPlan, replan, replan_children, saved_plan
from fwe_cli.loader.frontier import RecentBatches
from fwe_cli.loader.sources.legacy_state import LEGACY_VERSIONS, upgrade
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.order import resume_from_json, resume_to_json
from fwe_cli.loader.sources.registry import source_class

if TYPE_CHECKING:
    from fwe_cli.loader.sources.spec import SourceSpec
    from fwe_cli.loader.sources.stream import DocumentStream

STATE_VERSION = 3


def _shape(config: LoaderConfig, tokenizer: str | None) -> dict:
    return {"tokenizer": tokenizer, "seq_len": config.seq_len, "batch_size": config.batch_size,
            "shard_mod": config.shard.mod, "shard_rem": config.shard.rem, "shuffle_seed": config.shuffle_seed,
            "shuffle_window": config.shuffle_window if config.shuffle_seed is not None else None,
            "bos": config.bos, "align_rows": config.align_rows}


def build_state(config: LoaderConfig, stream: DocumentStream, position: dict | None, batches: int,
                recent: RecentBatches) -> dict:
    """The state after `batches` batches, the last one's `position` (None before the first: nothing to check then)
    with the document it ended in (`consumed`: [epoch, document, tokens of it delivered, its tokens]: what a change
    of world size starts from; for a source that orders its children, each child's too), and the rank's plan when the
    world changed in this epoch (loader.elastic)."""
    source = stream.source
    saved = None
    if position is not None:
        saved = {"doc": resume_to_json(position["doc"]), "skip": position["skip"]}
        consumed = recent.frontier(position)
        if consumed is not None:
            saved["consumed"] = consumed
        found = recent.frontier_document(position) if source.orders_children else None
        if found is not None:
            saved["children"] = [None if child is None else dict(child, doc=resume_to_json(child["doc"]))
                                 for child in source.child_frontiers(*found)]
    state = {"version": STATE_VERSION,
             "matching": {**_shape(config, stream.tokenizer()), "source": source.pinned_tree()},
             "source_files": source.fingerprint_tree() if position is not None else None,
             "position": saved, "batches": batches}
    if stream.plan is not None:
        state["plan"] = stream.plan.to_dict()
    return state


def check_state(state: object, config: LoaderConfig) -> tuple[LoaderConfig, dict | None, dict | None]:
    """(config to resume with, position, the files the position was saved over), or ConfigError naming the first
    setting that differs. A config that leaves a Hub revision or the tokenizer unset takes the state's (a Hub branch
    resumes at the commit it was read at). The state's shard must be the config's: `check_states` takes the states of
    every rank of another world size."""
    version = state.get("version") if isinstance(state, dict) else None
    if version not in (*LEGACY_VERSIONS, STATE_VERSION) or "matching" not in state:
        raise ConfigError(f"not a fwe loader resume state of version {STATE_VERSION} (version {version!r})")
    if version in LEGACY_VERSIONS:
        state = upgrade(state)
    saved = dict(state["matching"])
    saved_source = saved.pop("source", None)
    if config.tokenizer is None and saved.get("tokenizer"):
        config = dataclasses.replace(config, tokenizer=saved["tokenizer"])
    config = dataclasses.replace(config, source=_adopt(config.source, saved_source))
    static = source_class(config.source)(config.source, config.read_options())  # its class by the spec: no disk
    now = _shape(config, config.tokenizer)
    for key in sorted(set(saved) | set(now)):
        if saved.get(key) != now.get(key):
            raise ConfigError(f"resume state was saved with {key}={saved.get(key)!r}, this loader has "
                              f"{key}={now.get(key)!r}: resume with the same setting, or start without the state")
    _same_tree(saved_source, orjson.loads(orjson.dumps(static.pinned_tree())), "source")  # as JSON holds it
    position = state.get("position")
    if position is not None:
        position = _position(position, state.get("legacy_positions", False))
    return config, position, state.get("source_files")


def _adopt(spec: SourceSpec, saved: object) -> SourceSpec:
    """`spec` with the options its nodes leave unset taken from the saved tree where their kind adopts them."""
    if not isinstance(saved, dict) or saved.get("kind") != spec.kind:
        return spec
    cls = source_class(spec)
    taken = {name: saved[name] for name in cls.adopts if saved.get(name) and getattr(spec.options, name) is None}
    if taken:
        spec = spec.with_options(**taken)
    children = saved.get("children") or []
    if spec.children and len(children) == len(spec.children):
        spec = spec.with_children(tuple(_adopt(c, s) for c, s in zip(spec.children, children)))
    return spec


def _same_tree(saved: object, now: dict, where: str) -> None:
    """ConfigError naming the node and setting where the saved source tree differs from this loader's."""
    if not isinstance(saved, dict):
        raise ConfigError(f"resume state records no source ({saved!r}): give a state `state_dict()` saved")
    for key in sorted((set(saved) | set(now)) - {"children"}):
        if saved.get(key) != now.get(key):
            name = key if where == "source" and key == "kind" else f"{where}.{key}"
            raise ConfigError(f"resume state was saved with {name}={saved.get(key)!r}, this loader has "
                              f"{name}={now.get(key)!r}: resume with the same setting, or start without the state")
    mine, theirs = now.get("children") or [], saved.get("children") or []
    if len(mine) != len(theirs):
        raise ConfigError(f"resume state's {where} has {len(theirs)} child sources, this loader's {len(mine)}: resume "
                          "with the same sources, or start without the state")
    for i, (old, new) in enumerate(zip(theirs, mine)):
        _same_tree(old, new, f"{where}.children[{i}]")


def _position(position: object, legacy: bool) -> dict:
    """A saved position with its document's source position typed (a legacy one stays the list it was: the source
    that opens reads it, Source.legacy_position); the source checks it is one of its own as it opens."""
    if not (isinstance(position, dict) and isinstance(position.get("doc"), dict)):
        raise ConfigError(f"resume state has no usable position ({position!r})")
    return dict(position, doc=position["doc"] if legacy else resume_from_json(position["doc"]))


def check_states(states: list | dict, config: LoaderConfig) -> tuple[LoaderConfig, dict | None, dict | None,
                                                                     ElasticPlan | None]:
    """`check_state` for one state, or for every rank's state of a world (a list): (config, position, files, plan).
    A list of another world size than the config's (or of this rank's world, in another shard) is replanned: this
    rank's share of what those ranks left (loader.elastic); the states must agree in everything but their shard,
    else ConfigError naming the field."""
    if not isinstance(states, list):
        config, position, files = check_state(states, config)
        return config, position, files, saved_plan(states.get("plan"))
    if not states:
        raise ConfigError("an empty list of resume states: give every rank's state of one world, once")
    checked = []
    for state in states:
        matching = state.get("matching") if isinstance(state, dict) else None
        if not isinstance(matching, dict) or "shard_mod" not in matching:
            raise ConfigError("not a fwe loader resume state (no `matching`): give the states `state_dict()` saved")
        shard = Shard(matching["shard_mod"], matching["shard_rem"])
        checked.append(check_state(state, dataclasses.replace(config, shard=shard)))
    first = [dict(s["matching"], shard_rem=None) for s in states]
    for key in sorted(set(first[0])):
        values = {repr(m.get(key)) for m in first}
        if len(values) > 1:
            raise ConfigError(f"the resume states were saved with different {key} ({', '.join(sorted(values))}): "
                              "give the states of one run")
    config = dataclasses.replace(checked[0][0], shard=config.shard)
    if source_class(config.source).orders_children:  # each child replanned on its own; the source starts afresh
        return config, None, checked[0][2], replan_children(states, config.shard, len(config.source.children))
    positions = [c[1] for c in checked]
    plan, position = replan([dict(s, position=p) for s, p in zip(states, positions)], config.shard)
    return config, position, checked[0][2], plan
