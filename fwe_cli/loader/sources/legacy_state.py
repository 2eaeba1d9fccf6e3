"""Resume states of fwe before typed positions (versions 1 and 2), read as today's: a training job checkpointed with
an older fwe resumes with this one.

Those states recorded the source flat beside the other settings (`matching`: {"source": kind, its fields, the
tokenizer, the shape, ...}; a bootstrap continued from the Hub as kind 'local' with `tail`), the files read as one
list (version 1: paths inside `matching`), and each position as a plain list of the source's values. `upgrade` gives
the same state in version 3's shape; its positions stay lists, marked `legacy_positions`, for the source that opens
to read (Source.legacy_position).
"""

from __future__ import annotations

LEGACY_VERSIONS = (1, 2)
SHAPE = ("tokenizer", "seq_len", "batch_size", "shard_mod", "shard_rem", "shuffle_seed", "shuffle_window")


def upgrade(state: dict) -> dict:
    """A version 1 or 2 state in version 3's shape (`matching.source` a tree, `source_files` per node)."""
    matching = dict(state["matching"])
    kind = matching.pop("source", None)
    shape = {key: matching.pop(key) for key in SHAPE if key in matching}
    shape.update(bos=False, align_rows=False)  # the one layout there was
    if state.get("version") == 1:
        paths = matching.pop("files", None)
        files = None if paths is None else [{"path": path} for path in paths]
    else:
        files = state.get("source_files")
    if kind == "local" and matching.get("tail"):  # a bootstrap continued from the Hub: today a composite
        node = {"kind": "head_tail", "revision": matching.get("revision"),
                "children": [{"kind": "local", "local_path": matching.get("local_path")}]}
        tree = {"files": None, "children": [{"files": files}]}
    else:
        node = {"kind": kind, **matching}
        tree = {"files": files}
    return dict(state, version=3, matching={**shape, "source": node},
                source_files=tree if state.get("position") is not None else None, legacy_positions=True)
