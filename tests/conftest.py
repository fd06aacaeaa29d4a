# tests/ is a package (tests/__init__.py), so pytest puts the repository root, its parent, on
# sys.path: tests import their helpers as ``tests.gpu_compile_cases`` and the repository's tools
# (benchmarks/, not an installed package: the numpy oracles, the suite's cases) as ``benchmarks``.
import tritonml  # noqa: F401  (chooses interpreted/compiled Triton before anything imports triton)

# ---------------------------------------------------------------------------------------------
# Load and wall-clock time: no test may pass or fail by the machine's speed. Hypothesis's
# time-based checks are off for every test, whatever its own settings (loaded here, before any
# test module builds its settings, which inherit this profile): no per-example deadline (200 ms by
# default) and no "too slow" health check on generating data. Time limits of the tests themselves
# (subprocess timeouts, joins, barriers) go through tests/timing.py's ``limit()``.
# ---------------------------------------------------------------------------------------------
from hypothesis import HealthCheck, settings as _hypothesis_settings

_hypothesis_settings.register_profile(
    "tritonml", deadline=None, suppress_health_check=[HealthCheck.too_slow])
_hypothesis_settings.load_profile("tritonml")

# ---------------------------------------------------------------------------------------------
# Installed-package runs (.ci/wheel): with TRITONML_TEST_INSTALLED=1 the tests run from a copy of
# tests/ and benchmarks/ against an installed wheel. The modules under test must then come from
# the environment's site-packages, not from a checkout on sys.path, and the tests marked
# ``source_tree`` are deselected (see pytest_collection_modifyitems).
# ---------------------------------------------------------------------------------------------
import os
import sysconfig
import pytest

INSTALLED = bool(os.environ.get("TRITONML_TEST_INSTALLED"))
if INSTALLED:
    import pathlib

    import tritonml_autotune
    import tritonml_cli

    _site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
    for _module in (tritonml, tritonml_autotune, tritonml_cli):
        if _site not in pathlib.Path(_module.__file__).resolve().parents:
            raise RuntimeError(f"TRITONML_TEST_INSTALLED is set but {_module.__name__} comes from "
                               f"{_module.__file__}, not from {_site}")

# ---------------------------------------------------------------------------------------------
# Two tiers. ``pytest`` runs the fast tier (at most 5 minutes on 2 cores with -n 2): every test
# function but the REST_ONLY ones, at most FAST_CASES of a parametrized function's cases (an
# even spread over them, its first included; ONE_CASE functions, each case long (a gradcheck,
# processes), one), and neither the FULL_ONLY modules nor the functions that cross-compile for
# sm_80/sm_90 (names with "compile" and "sm80": minutes of ptxas). ``pytest --full`` runs every
# case of everything. Two selections for CI, so that nothing runs twice there: ``--rest`` runs
# exactly what ``--full`` adds to the fast tier (fast + rest = full), and ``--sample`` one case
# of each test function of the fast tier (SAMPLE_CASES), the check of another install (the
# installed wheel on the oldest supported Triton) that every test function still runs there.
# ---------------------------------------------------------------------------------------------
import math
from collections import defaultdict

