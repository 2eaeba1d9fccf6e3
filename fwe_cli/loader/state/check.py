"""A state checked against the loader that resumes it: what must match, what the state lends the config, and what
the loader starts from (`Resumed`).

One reader's state resumes the same reader (its `reader`), under the settings it was saved with (its `matching`:
tokenizer, batch shape and layout, shuffle, packing, epochs, the source tree node by node): a setting that differs is
a ConfigError naming it and both values, never a silent empty or repeated run. The config takes from the state what
it leaves open (a Hub branch's commit, the tokenizer a state names) and the epoch its stream began at (one notion of
epoch: a DataLoader pass's, set_epoch's). Every reader's state of a world, in a list, continues those readers in this
loader's world: they must be one world of one run (each reader once, the same settings and epoch), and this reader
is dealt its share of what they left when its source opens (state.elastic).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import orjson

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.sources.position import Position, decode
from fwe_cli.loader.sources.registry import source_class
from fwe_cli.loader.sources.spec import SourceSpec
from fwe_cli.loader.state.elastic import OldReader, Pending
from fwe_cli.loader.state.model import DONE, FRESH, State
from fwe_cli.loader.state.taking import matching


@dataclass(frozen=True)
class Resumed:
    """What a loader starts from: a config (with what a state lent it), the state of its reader (None: none), the
    last batch's position (typed), the files its positions were saved over, the plan a changed world dealt it, or
    the old readers to deal it from."""

    config: LoaderConfig
    state: State | None = None
    position: dict | None = None
    files: dict | None = None
    plan: Position | None = None
    olds: list[OldReader] | None = None

    @property
    def done(self) -> bool:
        """Its reader's stream had ended: it resumes ended."""
        return self.state is not None and self.state.status == DONE


def _parsed(state: object) -> State:
    return state if isinstance(state, State) else State.from_json(state)


def _differs(name: str, saved: object, now: object) -> ConfigError:
    return ConfigError(f"resume state was saved with {name}={saved!r}, this loader has {name}={now!r}: resume with "
                       "the same setting, or start without the state")


def check_state(state: object, config: LoaderConfig) -> Resumed:
    """What one reader's `state` (a `state_dict()`, or a State) resumes, or ConfigError naming the first setting that
    differs. The state's reader must be the config's: `check_states` takes every reader's state of another world."""
    state = _parsed(state)
    for name, saved, now in (("shard_mod", state.reader.mod, config.shard.mod),
                             ("shard_rem", state.reader.rem, config.shard.rem)):
        if saved != now:
            raise _differs(name, saved, now)
    config = config.replace(epoch=state.epoch)
    if state.matching is None:  # fresh, taken before its loader ran: nothing to match
        return Resumed(config, state)
    saved = dict(state.matching)
    saved_source = saved.pop("source", None)
    if config.tokenizer is None and saved.get("tokenizer"):
        config = config.replace(tokenizer=saved["tokenizer"])
    config = config.replace(source=_adopt(config.source, saved_source))
    static = source_class(config.source)(config.source, config.read_options())  # its class by the spec: no disk
    now = matching(config, config.tokenizer, static.pinned_tree())
    now_source = now.pop("source")
    for key in sorted(set(saved) | set(now)):
        if saved.get(key) != now.get(key):
            raise _differs(key, saved.get(key), now.get(key))
    _same_tree(saved_source, now_source, "source")
    position = state.position
    if position is not None:
        if not isinstance(position.get("doc"), dict) or not isinstance(position.get("skip"), int):
            raise ConfigError(f"resume state has no usable position ({str(position)[:80]})")
        position = dict(position, doc=decode(position["doc"]))
    olds = [_old(old) for old in state.olds] if state.olds is not None else None
    return Resumed(config, state, position, state.files, decode(state.plan), olds)


def _old(data: object) -> OldReader:
    old = decode(data)
    if not isinstance(old, OldReader):
        raise ConfigError(f"resume state's `from` holds {str(data)[:80]}, not an old reader")
    return old


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
            raise _differs(key if where == "source" and key == "kind" else f"{where}.{key}", saved.get(key),
                           now.get(key))
    mine, theirs = now.get("children") or [], saved.get("children") or []
    if len(mine) != len(theirs):
        raise ConfigError(f"resume state's {where} has {len(theirs)} child sources, this loader's {len(mine)}: resume "
                          "with the same sources, or start without the state")
    for i, (old, new) in enumerate(zip(theirs, mine)):
        _same_tree(old, new, f"{where}.children[{i}]")


def check_states(states: object, config: LoaderConfig) -> Resumed:
    """`check_state` for one state, or for every reader's state of a world (a list): a list of another world than the
    config's (or of this reader's world, in another order) continues those readers, this reader's plan dealt from
    what they left once its source opens. The states must be one world of one run, else ConfigError naming what
    differs."""
    if not isinstance(states, list):
        return check_state(states, config)
    if not states:
        raise ConfigError("an empty list of resume states: give every reader's state of one world, once")
    parsed = sorted((_parsed(state) for state in states), key=lambda s: s.reader.rem)
    world = len(parsed)
    rems = [s.reader.rem for s in parsed]
    if {s.reader.mod for s in parsed} != {world} or rems != list(range(world)):
        raise ConfigError(f"the {world} resume states do not hold each reader 0..{world - 1} of one world once "
                          f"(shard_mod {sorted({s.reader.mod for s in parsed})}, shard_rem {rems}): give every "
                          "reader's state of one world, once")
    epochs = sorted({s.epoch for s in parsed})
    if len(epochs) > 1:
        raise ConfigError(f"the resume states were saved in different epochs ({epochs}): give the states of one "
                          "pass, saved at one step")
    checked = [check_state(state, config.replace(shard=state.reader)) for state in parsed]
    saved = [s for s in parsed if s.matching is not None]
    for key in sorted(set().union(*(s.matching for s in saved))):
        values = {orjson.dumps(s.matching.get(key), option=orjson.OPT_SORT_KEYS) for s in saved}
        if len(values) > 1:
            shown = ", ".join(sorted(v.decode() for v in values))
            raise ConfigError(f"the resume states were saved with different {key} ({shown}): give the states of one "
                              "run")
    olds = [_reader_left(state, resumed) for state, resumed in zip(parsed, checked)]
    base = next((r for r in checked if r.state.matching is not None), checked[0])
    files = next((s.files for s in saved if s.files is not None), None)
    return Resumed(dataclasses.replace(base.config, shard=config.shard), None, None, files, None, olds)


def _reader_left(state: State, resumed: Resumed) -> OldReader:
    """What one reader of a world that stopped left, as the dealing of a new world takes it."""
    mod, rem = state.reader.mod, state.reader.rem
    plan = resumed.plan if resumed.olds is None else Pending(tuple(resumed.olds), mod, rem)
    if state.status == FRESH or state.position is None:
        return OldReader(mod, rem, plan, None, 0, 0)
    ended = state.ended
    if not (isinstance(ended, list) and len(ended) == 3 and isinstance(ended[0], dict)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in ended[1:])):
        raise ConfigError("a resume state has no `ended` document: resume it with the world it was saved by")
    held = state.held or {}
    return OldReader(mod, rem, plan, decode(ended[0]), ended[1], ended[2], decode(held.get("from")),
                     held.get("read", 0), held.get("taken", ""))
