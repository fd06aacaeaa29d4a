"""The ``tritonml`` command: ``demo``, ``info``, and the descriptor commands ``run``/``validate``."""
from __future__ import annotations

import argparse
import sys

from . import __version__, _dml_cli

# Shown by --help: plain text (the module docstring is RST, for readers of the code).
DESCRIPTION = ("DirectML's cumulative sum, cumulative product and reduce operators as Triton "
               "kernels. 'demo' runs DirectML's documented examples, 'info' shows versions and the "
               "backend, 'run' and 'validate' take DirectML operator descriptors (JSON files).")


def _format(values) -> str:
    """A nested list in DirectML's docs' notation, integers printed without a decimal point."""
    import numpy as np

    arr = np.asarray(values)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)
    return np.array2string(arr, separator=", ")


def cmd_demo(args) -> int:
    """Print every documented DirectML example computed by the kernels, with the documented output."""
    import numpy as np

    from . import examples

    failures = 0
    for number, example in enumerate(examples.all_examples(), 1):
        result = examples.run_example(example).double().numpy()
        expected = np.asarray(example.expected, dtype=np.float64)
        ok = result.shape == expected.shape and np.array_equal(result, expected)
        failures += not ok
        print(f"[{number}] {example.operator}: {example.title}")
        print(f"    tritonml.{example.call}")
        print("    input:")
        print("      " + _format(example.input).replace("\n", "\n      "))
        print("    computed:")
        print("      " + _format(result).replace("\n", "\n      "))
        print("    documented:")
        print("      " + _format(expected).replace("\n", "\n      "))
        print(f"    check: {'OK' if ok else 'MISMATCH'}\n")
    total = len(examples.all_examples())
    print(f"{total - failures} of {total} documented examples match.")
    return 0 if failures == 0 else 1


def cmd_info(args) -> int:
    from . import _backend

    print(f"tritonml {__version__}")
    for key, value in _backend.describe().items():
        print(f"  {key}: {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritonml", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"tritonml {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run DirectML's documented examples through the kernels",
                          description="Compute every example DirectML's operator pages document "
                                      "with tritonml's kernels and compare it with the documented "
                                      "output. Exit code 0 when all match, 1 otherwise.")
    demo.set_defaults(handler=cmd_demo)
    info = sub.add_parser("info", help="versions, device, compiled or interpreted",
                          description="Print the versions of tritonml, torch and triton, the "
                                      "device, and whether kernels run compiled or interpreted.")
    info.set_defaults(handler=cmd_info)
    _dml_cli.add_subcommands(sub)
    return parser


def main(argv=None) -> int:
    import warnings

    # Triton 3.9 warns once per process that its FP-fusion default will change; it is not about
    # anything the command does.
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION is unset")
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
