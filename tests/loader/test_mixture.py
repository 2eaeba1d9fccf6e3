"""A weighted mixture of sources (--mix): the realized token share holds its weight over every window, the batches
do not depend on Q or doc batch, a state resumes exactly, and every bad mix file (a bad schedule too) is one line
and exit 2."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from tests.helpers import check_resumes_at, invoke, write_jsonl
from tests.hubsim.repos import CONFIG_NAME, DATASET_REPO

MARK = "\u00e9"  # the local documents' only character: its two UTF-8 bytes tell its tokens from the Hub's ASCII
BYTES = (0xC3, 0xA9)
SHAPE = dict(tokenizer="byte", seq_len=1024, batch_size=8)


@pytest.fixture
def marked_jsonl(tmp_path):
    """Local documents as long as synthetic ones (log-normal, a long tail), each made of MARK only."""
    return write_jsonl(tmp_path / "mine.jsonl", [{"id": f"mine-{i}", "text": MARK * (len(r["text"]) // 2)}
                                                  for i, r in enumerate(synthetic_record(5, i) for i in range(400))])


def mix_file(tmp_path, *entries, **top) -> str:
    path = tmp_path / "mix.json"
    path.write_bytes(orjson.dumps({**top, "sources": list(entries)}))
    return str(path)


def hub_entry(weight, **extra):
    return {"weight": weight, "source": "hub", "dataset": DATASET_REPO, "name": CONFIG_NAME, **extra}


def test_a_token_mix_holds_its_share_over_every_window_of_1000_batches(hub_env, marked_jsonl, tmp_path):
    """0.7 of the test Hub and 0.3 of a local JSONL, by tokens, 8x1024 batches: the local share of the tokens in
    every window of 1,000 consecutive batches (sliding by 10) is 0.3 within 0.5 points; the stats say the same."""
    path = mix_file(tmp_path, hub_entry(0.7, stop="cycle"),
                    {"weight": 0.3, "local_path": str(marked_jsonl), "stop": "cycle"})
    local = []
    with FineWebLoader(resolve_config(env={}, mix=path, **SHAPE)) as loader:
        for _ in range(1300):
            batch = loader.next_batch()
            local.append(int(np.isin(batch, BYTES).sum()))
        sources = loader.stats()["sources"]
    local = np.cumsum([0] + local)
    window = 1000 * 8 * 1024
    shares = [(local[a + 1000] - local[a]) / window for a in range(0, len(local) - 1000, 10)]
    assert max(abs(share - 0.3) for share in shares) < 0.005, (min(shares), max(shares))
    assert [s["weight"] for s in sources] == [0.7, 0.3]
    assert abs(sources[1]["tokens"] / sum(s["tokens"] for s in sources) - 0.3) < 0.005


@pytest.mark.parametrize("by", ["tokens", "documents"])
def test_the_mix_does_not_depend_on_queue_depth_or_doc_batch(marked_jsonl, tmp_path, by):
    """The same 40 batches for Q 2 and 16, doc batch 1 and 64, tokenizer threads 1 and 2 (no random generator, no
    timing: the next document's source is computed from what came before)."""
    path = mix_file(tmp_path, {"weight": 2, "source": "synthetic", "seed": 1},
                    {"weight": 1, "local_path": str(marked_jsonl), "stop": "cycle"}, by=by)
    runs = []
    for knobs in (dict(queue_depth=2, doc_batch=1, tokenizer_threads=1), dict(queue_depth=16, doc_batch=64,
                                                                            tokenizer_threads=2)):
        with FineWebLoader(resolve_config(env={}, mix=path, **SHAPE, **knobs)) as loader:
            runs.append([loader.next_batch().copy() for _ in range(40)])
    assert all(np.array_equal(a, b) for a, b in zip(*runs, strict=True))


def test_a_state_saved_at_any_point_resumes_the_mix_exactly(marked_jsonl, tmp_path):
    """States saved after 1, 4, 9, 17 and 30 batches each resume with the uninterrupted run's next batches, byte for
    byte, under other Q and doc batch."""
    path = mix_file(tmp_path, {"weight": 0.5, "source": "synthetic", "seed": 1},
                    {"weight": 0.25, "source": "synthetic", "seed": 2, "stop": "cycle"},
                    {"weight": 0.25, "local_path": str(marked_jsonl), "stop": "cycle"})
    check_resumes_at(resolve_config(env={}, mix=path, **SHAPE), (1, 4, 9, 17, 30), 4)


def test_a_first_exhausted_source_ends_the_mix_and_a_cycled_one_starts_over(tmp_path):
    """A mix ends when a source of policy first_exhausted has no document left; a cycled one comes again."""
    small = write_jsonl(tmp_path / "small.jsonl", [{"text": f"doc {i} " * 50} for i in range(20)])
    ends = mix_file(tmp_path, {"weight": 1, "local_path": str(small)}, {"weight": 1, "source": "synthetic"})
    with FineWebLoader(resolve_config(env={}, mix=ends, tokenizer="byte", seq_len=256, batch_size=1)) as loader:
        n = sum(1 for _ in loader)
        assert loader.stats()["sources"][0]["documents"] == 20
    assert 0 < n < 200
    cycles = mix_file(tmp_path, {"weight": 1, "local_path": str(small), "stop": "cycle"},
                      {"weight": 1, "source": "synthetic"})
    with FineWebLoader(resolve_config(env={}, mix=cycles, tokenizer="byte", seq_len=256, batch_size=1)) as loader:
        for _ in range(3 * n):
            loader.next_batch()
        assert loader.stats()["sources"][0]["documents"] > 20


NAMED = [{"id": "a", "source": "synthetic", "seed": 1}, {"id": "b", "source": "synthetic", "seed": 2}]
STAGE = {"until_step": 10, "weights": {"a": 1}}


@pytest.mark.parametrize("entries, top, needle", [
    ([{"weight": -1, "source": "synthetic"}], {}, "weight of mix source #1 must be a number >= 0, got -1"),
    ([{"weight": "lots", "source": "synthetic"}], {}, "got 'lots'"),
    ([{"weight": 0, "source": "synthetic"}, {"weight": 0.0, "source": "synthetic", "seed": 2}], {}, "all zero"),
    ([{"weight": 1, "source": "synthetic", "colour": "red"}], {}, "unknown key 'colour'"),
    ([{"weight": 1, "source": "s3"}], {}, "'s3'"),
    ([{"weight": 1, "source": "synthetic", "dataset": "x/y"}], {}, "'dataset' is not an option of a synthetic"),
    ([{"source": "synthetic"}], {}, "has no \"weight\""),
    ([{"weight": 1, "source": "synthetic", "stop": "never"}], {}, "'never'"),
    ([{"weight": 1, "source": "synthetic"}], {"by": "bytes"}, "'bytes'"),
    ([{"weight": 1, "source": "synthetic"}], {"shuffle": True}, "unknown key 'shuffle'"),
    ([{"weight": 1, "source": "synthetic", "id": "x"}, {"weight": 1, "source": "synthetic", "id": "x"}], {},
     "source #2's \"id\" must be a name no other source has, got 'x'"),
    # a schedule (compose.schedule): one line naming the stage and the key
    (NAMED, {"schedule": [STAGE, {"until_step": 5, "weights": {"b": 1}}]},
     "stage #2's \"until_step\" 5 is not after stage #1's 10: stages go in order"),
    (NAMED, {"schedule": [{"until_step": 10, "weights": {"a": 0, "b": 0}}]},
     "stage #1's \"weights\" must sum to a number above 0"),
    (NAMED, {"schedule": [{"until_step": 10, "weights": {"a": -1, "b": 2}}]},
     "stage #1's weight of 'a' must be a number >= 0"),
    (NAMED, {"schedule": [STAGE, {"weights": {"c": 1}}]},
     "stage #2's \"weights\" name 'c', not a source of the mix (its ids: a, b)"),
    (NAMED, {"schedule": [dict(STAGE, unitl_step=3)]}, "stage #1 has unknown key 'unitl_step'"),
    (NAMED, {"schedule": [{"until_step": 10}]}, "stage #1 has no \"weights\""),
    (NAMED, {"schedule": [STAGE, {"until_tokens": 99, "weights": {"b": 1}}]},
     "stage #2 ends by \"until_tokens\", stage #1 by"),
    (NAMED, {"schedule": [{"weights": {"a": 1}}, STAGE]}, "stage #1 has no \"until_step\" or \"until_tokens\""),
    (NAMED, {"schedule": [dict(STAGE, ramp="linear")]}, "stage #1 has \"ramp\" but no stage before it"),
    (NAMED, {"schedule": [STAGE, {"until_step": 20, "weights": {"b": 1}, "ramp": "cubic"}]},
     "stage #2's \"ramp\" must be linear"),
    (NAMED, {"schedule": [dict(STAGE, until_step=0)]},
     "stage #1's \"until_step\" must be a whole number above 0, got 0"),
    (NAMED, {"schedule": [dict(STAGE, until_tokens=5)]}, "stage #1 has both \"until_step\" and \"until_tokens\""),
    (NAMED, {"schedule": [STAGE], "by": "documents"}, "a mix's \"schedule\" counts tokens"),
    ([dict(NAMED[0], weight=1), NAMED[1]], {"schedule": [STAGE]},
     "source #1 has a \"weight\" and the mix a \"schedule\""),
    (NAMED, {"schedule": "soon"}, "\"schedule\" must be a non-empty list of stages"),
])
def test_a_bad_mix_is_one_line_naming_it_and_exit_2(tmp_path, entries, top, needle):
    """Each bad mix file (a bad schedule: naming the stage and the key): a ConfigError from the config, and
    `fwe smoke` exits 2 with one line naming what is wrong and the file, writing no artifact."""
    path = mix_file(tmp_path, *entries, **top)
    with pytest.raises(ConfigError, match=None) as caught:
        resolve_config(env={}, mix=path)
    assert needle in str(caught.value) and path in str(caught.value)
    result = invoke("smoke", "--mix", path, "--artifacts-dir", str(tmp_path / "art"))
    assert result.exit_code == 2 and needle in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "art").exists()


