"""The ``tritonml`` command's entry point: the argument parser, the version, and checks of options
that need no library.

This module sits outside the ``tritonml`` package on purpose: ``import tritonml`` imports torch
and triton (it chooses the Triton backend before triton is imported, docs/architecture.md), which
costs seconds. ``tritonml --version``, ``--help``, each command's ``--help`` and every usage error
that needs no library answer from here without importing torch, triton or numpy; a command's
handler (``tritonml.cli``, ``tritonml.bench.run``, ``tritonml.dml.cli``) is imported only to run it.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

# The one place the version is written: pyproject.toml reads it from here, ``tritonml.__version__``
# is this.
__version__ = "0.1.0"

# The library's names the help texts list. They are spelled out here because reading them from the
# library would import torch; tests/test_cli_and_backend.py checks them against the library.
BENCH_CASES = ("scan-short-rows", "scan-square-last", "scan-square-first", "scan-wide-rows",
               "scan-one-row", "scan-row-2e20", "scan-row-2e24", "scan-1d-2e24",
               "scan-eight-long-rows", "scan-wide-columns", "scan-middle-axis", "reduce-rows",
               "reduce-tall-columns", "reduce-short-columns", "reduce-axes-apart", "reduce-all",
               "reduce-functions", "linear-recurrence", "linear-recurrence-long",
               "segment-reduce-short", "segment-reduce-long", "segment-reduce-power",
               "segment-scan-short", "segment-scan-long", "segment-scan-power",
               "padded-reduce-short", "padded-reduce-long", "padded-reduce-power",
               "padded-scan-short", "padded-scan-long", "padded-scan-power",
               "scatter-gnn-scatter-f1", "scatter-gnn-scatter-f16", "scatter-gnn-scatter-f64",
               "scatter-gnn-segment_coo-f1", "scatter-gnn-segment_coo-f16",
               "scatter-gnn-segment_coo-f64", "scatter-embedding-grad",
               "scatter-bincount-weights")
BENCH_OPS = ("cumulative_sum", "SUM", "AVERAGE", "L1", "L2", "SUM_SQUARE", "MULTIPLY", "MIN", "MAX",
             "ARGMIN", "ARGMAX", "LOG_SUM", "LOG_SUM_EXP", "linear_recurrence",
             "segment_scan", "sum", "mean", "max")
BENCH_DTYPES = ("float32", "float16", "bfloat16", "int32", "int8")
FEATURE_LEVELS = ("1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0",
                  "6_1", "6_2", "6_3", "6_4")
DEFAULT_FEATURE_LEVEL = "5_0"  # the highest the operators' pages document

DEFAULT_MAX_ELEMENTS = 1 << 20
DEFAULT_BENCH_OUTPUT = "bench-results"
BENCH_FILES = ("bench.csv", "bench.json", "bench.md")
# What brings matplotlib, which draws tritonml bench's plots: pyproject's ``bench`` extra.
PLOTS_EXTRA = "pip install 'tritonml[bench]'"

# Shown by --help: plain text (module docstrings are RST, for readers of the code).
DESCRIPTION = ("DirectML's cumulative sum, cumulative product and reduce operators as Triton "
               "kernels. 'demo' runs DirectML's documented examples, 'info' shows versions and the "
               "backend, 'tune' chooses and caches launch configs for a GPU, 'bench' runs the benchmark suite, 'run' and 'validate' take "
               "DirectML operator descriptors (JSON files).")
TUNE_DESCRIPTION = (
    "Choose launch configs for a GPU and store them in the tuning cache. On a CUDA device every "
    "candidate config is timed (triton.testing.do_bench) and the fastest is stored; without one "
    "(give --target) the cost model's choice is recorded, marked 'modeled'. Defaults: the "
    "benchmark suite's problems. --show lists the cache, --clear empties it. See docs/tuning.md.")
BENCH_DESCRIPTION = (
    "Run the benchmark suite: bytes moved against the ideal, launches, compiled-code facts and a "
    "modeled GPU time everywhere (kernels run in Triton's interpreter on a CPU); on a CUDA GPU "
    "also do_bench timings against torch eager and torch.compile. Writes bench.csv, bench.json, "
    "bench.md and PNG plots to --output (a folder, created if missing; files of those names in it "
    f"are replaced). The plots need matplotlib ({PLOTS_EXTRA}); without it the command says so "
    "in one line and writes the rest. See docs/performance.md.")


class UsageError(ValueError):
    """A bad option found by a command: ``main`` prints ``tritonml CMD: error: MESSAGE``, exits 2."""


def _handler(module: str, name: str):
    """The command function ``module.name``, imported when the command runs."""
    def run(args):
        return getattr(importlib.import_module(module), name)(args)
    run.__qualname__ = f"{module}.{name}"
    return run


# ---------------------------------------------------------------------------------------------
# Option checks that need no library: they run before a handler is imported.
# ---------------------------------------------------------------------------------------------
def check_output_folder(path: str, option: str = "--output") -> None:
    """``path`` is, or can be made, a folder this process can write files in."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a file, not a folder; give a folder to write "
                         f"{', '.join(BENCH_FILES)} and the plots in")
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {path}: cannot write in this folder (permission denied)")
        for name in BENCH_FILES:
            if os.path.isdir(os.path.join(path, name)):
                raise UsageError(f"{option} {path}: {name} in it is a folder; it would be "
                                 "replaced by a file")
        return
    # A missing folder is created with its parents: the nearest existing one must take them.
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path}: cannot create it: {parent} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: cannot create it in {parent} (permission denied)")


