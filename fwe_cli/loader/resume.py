"""The loader's resume state: what it is, what must match to use it, and how it is checked.

    state = loader.state_dict()          # JSON-able; with the training checkpoint
    loader = FineWebLoader(config, state=state)      # or loader.load_state_dict(state)

The state holds the position of the last batch the consumer received (not the producer's: batches waiting in the
prefetch queue are neither lost nor repeated), and the settings a position only means something under (source and
the files or commit it read, tokenizer, batch shape, shard, shuffle). Names follow torch.distributed.checkpoint's
`Stateful` protocol, so a FineWebLoader can go straight into a training checkpoint.
"""

from __future__ import annotations

from fwe_cli.errors import ConfigError
from fwe_cli.loader.config import LoaderConfig

STATE_VERSION = 1


def matching(config: LoaderConfig, revision: str | None, files: list[str] | None) -> dict:
    """The settings a position is only valid under (JSON-able), for `config` having read `revision`/`files`."""
    out = {"source": config.source, "tokenizer": config.tokenizer, "seq_len": config.seq_len,
           "batch_size": config.batch_size, "shard_mod": config.shard.mod, "shard_rem": config.shard.rem,
           "shuffle_seed": config.shuffle_seed,
           "shuffle_window": config.shuffle_window if config.shuffle_seed is not None else None}
    if config.source == "hub":
        out.update(dataset=config.dataset, name=config.name, split=config.split, hub_reader=config.hub_reader,
                   revision=revision or config.revision)
    elif config.source == "local":
        out.update(local_path=config.local_path, files=files)
    else:
        out.update(seed=config.seed)
    return out


def build_state(config: LoaderConfig, revision: str | None, files: list[str] | None, position: dict | None,
                batches: int) -> dict:
    return {"version": STATE_VERSION, "matching": matching(config, revision, files), "position": position,
            "batches": batches}


def check_state(state: object, config: LoaderConfig) -> tuple[LoaderConfig, dict | None, list[str] | None]:
    """(config to resume with, position, local files the position was saved over), or ConfigError naming the
    first setting that differs. A Hub config on a branch resumes at the commit the state was read at."""
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION or "matching" not in state:
        version = state.get("version") if isinstance(state, dict) else None
        raise ConfigError(f"not a fwe loader resume state of version {STATE_VERSION} (version {version!r})")
    saved = state["matching"]
    if config.source == "hub" and saved.get("revision") and config.revision is None:
        config = config.replace(revision=saved["revision"])
    now = matching(config, saved.get("revision"), saved.get("files"))
    for key in sorted(set(saved) | set(now)):
        if key != "files" and saved.get(key) != now.get(key):
            raise ConfigError(f"resume state was saved with {key}={saved.get(key)!r}, this loader has "
                              f"{key}={now.get(key)!r}: resume with the same setting, or start without the state")
    position = state.get("position")
    if position is not None and not (isinstance(position, dict) and isinstance(position.get("doc"), dict)):
        raise ConfigError(f"resume state has no usable position ({position!r})")
    return config, position, saved.get("files")