def test_a_mix_beside_a_single_source_flag_or_unreadable_is_refused(tmp_path):
    """--mix with --local-path beside it, a missing file, a file that is not JSON, and NSA_FWE_MIX given to fwe
    bootstrap (which copies one source) are each one line, exit 2."""
    path = mix_file(tmp_path, {"weight": 1, "source": "synthetic"})
    beside = invoke("smoke", "--mix", path, "--local-path", "x.jsonl", "--artifacts-dir", str(tmp_path / "a"))
    assert beside.exit_code == 2 and "--mix names its sources itself" in beside.stderr
    missing = invoke("smoke", "--mix", str(tmp_path / "none.json"), "--artifacts-dir", str(tmp_path / "a"))
    assert missing.exit_code == 2 and "none.json" in missing.stderr
    (tmp_path / "bad.json").write_text("{nope")
    garbled = invoke("smoke", "--mix", str(tmp_path / "bad.json"), "--artifacts-dir", str(tmp_path / "a"))
    assert garbled.exit_code == 2 and "is not JSON" in garbled.stderr
    copy = invoke("bootstrap", "--source", "synthetic", "--gb", "0.001", "--out", str(tmp_path / "out"),
                  env={"NSA_FWE_MIX": path})
    assert copy.exit_code == 2 and "NSA_FWE_MIX" in copy.stderr and not (tmp_path / "out").exists()