def check_output_file(path: str, option: str) -> None:
    """``path`` can be written as a file: not a folder, in a folder that exists and is writable."""
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: cannot write: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path)
                                                     and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {path}: cannot write (permission denied)")


def names(text, known, option: str) -> list | None:
    """The comma-separated names of ``text`` (None: not given), spelled as in ``known``
    (case-insensitive: a name spelled two ways in ``known``, as the dense reductions' ``SUM``
    and the scatter cases' ``sum``, gives both); an unknown or missing name is a UsageError."""
    if text is None:
        return None
    given = [n.strip() for n in text.split(",") if n.strip()]
    lookup: dict = {}
    for k in known:
        lookup.setdefault(k.lower(), []).append(k)
    unknown = [n for n in given if n.lower() not in lookup]
    if unknown or not given:
        raise UsageError(f"{option}: unknown {', '.join(unknown) or '(empty)'}; known: "
                         f"{', '.join(known)}")
    return list(dict.fromkeys(k for n in given for k in lookup[n.lower()]))


def check_target(name: str) -> None:
    from tritonml_autotune import devices  # no torch: GPU facts only

    try:
        devices.lookup(name, "--target")
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_bench(args) -> None:
    """Every ``tritonml bench`` option the library is not needed for, before anything runs."""
    if args.max_elements < 1:
        raise UsageError(f"--max-elements: expected >= 1, got {args.max_elements}")
    names(args.cases, BENCH_CASES, "--cases")
    names(args.ops, BENCH_OPS, "--ops")
    names(args.dtypes, BENCH_DTYPES, "--dtypes")
    check_target(args.target)
    check_output_folder(args.output)
    check_plots(args)


def plots_available() -> bool:
    """Whether matplotlib, which draws the plots, is installed (looked up, not imported)."""
    return importlib.util.find_spec("matplotlib") is not None


def check_plots(args) -> None:
    """Without matplotlib, plots are turned off before anything runs, in one line on stderr: the
    tables are the run's result, and minutes of counting should not end in an ImportError."""
    if args.no_plots or args.count_only or plots_available():
        return
    args.no_plots = True
    print(f"tritonml bench: matplotlib is not installed, so no PNG plots ({PLOTS_EXTRA} brings "
          f"them); writing {', '.join(BENCH_FILES)}", file=sys.stderr)


def check_tune(args) -> None:
    if args.target:
        check_target(args.target)
    if args.write_table:
        check_output_file(args.write_table, "--write-table")


