"""A mix's schedule (compose.schedule): weights a pure function of the job's step, on every rank and DataLoader worker
alike; a schedule whose future changed resumes a state, one whose past changed is refused naming the stage; a stage
past the end of a source that ends the mix is one line; the stats and heartbeat lines say what each stage planned
and delivered, and the weights in force. (A bad schedule in a mix file: tests/loader/test_mixture.py.)"""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from fwe_cli.errors import ConfigError
from fwe_cli.loader import FineWebLoader, LoaderConfig, resolve_config
from fwe_cli.loader.compose.mix_positions import MixClock
from fwe_cli.loader.compose.schedule import Stage, Timeline
from fwe_cli.loader.shard import Shard
from tests.helpers import invoke, write_jsonl
from tests.loader.token_dirs import write_token_dir

SHAPE = dict(tokenizer="byte", seq_len=16, batch_size=4)


def sources(tmp_path, docs: int = 600, stop: str = "cycle") -> list[dict]:
    """Two JSONL sources of one letter each (ids a and b): document i of `4 + i % 13` bytes."""
    entries = []
    for letter in "ab":
        path = write_jsonl(tmp_path / f"{letter}.jsonl", [{"text": letter * (4 + i % 13)} for i in range(docs)])
        entries.append({"id": letter, "local_path": str(path), "stop": stop})
    return entries


def mix_file(tmp_path, name: str = "mix.json", **top) -> str:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(top))
    return str(path)


def run(path: str, batches: int, state=None, **settings) -> tuple[list[np.ndarray], dict]:
    with FineWebLoader(resolve_config(env={}, mix=path, **{**SHAPE, **settings}), state=state) as loader:
        taken = [loader.next_batch().copy() for _ in range(batches)]
        return taken, orjson.loads(orjson.dumps(loader.state_dict()))


def b_share(batch: np.ndarray) -> float:
    return float((batch == ord("b")).sum() / ((batch == ord("a")).sum() + (batch == ord("b")).sum()))


def test_a_one_stage_schedule_is_the_mix_of_its_weights(tmp_path):
    """A schedule of one stage of constant weights reads the very batches of a mix of those weights."""
    entries = sources(tmp_path)
    fixed = mix_file(tmp_path, "fixed.json", sources=[dict(e, weight=w) for e, w in zip(entries, (2, 1))])
    staged = mix_file(tmp_path, "staged.json", sources=entries, schedule=[{"weights": {"a": 2, "b": 1}}])
    assert all(np.array_equal(x, y) for x, y in zip(run(fixed, 30)[0], run(staged, 30)[0], strict=True))


def test_a_ramps_targets_are_the_sum_of_the_weights_in_force_over_its_tokens():
    """Timeline.targets (closed form) equals the weights in force summed token by token, for clocks of any world,
    worker, batch and origin, by steps and by tokens."""
    for trial in range(60):
        draw = random.Random(trial)
        clock = MixClock(draw.choice((0, 7)), draw.choice((0, 900)), draw.choice((1, 3)), draw.choice((1, 2)), 0,
                         draw.choice((3, 8)))
        if draw.random() < 0.5:
            first = clock.tokens_at(clock.step) + draw.randint(20, 200)
            stages = (Stage((1, 2, 0), until_tokens=first),
                      Stage((0, 1, 3), until_tokens=first + draw.randint(300, 3000), ramp="linear"))
        else:
            first = clock.step + draw.randint(1, 9)
            stages = (Stage((1, 2, 0), until_step=first), Stage((0, 1, 3), until_step=first + 40, ramp="linear"))
        timeline = Timeline(stages, clock)
        inside = [u for u in range(600) if timeline.stage_at(clock.step_of(u)) == 1]
        begun, now = inside[0] + draw.randint(0, 3), inside[-1] - draw.randint(0, 3)
        summed = np.sum([timeline.weights(1, clock.step_of(u)) for u in range(begun, now)], axis=0)
        assert np.allclose(timeline.targets(1, begun, now), summed), trial


