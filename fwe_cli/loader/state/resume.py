"""The loader's resume state: what it is, what must match to use it, and how it is checked.

    state = loader.state_dict()          # JSON-able; with the training checkpoint
    loader = FineWebLoader(config, state=state)      # or loader.load_state_dict(state)

The state holds the position of the last batch the consumer received (not the producer's: batches waiting in the
prefetch queue are neither lost nor repeated): the `resume` of the document it began in (the source's cursor,
sources.order) and the tokens from there on already delivered (with best-fit rows, the buffer's mark:
rows.best_fit), and the document it ended in as the source's `frontier` (`consumed`: what a change of world size
deals the rest from); the plan a changed world dealt this reader (`plan`), or, before its source opened, the old
readers it is to be dealt from (`from`); the settings a position only means something under (`matching`: tokenizer,
batch shape, reader, shuffle, packing, and the source tree as opened, with what it resolved pinned: a Hub commit),
and a summary of the files each node read as it opened (`source_files`), so that a file rewritten since is refused
by name rather than read from a stale offset. Its size and cost do not grow with
the number of files. Names follow torch.distributed.checkpoint's `Stateful` protocol.

Version 4 deals each reader its own units; a state of an earlier version (positions in the whole stream, read by
every reader) is refused in one line naming its version.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import orjson

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.deal import Ended, Pending
from fwe_cli.loader.sources.position import decode, encode
from fwe_cli.loader.sources.registry import source_class

if TYPE_CHECKING:
    from fwe_cli.loader.sources.spec import SourceSpec
    from fwe_cli.loader.stream import DocumentStream

STATE_VERSION = 4


@dataclasses.dataclass(frozen=True)
class Resumed:
    """What a loader starts from: a config (with what a state pinned), the position of its last batch, the files
    its positions were saved over, the plan a changed world dealt it, or the old readers to deal it from."""

    config: LoaderConfig
    position: dict | None = None
    files: dict | None = None
    plan: object = None
    olds: list | None = None


def _shape(config: LoaderConfig, tokenizer: str | None) -> dict:
    return {"tokenizer": tokenizer, "seq_len": config.seq_len, "batch_size": config.batch_size,
            "shard_mod": config.shard.mod, "shard_rem": config.shard.rem, "shuffle_seed": config.shuffle_seed,
            "shuffle_window": config.shuffle_window if config.shuffle_seed is not None else None,
            "bos": config.bos, "pack": config.pack,
            "pack_buffer": config.pack_buffer if config.pack == "best-fit" else None}


def build_state(config: LoaderConfig, stream: DocumentStream, position: dict | None, batches: int,
                ended: Ended | None) -> dict:
    """The state after `batches` batches, the last one's `position` (None before the first: nothing to check then)
    with the document it `ended` in (`consumed`, the source's frontier there; None right after a resume, whose
    state's own stands)."""
    saved = None
    if position is not None:
        saved = {"doc": encode(position["doc"]), "skip": position["skip"]}
        if "pack" in position:  # a best-fit buffer's mark (rows.best_fit)
            saved["pack"] = position["pack"]
        consumed = stream.source.frontier(*ended) if ended is not None else position.get("consumed")
        if consumed is not None:
            saved["consumed"] = encode(consumed)
    pinned, files = stream.identity()
    state = {"version": STATE_VERSION, "matching": {**_shape(config, stream.tokenizer()), "source": pinned},
             "source_files": files if position is not None else None, "position": saved, "batches": batches}
    if stream.plan is not None:
        state["plan"] = encode(stream.plan)
    elif stream.olds is not None:
        state["from"] = [[encode(plan), encode(front)] for plan, front in stream.olds]
    return state


def check_state(state: object, config: LoaderConfig) -> Resumed:
    """What `state` resumes (`Resumed`), or ConfigError naming the first setting that differs. A config that leaves a
    Hub revision or the tokenizer unset takes the state's (a Hub branch resumes at the commit it was read at). The
    state's reader must be the config's: `check_states` takes the states of every reader of another world."""
    version = state.get("version") if isinstance(state, dict) else None
    if version != STATE_VERSION or "matching" not in state:
        if isinstance(version, int) and version < STATE_VERSION:
            raise ConfigError(f"the resume state is of version {version}, saved by an fwe that read every document on "
                              f"every rank; this fwe deals each reader its own (version {STATE_VERSION}) and cannot "
                              "place that state: start without it, or resume with the fwe that saved it")
        raise ConfigError(f"not a fwe loader resume state of version {STATE_VERSION} (version {version!r})")
    saved = dict(state["matching"])
    saved_source = saved.pop("source", None)
    if "pack" not in saved:  # a state saved before packings had names
        saved.update(pack="greedy" if saved.pop("align_rows", False) else "stream", pack_buffer=None)
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
        if not (isinstance(position, dict) and isinstance(position.get("doc"), dict)):
            raise ConfigError(f"resume state has no usable position ({position!r})")
        position = dict(position, doc=decode(position["doc"]), consumed=decode(position.get("consumed")))
    return Resumed(config, position, state.get("source_files"), decode(state.get("plan")), _olds(state.get("from")))


def _olds(saved: object) -> list | None:
    """The old readers a state's `from` names: (plan, frontier) each, typed."""
    if saved is None:
        return None
    if not isinstance(saved, list) or not all(isinstance(o, list) and len(o) == 2 for o in saved):
        raise ConfigError(f"resume state's `from` is not a list of (plan, frontier) pairs ({str(saved)[:80]})")
    return [(decode(plan), decode(front)) for plan, front in saved]


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


def check_states(states: list | dict, config: LoaderConfig) -> Resumed:
    """`check_state` for one state, or for every reader's state of a world (a list). A list of another world than
    the config's (or of this reader's world, in another order) continues those readers: this reader's plan is dealt
    from what they left (sources.deal) once its source opens. The states must agree in everything but their reader,
    else ConfigError naming the field; a list must hold each reader of its world once."""
    if not isinstance(states, list):
        return check_state(states, config)
    if not states:
        raise ConfigError("an empty list of resume states: give every reader's state of one world, once")
    checked = []
    for state in states:
        matching = state.get("matching") if isinstance(state, dict) else None
        if not isinstance(matching, dict) or "shard_mod" not in matching:
            raise ConfigError("not a fwe loader resume state (no `matching`): give the states `state_dict()` saved")
        checked.append(check_state(state, dataclasses.replace(config, shard=Shard(matching["shard_mod"],
                                                                                  matching["shard_rem"]))))
    first = [dict(s["matching"], shard_rem=None) for s in states]
    for key in sorted(set(first[0])):
        values = {repr(m.get(key)) for m in first}
        if len(values) > 1:
            raise ConfigError(f"the resume states were saved with different {key} ({', '.join(sorted(values))}): "
                              "give the states of one run")
    world = len(states)
    rems = sorted(r.config.shard.rem for r in checked)
    if checked[0].config.shard.mod != world or rems != list(range(world)):
        raise ConfigError(f"the {world} resume states do not hold each reader 0..{world - 1} of one world once "
                          f"(shard_mod {checked[0].config.shard.mod}, shard_rem {rems}): give every reader's state of "
                          "one world, once")
    olds = []
    for resumed in sorted(checked, key=lambda r: r.config.shard.rem):
        shard = resumed.config.shard
        plan = resumed.plan if resumed.olds is None else Pending(tuple(resumed.olds), shard.mod, shard.rem)
        consumed = (resumed.position or {}).get("consumed")
        if resumed.position is not None and consumed is None:
            raise ConfigError("a resume state has no `consumed` document: resume it with the world it was saved by")
        olds.append((plan, consumed))
    config = dataclasses.replace(checked[0].config, shard=config.shard)
    return Resumed(config, None, checked[0].files, None, olds)