def _feature_level_arg(text: str):
    """``--feature-level``: a level's name (``4_0``, ``4.0``, ``DML_FEATURE_LEVEL_4_0``), or None
    for 'none'/'tritonml'. The same spellings as ``tritonml.dml.FeatureLevel.parse``."""
    if text.strip().lower() in ("none", "tritonml"):
        return None
    key = text.strip().upper().replace(".", "_")
    for prefix in ("DML_FEATURE_LEVEL_", "LEVEL_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    if key not in FEATURE_LEVELS:
        raise argparse.ArgumentTypeError(f"unknown feature level {text!r}; expected one of "
                                         f"{', '.join(FEATURE_LEVELS)}")
    return key


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------
def add_bench_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="count every entry at its small quick shape (a few minutes on a CPU)")
    parser.add_argument("--cases", help="comma-separated entries of the suite (default: all): "
                                        + ", ".join(BENCH_CASES))
    parser.add_argument("--ops", help="comma-separated ops (default: each entry's): "
                                      + ", ".join(BENCH_OPS))
    parser.add_argument("--dtypes", help="comma-separated dtypes (default: each entry's): "
                                         + ", ".join(BENCH_DTYPES))
    parser.add_argument("--target", default="H100",
                        help="the GPU configs are chosen and time is modeled for (default H100)")
    parser.add_argument("--max-elements", type=int, default=DEFAULT_MAX_ELEMENTS,
                        help="in the interpreter, count shapes of more elements at their quick "
                             "shape (default %(default)s)")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the sm_90 compilation (compiled-code facts)")
    parser.add_argument("--no-plots", action="store_true",
                        help="write no PNG plots (they need matplotlib: "
                             f"{PLOTS_EXTRA}; without it they are left out with a notice)")
    parser.add_argument("--dry-run-timing", action="store_true",
                        help="run the GPU timing code on the CPU (numbers meaningless)")
    parser.add_argument("--output", metavar="DIR", default=DEFAULT_BENCH_OUTPUT,
                        help="the folder to write bench.csv, bench.json, bench.md and plots in, "
                             "created if missing; files of those names in it are replaced "
                             "(default: %(default)s)")
    # Internal: the child process a GPU run counts bytes in.
    parser.add_argument("--count-only", action="store_true", help=argparse.SUPPRESS)