FAST_CASES = 2
SAMPLE_CASES = 1
FULL_ONLY = frozenset({
    "test_gpu_compile", "test_reduce_gpu_compile", "test_negative_view_compile",  # ptxas
    "test_segment_compile",
    "test_distributed",   # spawns ranks
    "test_gpu_check",     # the GPU sweep's dry run: a minute of interpreted kernels
    "test_bench_readme_command",   # the whole suite at its quick shapes: minutes
})
ONE_CASE = frozenset({
    "tests/launchers/test_scan_initial.py::test_gradcheck_in_x_and_initial",
    "tests/launchers/test_linear_recurrence.py::test_gradcheck_and_double_backward",
    "tests/torch_ops/test_scatter_autograd.py::test_gradcheck_reverse_and_forward",
    "tests/torch_ops/test_scatter_autograd.py::test_gradcheck_other_forms",
    "tests/torch_ops/test_scatter_determinism.py::test_same_bits_on_any_gpu_and_run",
    "tests/test_scatter_routing.py::test_environment_variable_opts_out_at_import",  # processes
    # the fast tier's costliest functions (pytest --durations, 2026-12-07), each case a
    # gradcheck, a hessian or every config of a launcher: one case here, every case in --rest
    "tests/torch_ops/test_forward_ad.py::test_linear_recurrence_tangents_and_gradcheck",
    "tests/torch_ops/test_forward_ad.py::test_reduce_gradcheck_forward_and_backward",
    "tests/torch_ops/test_forward_ad.py::test_scan_gradcheck_forward_and_backward",
    "tests/torch_ops/test_forward_ad.py::test_welford_tangents_match_torch_var_mean",
    "tests/torch_ops/test_segment_ops.py::test_segment_reduce_gradcheck_reverse_and_forward",
    "tests/torch_ops/test_segment_ops.py::test_segment_scan_gradcheck_reverse_and_forward",
    "tests/torch_ops/test_torch_ops.py::test_cumulative_sum_gradcheck_and_double_backward",
    "tests/torch_ops/test_scatter_one_pass.py::test_gradients_through_the_one_pass_are_the_two_pass_ones",
    "tests/torch_ops/test_scatter_one_pass.py::test_the_launcher_from_ids_equals_it_from_offsets_at_every_config",
    "tests/torch_ops/test_multiply_second_derivative.py::test_segment_reduce_hessian_and_gradgradcheck",
    "tests/torch_ops/test_multiply_second_derivative.py::test_segment_product_scan_hessian_and_gradgradcheck",
    "tests/records/test_reduce_records.py::test_a_new_scan_record_runs_through_segment_scan_with_its_derivatives",
})

# The fast tier's costliest functions, each case ten seconds or more of a loaded 2-core run
# (pytest --durations, 2026-12-07: gradchecks, hessians, every config of a launcher, processes
# that import torch afresh, the bench's whole pipeline): --rest runs them, every case; the fast
# tier keeps every other function, so each module still has tests there.
REST_ONLY = frozenset({
    "tests/bench/test_bench.py::test_bench_writes_csv_json_png_with_exact_bytes_and_the_modeled_time",
    "tests/bench/test_bench_segments.py::test_bench_rows_count_segment_and_padded_bytes_and_time_their_peers",
    "tests/kernels/test_scan_chunked.py::test_cumulative_sum_and_product_through_the_torch_ops",
    "tests/kernels/test_scan_chunked.py::test_first_order_recurrence",
    "tests/kernels/test_scan_chunked.py::test_linear_recurrence_state_through_the_launcher_in_every_integer_width",
    "tests/kernels/test_scan_chunked.py::test_matrix_products_keep_operand_order_across_chunks_and_groups",
    "tests/kernels/test_scan_chunked.py::test_round_trips_per_program_do_not_grow_with_the_tiles_before_it",
    "tests/kernels/test_scan_chunked.py::test_running_max_with_index_keeps_the_first_of_ties",
    "tests/kernels/test_scan_chunked.py::test_sum_does_not_depend_on_program_order",
    "tests/kernels/test_scan_chunked.py::test_the_same_input_gives_the_same_bits_whatever_ran_before",
    "tests/launchers/test_linear_recurrence.py::test_gradcheck_and_double_backward",
    "tests/launchers/test_linear_recurrence.py::test_long_sequence_accuracy_in_float32",
    "tests/launchers/test_reduce_regimes.py::test_64_bit_offsets_give_the_same_result",
    "tests/launchers/test_scan_initial.py::test_gradcheck_in_x_and_initial",
    "tests/launchers/test_scan_initial.py::test_gradients_of_rank_0_and_empty_axes",
    "tests/launchers/test_scan_initial.py::test_vmap_with_batched_and_unbatched_initials",
    "tests/records/test_reduce_records.py::test_a_new_record_runs_through_segment_reduce_with_its_derivative",
    "tests/runtime/test_resident_workspaces.py::test_a_resident_scan_makes_no_memset_launch_once_its_workspace_exists",
    "tests/runtime/test_resident_workspaces.py::test_a_workspace_grows_for_a_longer_launch",
    "tests/runtime/test_resident_workspaces.py::test_chunked_and_look_back_scans_share_one_workspace_in_turn",
    "tests/runtime/test_threads.py::test_every_op_from_many_threads_at_once",
    "tests/test_import_order.py::test_after_a_nested_jagged_tensor",
    "tests/test_import_order.py::test_after_torch_compile",
    "tests/test_import_order.py::test_an_explicit_request_for_compiled_triton_is_kept",
    "tests/test_import_order.py::test_the_first_jagged_scan_prints_nothing",
    "tests/test_import_time.py::test_cli_commands_add_little_to_torchs_import",
    "tests/torch_ops/test_forward_ad.py::test_linear_recurrence_tangents_and_gradcheck",
    "tests/torch_ops/test_forward_ad.py::test_reduce_gradcheck_forward_and_backward",
    "tests/torch_ops/test_forward_ad.py::test_welford_tangents_match_torch_var_mean",
    "tests/torch_ops/test_moments_nonfinite.py::test_nonfinite_elements_among_many_tiles_follow_the_rule",
    "tests/torch_ops/test_multiply_second_derivative.py::test_routed_prod_and_cumprod_hessians_match_the_oracle",
    "tests/torch_ops/test_multiply_second_derivative.py::test_segment_reduce_hessian_and_gradgradcheck",
    "tests/torch_ops/test_scatter_autograd.py::test_double_backward_of_a_product",
    "tests/torch_ops/test_scatter_autograd.py::test_gradcheck_other_forms",
    "tests/torch_ops/test_scatter_autograd.py::test_gradcheck_reverse_and_forward",
    "tests/torch_ops/test_scatter_determinism.py::test_same_bits_on_any_gpu_and_run",
    "tests/torch_ops/test_scatter_one_pass.py::test_the_launcher_from_ids_equals_it_from_offsets_at_every_config",
    "tests/torch_ops/test_segment_ops.py::test_gradcheck_with_empty_segments",
    "tests/torch_ops/test_segment_ops.py::test_segment_reduce_gradcheck_reverse_and_forward",
    "tests/torch_ops/test_segment_ops.py::test_segment_scan_gradcheck_reverse_and_forward",
    "tests/torch_ops/test_torch_ops.py::test_cumulative_product_gradient_is_exact_with_zeros",
    "tests/torch_ops/test_torch_ops.py::test_cumulative_sum_gradcheck_and_double_backward",
    "tests/torch_ops/test_torch_ops.py::test_torch_compile_fullgraph_forward_and_backward",
})