def test_a_toml_mix_and_the_variable_name_the_same_mix(tmp_path):
    """A TOML mix file reads as its JSON twin, and NSA_FWE_MIX names it when --mix is not given."""
    json_path = mix_file(tmp_path, {"weight": 3, "source": "synthetic", "seed": 1},
                         {"weight": 1, "source": "synthetic", "seed": 2})
    toml = tmp_path / "mix.toml"
    toml.write_text('by = "tokens"\n[[sources]]\nweight = 3\nsource = "synthetic"\nseed = 1\n'
                    '[[sources]]\nweight = 1\nsource = "synthetic"\nseed = 2\n')
    assert resolve_config(env={}, mix=str(toml)).source == resolve_config(env={}, mix=json_path).source
    assert resolve_config(env={"NSA_FWE_MIX": json_path}).source.kind == "mixture"



def _consumed(loader, index: dict, batches: int | None = None):
    """((child, its document) -> tokens of it this reader delivered, the last such document) from batches of one
    token, `batches` of them or to the end: every token ends a batch, so the document each batch ended in names every
    one, and one the batches have moved past was delivered whole. `index`: (child, byte offset after a line) -> the
    line's number in its file."""
    seen: dict[tuple[int, int], int] = {}
    last = None
    for n, _ in enumerate(loader, start=1):
        cursor, delivered, tokens = loader.pipeline.recent.ended(loader._position)
        c, after = cursor.child, cursor.at.window.end_at
        key = (c, index[c, after.offset])
        if last is not None and key != last[0]:
            seen[last[0]] = last[1]  # moved past: whole
        seen[key] = delivered
        last = (key, tokens)
        if n == batches:
            break
    return seen, last and last[0]