def add_dml_subcommands(subparsers) -> None:
    """Add ``run`` and ``validate`` (``tritonml.dml.cli``) to an ``add_subparsers()`` object."""
    level_help = (f"DirectML feature level to validate against, e.g. 4_0 (default "
                  f"{DEFAULT_FEATURE_LEVEL}, the highest the operators' pages document; levels: "
                  f"{', '.join(FEATURE_LEVELS)}); 'none' for tritonml's own, wider support")

    run = subparsers.add_parser(
        "run", help="run a DirectML operator descriptor (JSON) on .npy data",
        description="Run a DirectML operator descriptor (JSON, see docs/dml.md) on numpy data. "
                    "IN.npy holds the input tensor (shape = input_tensor.sizes, dtype = its "
                    "data_type); OUT.npy receives the output tensor (shape = output_tensor.sizes).")
    run.add_argument("descriptor", metavar="OP.json", help="operator descriptor file")
    run.add_argument("--input", required=True, metavar="IN.npy", help="input data (a .npy file)")
    run.add_argument("--output", required=True, metavar="OUT.npy",
                     help="where to write the output, as .npy, to exactly this path")
    run.add_argument("--feature-level", type=_feature_level_arg, default=DEFAULT_FEATURE_LEVEL,
                     metavar="LEVEL", help=level_help)
    run.add_argument("--raw-input", action="store_true",
                     help="IN.npy is the input buffer itself (at least total_tensor_size_in_bytes, "
                          "addressed through the desc's strides), not the input tensor")
    run.add_argument("--raw-output", action="store_true",
                     help="write the whole output buffer (total_tensor_size_in_bytes, zero-filled "
                          "where the output desc addresses nothing) instead of the output tensor")
    run.set_defaults(handler=_handler("tritonml.dml.cli", "cmd_run"))

    check = subparsers.add_parser(
        "validate", help="check a DirectML operator descriptor (JSON) at a feature level",
        description="Say whether a DirectML operator descriptor is valid at a feature level and, if "
                    "not, which field breaks which rule. Exit code 0 valid, 1 invalid, 2 usage error.")
    check.add_argument("descriptor", metavar="OP.json", help="operator descriptor file")
    check.add_argument("--feature-level", type=_feature_level_arg, default=DEFAULT_FEATURE_LEVEL,
                       metavar="LEVEL", help=level_help)
    check.set_defaults(handler=_handler("tritonml.dml.cli", "cmd_validate"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritonml", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"tritonml {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run DirectML's documented examples through the kernels",
                          description="Compute every example DirectML's operator pages document "
                                      "with tritonml's kernels and compare it with the documented "
                                      "output. Exit code 0 when all match, 1 otherwise.")
    demo.set_defaults(handler=_handler("tritonml.cli", "cmd_demo"))
    info = sub.add_parser("info", help="versions, device, compiled or interpreted",
                          description="Print the versions of tritonml, torch and triton, the "
                                      "device, and whether kernels run compiled or interpreted.")
    info.set_defaults(handler=_handler("tritonml.cli", "cmd_info"))
    tune = sub.add_parser("tune", help="choose and cache launch configs for a GPU",
                          description=TUNE_DESCRIPTION)
    tune.add_argument("--ops", help="comma-separated: cumulative_sum, cumulative_product, reduce "
                                    "functions (SUM, ARGMAX, ...), or all (default: the suite's)")
    tune.add_argument("--shapes", help="comma-separated SIZExSIZE[:AXIS[+AXIS]|:all], e.g. "
                                       "4096x4096:0,1x1048576:1 (default: the benchmark suite); "
                                       "axes in range and distinct, a scan takes one axis")
    tune.add_argument("--dtypes", help="comma-separated dtype names (default: float32,float16,int32)")
    tune.add_argument("--target", help="the GPU to choose for: H100 or A100 (default: this CUDA "
                                       "device)")
    tune.add_argument("--write-table", metavar="FILE",
                      help="also write the choices as a shipped table (autotune/tables/H100.json)")
    tune.add_argument("--show", action="store_true", help="print the cache as a table")
    tune.add_argument("--clear", action="store_true", help="remove every cache entry")
    tune.set_defaults(handler=_handler("tritonml.cli", "cmd_tune"), check=check_tune)
    bench = sub.add_parser("bench", help="the benchmark suite: bytes, launches, modeled and GPU time",
                           description=BENCH_DESCRIPTION)
    add_bench_arguments(bench)
    bench.set_defaults(handler=_handler("tritonml.cli", "cmd_bench"), check=check_bench)
    add_dml_subcommands(sub)
    return parser


def error(command: str, message: str) -> int:
    """Print a usage error the way argparse does (``tritonml CMD: error: ...``); exit code 2."""
    print(f"tritonml {command}: error: {message}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    import warnings

    # Triton 3.9 warns once per process that its FP-fusion default will change; it is not about
    # anything the command does.
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION is unset")
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:  # --help, --version, a usage error: printed, then exit
            sys.stdout.flush()
            raise
        try:
            if getattr(args, "check", None) is not None:
                args.check(args)
            status = args.handler(args)
        except UsageError as exc:
            return error(args.command, str(exc))
        sys.stdout.flush()  # a closed pipe shows here, not in Python's flush at exit
        return status
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """Whoever read standard output stopped (``tritonml demo | head -1``): end quietly, as Unix
    tools do when SIGPIPE ends them, with their exit status (128 + SIGPIPE). Standard output is
    pointed at /dev/null first, or Python's own flush at exit would raise again."""
    import signal

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (stdout replaced in-process)
        pass
    return 128 + int(getattr(signal, "SIGPIPE", 13))


if __name__ == "__main__":
    # Run as ``python -m tritonml_cli`` this module is ``__main__``; the handlers raise the
    # UsageError of ``tritonml_cli``, so that module's ``main`` must be the one catching it.
    import tritonml_cli

    sys.exit(tritonml_cli.main())