def test_a_readers_clock_reads_its_batches_as_the_jobs_steps():
    """Worker w of n on a rank: its batch i is the job's step i x n + w; a world begun at step 40 counts from there;
    the job's tokens are every rank's; the step after a reader's last batch is what a changed world begins at."""
    clock = MixClock(step=40, tokens=40 * 64 * 3, ranks=3, workers=2, worker=1, batch=64)
    assert [clock.step_of(t) for t in (0, 63, 64, 128)] == [41, 41, 43, 45]
    assert clock.tokens_at(45) == 45 * 64 * 3 and clock.step_reaching(45 * 64 * 3 + 1) == 46
    assert clock.reached(0) == 40 and clock.reached(64) == 42 and clock.reached(65) == 44


def test_dataloader_workers_switch_weights_at_the_ranks_step_not_their_own(tmp_path):
    """Two workers of a rank (readers 0 and 1 of 2, workers=2), their batches taken in turn as a DataLoader does:
    the rank's batches switch from all a to all b at its step 30 (a worker's 15th batch; the documents begun before it
    end in the workers' next batches), not at a worker's 30th."""
    path = mix_file(tmp_path, sources=sources(tmp_path),
                    schedule=[{"until_step": 30, "weights": {"a": 1}}, {"weights": {"b": 1}}])
    workers = []
    for w in range(2):
        config = resolve_config(env={}, mix=path, **SHAPE).replace(shard=Shard(2, w), workers=2)
        with FineWebLoader(config) as loader:
            workers.append([loader.next_batch().copy() for _ in range(30)])
    rank = [workers[k % 2][k // 2] for k in range(60)]
    assert [b_share(batch) for batch in rank[:30]] == [0.0] * 30
    assert [b_share(batch) for batch in rank[32:]] == [1.0] * 28  # (a worker's last document of a ends in its next)


def test_a_schedule_whose_future_changed_resumes_and_one_whose_past_changed_is_refused(tmp_path):
    """A state saved at step 25 of a stage of constant weights ending at step 40: resumed with an anneal added after
    it, or with that stage ending at 30 instead, it reads what an uninterrupted run of the new schedule reads, byte
    for byte; with stage #1's weights changed, or its end moved before step 25, or a ramp in force changed, it is
    refused naming the stage."""
    entries = sources(tmp_path)
    first = {"until_step": 40, "weights": {"a": 3, "b": 1}}
    saved = mix_file(tmp_path, "saved.json", sources=entries, schedule=[first])
    _, state = run(saved, 25)
    anneal = {"until_step": 60, "weights": {"a": 1, "b": 1}, "ramp": "linear"}
    for name, schedule in (("anneal.json", [first, anneal]), ("moved.json", [dict(first, until_step=30), anneal])):
        path = mix_file(tmp_path, name, sources=entries, schedule=schedule)
        whole, _ = run(path, 45)
        rest, _ = run(path, 20, state=state)
        assert all(np.array_equal(x, y) for x, y in zip(whole[25:], rest, strict=True)), name
    for schedule, needle in (([{"until_step": 40, "weights": {"a": 1, "b": 1}}], "stage #1's weights were [3, 1]"),
                             ([dict(first, until_step=20), anneal], "stage #1's until_step 20 now ends it before "
                                                                    "step 24, which it read")):
        path = mix_file(tmp_path, "past.json", sources=entries, schedule=schedule)
        with pytest.raises(ConfigError, match="changes what was read") as caught:
            FineWebLoader(resolve_config(env={}, mix=path, **SHAPE), state=state)
        assert needle in str(caught.value)
    ramped = mix_file(tmp_path, "ramped.json", sources=entries, schedule=[first, anneal])
    _, in_ramp = run(ramped, 50)
    changed = mix_file(tmp_path, "changed.json", sources=entries, schedule=[first, dict(anneal, until_step=70)])
    with pytest.raises(ConfigError, match="stage #2 ended at until_step 60, now at until_step 70"):
        FineWebLoader(resolve_config(env={}, mix=changed, **SHAPE), state=in_ramp)


def test_a_mix_without_a_schedule_takes_one_from_its_saved_step_on(tmp_path):
    """A state of a mix of fixed weights, resumed with a schedule whose first stage holds them past the saved step
    and an anneal after it, reads what that schedule reads from the start; one whose first stage weighs otherwise is
    refused, in one line and exit 2 from `fwe smoke`."""
    entries = sources(tmp_path)
    fixed = mix_file(tmp_path, "fixed.json", sources=[dict(e, weight=w) for e, w in zip(entries, (3, 1))])
    _, state = run(fixed, 20)
    schedule = [{"until_step": 30, "weights": {"a": 3, "b": 1}},
                {"until_step": 50, "weights": {"b": 1}, "ramp": "linear"}]
    annealed = mix_file(tmp_path, "annealed.json", sources=entries, schedule=schedule)
    whole, _ = run(annealed, 40)
    rest, _ = run(annealed, 20, state=state)
    assert all(np.array_equal(x, y) for x, y in zip(whole[20:], rest, strict=True))
    other = mix_file(tmp_path, "other.json", sources=entries, schedule=[dict(schedule[0], weights={"a": 1})])
    (tmp_path / "state.json").write_bytes(orjson.dumps(state))
    result = invoke("smoke", "--mix", other, "--tokenizer", "byte", "--seq-len", "16", "--batch", "4",
                    "--resume-state", str(tmp_path / "state.json"), "--artifacts-dir", str(tmp_path / "art"))
    assert result.exit_code == 2 and "stage #1's weights were [3, 1], now [1, 0]" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


STAGE = {"until_step": 10, "weights": {"a": 1}}


def test_a_stage_ending_past_a_token_directory_that_ends_the_mix_is_refused(tmp_path):
    """Two token directories (their tokens known from their manifests), the smaller ending the mix: a stage that ends
    after the schedule has taken more of it than it holds is one line naming the stage and its key, before any batch
    (exit 2 from `fwe smoke`); a schedule within it reads."""
    small = write_token_dir(tmp_path / "small", ["s" * 20] * 40)  # 40 x 21 = 840 tokens
    big = write_token_dir(tmp_path / "big", ["b" * 20] * 400)
    entries = [{"id": "s", "local_path": str(small)}, {"id": "b", "local_path": str(big), "stop": "cycle"}]
    far = mix_file(tmp_path, "far.json", sources=entries,
                   schedule=[{"until_step": 10, "weights": {"b": 1}}, {"until_step": 40, "weights": {"s": 1, "b": 1}}])
    with FineWebLoader(resolve_config(env={}, mix=far, seq_len=16, batch_size=4)) as loader:
        with pytest.raises(ConfigError, match="stage #2's \"until_step\" 40 lies past the end of the data"):
            loader.next_batch()
    result = invoke("smoke", "--mix", far, "--seq-len", "16", "--batch", "4", "--artifacts-dir", str(tmp_path / "a"))
    assert result.exit_code == 2 and "960 tokens of 's', which ends the mix (first_exhausted) and holds 840" in result.stderr
    near = mix_file(tmp_path, "near.json", sources=entries,
                    schedule=[{"until_step": 10, "weights": {"b": 1}}, {"until_step": 20, "weights": {"s": 1, "b": 1}}])
    assert len(run(near, 15, tokenizer=None)[0]) == 15


def test_the_stats_and_heartbeat_say_what_each_stage_planned_and_delivered(tmp_path):
    """After 200 steps of a schedule (a constant stage, a ramp, then held): the stats give each source its id, its
    planned weight over what was read and each stage's steps, weights at its start and end, planned and delivered
    tokens (within a document of each other); each fineweb_mix heartbeat line gives the step, the stage and the
    weights in force there."""
    path = mix_file(tmp_path, sources=sources(tmp_path), schedule=[
        {"until_step": 50, "weights": {"a": 3, "b": 1}}, {"until_step": 150, "weights": {"b": 1}, "ramp": "linear"}])
    config = resolve_config(env={}, mix=path, heartbeat_dir=str(tmp_path / "beats"), **SHAPE)
    with FineWebLoader(config) as loader:
        for _ in range(200):
            loader.next_batch()
        stats = loader.stats()["sources"]
    assert [s["id"] for s in stats] == ["a", "b"] and abs(sum(s["weight"] for s in stats) - 1) < 1e-5
    assert [stage["steps"] for stage in stats[0]["stages"]] == [[0, 50], [50, 150], [150, None]]
    assert [stage["weights"] for stage in stats[1]["stages"]] == [[0.25, 0.25], [0.25, 1.0], [1.0, 1.0]]
    for stage in range(3):
        assert all(abs(s["stages"][stage]["planned"] - s["stages"][stage]["tokens"]) <= 17 for s in stats), stage
    lines = [orjson.loads(line) for line in (tmp_path / "beats" / "heartbeat_rank0.jsonl").read_bytes().splitlines()]
    beats = [line["schedule"] for line in lines if line["msg"] == "fineweb_mix"]
    assert len(beats) == 2
    for beat in beats:
        s = beat["step"]
        expected = [0.75, 0.25] if s < 50 else [0.75 * (150 - s) / 100, 1 - 0.75 * (150 - s) / 100] if s < 150 \
            else [0.0, 1.0]
        assert beat["stage"] == (1 if s < 50 else 2 if s < 150 else 3)
        assert np.allclose(beat["weights"], expected, atol=1e-6), beat


def test_a_scheduled_mix_crosses_to_a_measured_run_as_its_config(tmp_path):
    """A config's JSON (what `fwe measure` hands its runs) holds the schedule, the ids and the workers, and reads
    back as the same config."""
    path = mix_file(tmp_path, sources=sources(tmp_path), schedule=[STAGE, {"weights": {"b": 1}}])
    config = resolve_config(env={}, mix=path, **SHAPE).replace(workers=2)
    again = LoaderConfig.from_json(orjson.loads(orjson.dumps(config.to_json())))
    assert again == config and again.source.options.schedule == (Stage((1, 0), until_step=10), Stage((0, 1)))


def test_a_mix_state_saved_before_schedules_and_ids_resumes(tmp_path):
    """A mix's state whose source tree records no `ids` or `schedule` (saved by an fwe before them) resumes with the
    uninterrupted run's next batches, the same mix given ids now (names only)."""
    entries = sources(tmp_path)
    path = mix_file(tmp_path, sources=[dict(e, weight=w) for e, w in zip(entries, (2, 1))])
    whole, _ = run(path, 12)
    _, state = run(path, 5)
    for node in (state["matching"]["source"],):
        del node["ids"], node["schedule"]
    named = mix_file(tmp_path, "named.json", sources=[dict(e, weight=w, id=f"x{i}") for i, (e, w) in
                                                       enumerate(zip(entries, (2, 1)))])
    rest, _ = run(named, 7, state=state)
    assert all(np.array_equal(x, y) for x, y in zip(whole[5:], rest, strict=True))


def test_until_tokens_counts_the_whole_jobs_tokens_across_a_change_of_world(tmp_path):
    """A stage ending at 5,760 tokens of the job (30 steps of 3 ranks of 4 x 16 tokens): on 3 ranks each rank's
    batches switch at step 30; 3 ranks saved after 10 steps (1,920 tokens) and resumed on 2 switch at step 40, where
    2 ranks reach 5,760 (3,840 more at 128 a step), each new rank's batch k being the job's step 10 + k."""
    path = mix_file(tmp_path, sources=sources(tmp_path),
                    schedule=[{"until_tokens": 30 * 3 * 64, "weights": {"a": 1}}, {"weights": {"b": 1}}])
    states = []
    for rem in range(3):
        batches, state = run(path, 40, shard_mod=3, shard_rem=rem)
        assert [b_share(b) for b in batches[:30]] == [0.0] * 30 and [b_share(b) for b in batches[32:]] == [1.0] * 8
        states.append(run(path, 10, shard_mod=3, shard_rem=rem)[1])
    for rem in range(2):
        batches, _ = run(path, 40, state=states, shard_mod=2, shard_rem=rem)
        assert [b_share(b) for b in batches[:30]] == [0.0] * 30 and [b_share(b) for b in batches[32:]] == [1.0] * 8