@pytest.mark.parametrize("by", ["documents", "tokens"])
def test_a_mix_saved_on_2_ranks_resumes_on_3_with_every_document_once(tmp_path, by):
    """Two ranks read a mix for a while and save their states; three ranks resume from all of them and read to the
    end. Over the whole job every document of the source that ends the mix comes exactly once, token for token
    (a document cut by the change of world size: its start on an old rank, its rest on a new one), and every other
    document read comes whole and once."""
    lengths = {0: [5 + i % 13 for i in range(90)], 1: [4 + i % 7 for i in range(400)]}
    a = write_jsonl(tmp_path / "a.jsonl", [{"text": "a" * n} for n in lengths[0]])
    b = write_jsonl(tmp_path / "b.jsonl", [{"text": "b" * n} for n in lengths[1]])
    path = mix_file(tmp_path, {"weight": 1, "local_path": str(a)}, {"weight": 1, "local_path": str(b)}, by=by)
    index = {}
    for c, file in enumerate((a, b)):
        end = 0
        for i, line in enumerate(open(file, "rb")):
            end += len(line)
            index[c, end] = i
    shape = dict(tokenizer="byte", seq_len=1, batch_size=1, doc_batch=3)
    delivered: dict[tuple[int, int], int] = {}
    states = []
    ends = set()  # each new rank's last document: the final partial batch is never emitted
    for rem in range(2):
        with FineWebLoader(resolve_config(env={}, mix=path, shard_mod=2, shard_rem=rem, **shape)) as loader:
            seen, _ = _consumed(loader, index, 243 + 160 * rem)
            states.append(orjson.loads(orjson.dumps(loader.state_dict())))
        for key, n in seen.items():
            delivered[key] = delivered.get(key, 0) + n
    for rem in range(3):
        with FineWebLoader(resolve_config(env={}, mix=path, shard_mod=3, shard_rem=rem, **shape),
                           state=states) as loader:
            seen, last = _consumed(loader, index)
        ends.add(last)
        for key, n in seen.items():
            delivered[key] = delivered.get(key, 0) + n
    assert {i for c, i in delivered if c == 0} >= set(range(90)) - {i for c, i in ends if c == 0}
    wrong = {key: n for key, n in delivered.items() if n != lengths[key[0]][key[1]] + 1 and key not in ends}
    assert wrong == {} and all(delivered[key] <= lengths[key[0]][key[1]] + 1 for key in ends)


def test_a_held_out_split_beside_a_mix_splits_each_of_its_sources(tmp_path):
    """--holdout with --mix: each source of the mix is split (the same documents held out as in that source alone),
    the two sides of the mix are disjoint by id and together hold what each source gives."""
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": f"a{i}", "text": f"doc a{i} " * 30} for i in range(300)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": f"b{i}", "text": f"doc b{i} " * 30} for i in range(300)])
    path = mix_file(tmp_path, {"weight": 1, "local_path": str(a)}, {"weight": 1, "local_path": str(b), "stop": "cycle"},
                    by="documents")
    from fwe_cli.loader.stream import DocumentStream

    def ids(**split):
        config = resolve_config(env={}, mix=path, tokenizer="byte", holdout=0.1, **split)
        assert all(child.kind == "holdout" for child in config.source.children)
        seen = []
        for doc in DocumentStream(config):
            if doc.id.startswith("a"):
                seen.append(doc.id)
            if len(seen) == 300:
                break
        return seen

    train, held = set(ids()), set(ids(holdout_split="holdout"))
    assert not train & held and {d for d in train | held if d.startswith("a")} == {f"a{i}" for i in range(300)}
    alone = resolve_config(env={}, local_path=str(a), tokenizer="byte", holdout=0.1, holdout_split="holdout")
    assert held == {doc.id for doc in DocumentStream(alone)}


def test_a_cycled_source_without_documents_is_one_line_not_a_hang(tmp_path):
    """A mix whose cycled source holds no document fails at once naming it (no endless walk through empty epochs)."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    path = mix_file(tmp_path, {"weight": 1, "local_path": str(empty), "stop": "cycle"},
                    {"weight": 1, "source": "synthetic"})
    with FineWebLoader(resolve_config(env={}, mix=path, tokenizer="byte", seq_len=64, loader_timeout=60)) as loader:
        with pytest.raises(ConfigError, match="has no document to cycle through"):
            loader.next_batch()