@pytest.hookimpl(trylast=True)   # (after pytest-xdist's own, which sets --dist from -n)
def pytest_configure(config):
    # -n's default schedule ("load") hands a module's tests to either worker, so a module-scoped
    # fixture (minutes of ptxas in the compile tests, spawned ranks, a site build) is computed
    # once per worker that runs one of them: "loadgroup" keeps each such fixture's tests on one
    # worker (the groups: _group_by_shared_fixtures), the other tests spread as before.
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
    config.addinivalue_line("markers", "xdist_group(name): the tests of one name run on one "
                            "pytest-xdist worker (registered here too for runs without xdist)")
    # A wheel ships the packages, not the repository: tests that read README.md, docs/,
    # pyproject.toml or the repository's own source files are left out of installed runs.
    config.addinivalue_line("markers", "source_tree: reads the repository's files (README.md, "
                            "docs/, pyproject.toml, sources); not run against an installed wheel")
    config.addinivalue_line("markers", "quiet_machine: measures time; under pytest-xdist the other "
                            "workers wait while it runs (tests/timing.py, machine_share)")


@pytest.fixture(autouse=True)
def _machine_share(request):
    from tests.timing import machine_share

    with machine_share(quiet=request.node.get_closest_marker("quiet_machine") is not None):
        yield


# Modules that read the repository while they are collected, which a marker cannot prevent: left
# out of installed runs whole (they carry the source_tree marker too).
SOURCE_TREE_MODULES = frozenset({"test_doc_examples.py"})


def pytest_ignore_collect(collection_path, config):
    if INSTALLED and collection_path.name in SOURCE_TREE_MODULES:
        return True
    return None


