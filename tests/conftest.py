# tests/ is a package (tests/__init__.py), so pytest puts the repository root, its parent, on
# sys.path: tests import their helpers as ``tests.gpu_compile_cases`` and the repository's tools
# (benchmarks/, not an installed package: the numpy oracles, the suite's cases) as ``benchmarks``.
import tritonml  # noqa: F401  (chooses interpreted/compiled Triton before anything imports triton)

# ---------------------------------------------------------------------------------------------
# Two tiers. ``pytest`` runs the fast tier (about 4 minutes on 2 cores with -n 2): every test
# function, but at most FAST_CASES of a parametrized function's cases (an even spread over them,
# its first included; ONE_CASE functions, each case a long gradcheck, one), and neither the
# FULL_ONLY modules nor the functions that cross-compile for sm_80/sm_90 (names with "compile"
# and "sm80": minutes of ptxas). ``pytest --full`` runs every case of everything. CI runs both.
# ---------------------------------------------------------------------------------------------
import math
from collections import defaultdict

FAST_CASES = 4
FULL_ONLY = frozenset({
    "test_gpu_compile", "test_reduce_gpu_compile", "test_negative_view_compile",  # ptxas
    "test_segment_compile",
    "test_distributed",   # spawns ranks
})
ONE_CASE = frozenset({
    "tests/test_scan_initial.py::test_gradcheck_in_x_and_initial",
    "tests/test_linear_recurrence.py::test_gradcheck_and_double_backward",
})


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="run the whole suite (default: the fast tier, tests/conftest.py)")


def _full_only(item) -> bool:
    name = getattr(item, "originalname", item.name)
    return (item.module.__name__.rpartition(".")[2] in FULL_ONLY
            or ("compile" in name and "sm80" in name))


def _fast_tier(items: list) -> set:
    """The ids of the items the fast tier keeps."""
    by_function = defaultdict(list)
    for item in items:
        if not _full_only(item):
            by_function[item.nodeid.split("[")[0]].append(item)   # the function, not its case
    kept = set()
    for function, cases in by_function.items():
        stride = math.ceil(len(cases) / (1 if function in ONE_CASE else FAST_CASES))
        kept.update(item.nodeid for item in cases[::stride])
    return kept


def pytest_collection_modifyitems(config, items):
    if config.getoption("--full"):
        return
    kept = _fast_tier(items)
    dropped = [item for item in items if item.nodeid not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.nodeid in kept]