def pytest_terminal_summary(terminalreporter):
    if INSTALLED:
        terminalreporter.write_line(
            f"installed run: tritonml from {tritonml.__file__}; left out: the tests marked "
            f"source_tree and {', '.join(sorted(SOURCE_TREE_MODULES))}")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="run the whole suite (default: the fast tier, tests/conftest.py)")
    parser.addoption("--rest", action="store_true", default=False,
                     help="run what --full adds to the fast tier, no test of the fast tier "
                          "(the fast tier, then --rest: the whole suite, nothing twice)")
    parser.addoption("--sample", action="store_true", default=False,
                     help="run one case of each test function of the fast tier (another "
                          "install's check: the oldest Triton, the installed wheel)")
    parser.addoption("--compile-only", action="store_true", default=False,
                     help="run only the tests that compile kernels for sm_80/sm_90, every case "
                          "(.ci/run runs them on the oldest supported Triton too)")


# The compile tests: these modules, and the functions named for compiling for sm_80 elsewhere.
COMPILE_MODULES = frozenset({
    "test_gpu_compile", "test_reduce_gpu_compile", "test_negative_view_compile",
    "test_segment_compile", "test_compiled_sass",
})


def _module_name(item) -> str:
    return item.module.__name__.rpartition(".")[2]


def _named_for_compiling(item) -> bool:
    name = getattr(item, "originalname", item.name)
    return "compile" in name and "sm80" in name


def _cross_compiles(item) -> bool:
    return _module_name(item) in COMPILE_MODULES or _named_for_compiling(item)


def _full_only(item) -> bool:
    return _module_name(item) in FULL_ONLY or _named_for_compiling(item)


def _fast_tier(items: list, cases: int = FAST_CASES) -> set:
    """The ids of the items the fast tier keeps, at most ``cases`` of each test function."""
    by_function = defaultdict(list)
    for item in items:
        function = item.nodeid.split("[")[0]   # the function, not its case
        if not _full_only(item) and function not in REST_ONLY:
            by_function[function].append(item)
    kept = set()
    for function, kept_cases in by_function.items():
        stride = math.ceil(len(kept_cases) / (1 if function in ONE_CASE else cases))
        kept.update(item.nodeid for item in kept_cases[::stride])
    return kept


def _group_by_shared_fixtures(items: list) -> None:
    """Mark each test using a module- or session-scoped fixture of the suite's own with an
    xdist_group named for the fixtures: under --dist loadgroup (pytest_configure) they run on
    one worker."""
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        shared = sorted(f"{_module_name(item)}.{name}" for name, fixture_defs in defs.items()
                        if fixture_defs and fixture_defs[-1].scope in ("module", "session")
                        and fixture_defs[-1].baseid)   # (not pytest's or a plugin's own)
        if shared:
            item.add_marker(pytest.mark.xdist_group("+".join(shared)))


@pytest.hookimpl(tryfirst=True)   # (the groups marked before pytest-xdist reads them)
def pytest_collection_modifyitems(config, items):
    if INSTALLED:
        source_tree = [item for item in items if item.get_closest_marker("source_tree")]
        if source_tree:
            config.hook.pytest_deselected(items=source_tree)
            items[:] = [item for item in items if not item.get_closest_marker("source_tree")]
    _group_by_shared_fixtures(items)
    if config.getoption("--compile-only"):
        others = [item for item in items if not _cross_compiles(item)]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if _cross_compiles(item)]
        return
    if config.getoption("--full"):
        return
    fast = _fast_tier(items)
    if config.getoption("--rest"):
        kept = {item.nodeid for item in items if item.nodeid not in fast}
    elif config.getoption("--sample"):
        kept = _fast_tier(items, SAMPLE_CASES)
    else:
        kept = fast
    dropped = [item for item in items if item.nodeid not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.nodeid in kept]


@pytest.fixture
def fast(request):
    """gradcheck's ``fast_mode`` (one random projection of the Jacobian, drawn anew for each
    case) everywhere but --full, which compares every entry of every Jacobian. CI's --rest
    takes the projections: over every case of every gradcheck they find a wrong derivative as
    surely, at a fraction of the interpreted launches."""
    return not request.config.getoption("--full")
