"""``tritonml run`` and ``tritonml validate``: DirectML operator descriptors (JSON files) on .npy data.

    tritonml run OP.json --input IN.npy --output OUT.npy [--feature-level 4_0]
    tritonml validate OP.json [--feature-level 3_0]

Their arguments are defined in ``tritonml_cli.add_dml_subcommands`` (the parser imports no torch);
each handler takes the parsed arguments and returns the exit code: 0 success (valid), 1 invalid
descriptor or data (each broken field and rule printed), 2 usage error (a file that cannot be read
or written, an --input that is not a .npy file; argparse's own usage errors exit with 2 too).
``python -m tritonml.dml.cli`` runs the two commands on their own.

Data: by default IN.npy holds the input tensor itself (shape = input_tensor.sizes, dtype =
input_tensor.data_type); it is laid into a buffer of total_tensor_size_in_bytes through the desc's
strides. OUT.npy receives the output tensor (shape = output_tensor.sizes), gathered from a buffer of
the output desc's total_tensor_size_in_bytes. ``--raw-input`` / ``--raw-output`` pass the buffers
themselves instead (any shape; the bytes are what the desc addresses).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class _UsageError(Exception):
    """A file that cannot be read or written: exit code 2."""


# --------------------------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------------------------
def _at_level(level) -> str:
    return ("under tritonml's own support (--feature-level none)" if level is None
            else f"at feature level {level}")


def _load_descriptor(path: str):
    """The operator desc in ``path``: _UsageError if unreadable, DescriptorError if not a valid
    document (not JSON, or missing, unknown or mistyped fields)."""
    from .. import dml

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise _UsageError(f"descriptor {path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise _UsageError(f"descriptor {path}: not a JSON text file (not UTF-8)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise dml.DescriptorError.at("(document)", f"not valid JSON: {e}") from None
    return dml.from_dict(data)


def _print_problems(header: str, problems, stream) -> None:
    print(header, file=stream)
    for problem in problems:
        print(f"  {problem.field}: {problem.rule}", file=stream)


def cmd_validate(args) -> int:
    from .. import dml

    args.feature_level = dml.enums.parse_level(args.feature_level)  # the parser kept the name

    try:
        desc = _load_descriptor(args.descriptor)
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except dml.DescriptorError as e:
        _print_problems(f"{args.descriptor}: invalid descriptor", e.problems, sys.stdout)
        return EXIT_INVALID
    problems = dml.validate(desc, args.feature_level)
    name = "DML_OPERATOR_" + desc.OPERATOR_TYPE
    if problems:
        _print_problems(f"{args.descriptor}: invalid {name} {_at_level(args.feature_level)}",
                        problems, sys.stdout)
        return EXIT_INVALID
    print(f"{args.descriptor}: valid {name} {_at_level(args.feature_level)}")
    return EXIT_OK


def cmd_run(args) -> int:
    from .. import dml

    args.feature_level = dml.enums.parse_level(args.feature_level)  # the parser kept the name

    try:
        _check_writable(args.output)
        desc = _load_descriptor(args.descriptor)
        compiled = dml.compile_operator(desc, args.feature_level)
        in_buffer = _input_buffer(args.input, desc.input_tensor, raw=args.raw_input)
        out_buffer = _zeros_buffer(desc.output_tensor)
        result = _execute(compiled, in_buffer, out_buffer)
        if not args.raw_output:
            result = _gather(result, desc.output_tensor)
        _save(args.output, result)
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except dml.DescriptorError as e:
        _print_problems(f"{args.descriptor}: cannot run {_at_level(args.feature_level)}",
                        e.problems, sys.stderr)
        return EXIT_INVALID
    except RuntimeError as e:  # a kernel that fails at run time: one line, like every other error
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID
    what = "output buffer" if args.raw_output else f"output tensor, sizes {list(result.shape)}"
    print(f"wrote {args.output}: {what}, {desc.output_tensor.data_type.name}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Buffers: numpy arrays laid out through TensorDescs
# --------------------------------------------------------------------------------------------
def _numpy_dtype(tensor, path: str):
    from .. import dml

    dtype = tensor.data_type.numpy_dtype
    if dtype is None:
        raise dml.DescriptorError.at(f"{path}.data_type", f"{tensor.data_type.name} has no numpy dtype, "
                                                          "so it cannot go through .npy files; use "
                                                          "the Python API (tritonml.dml)")
    return dtype


def _zeros_buffer(tensor, path: str = "output_tensor"):
    """A zero-filled numpy buffer of at least ``tensor.total_tensor_size_in_bytes``, starting at an
    address aligned as the desc's guaranteed_base_offset_alignment promises (and to 16 bytes, like
    DirectML's buffer bindings)."""
    import numpy as np

    dtype = _numpy_dtype(tensor, path)
    count = -(-tensor.total_tensor_size_in_bytes // dtype.itemsize)
    alignment = max(tensor.guaranteed_base_offset_alignment, 16)
    raw = np.zeros(count * dtype.itemsize + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + count * dtype.itemsize].view(dtype)


def _strided(buffer, tensor, *, writeable: bool = False):
    """The elements of numpy ``buffer`` that ``tensor`` addresses, as a strided view."""
    from numpy.lib.stride_tricks import as_strided

    itemsize = buffer.dtype.itemsize
    return as_strided(buffer, shape=tensor.sizes,
                      strides=[s * itemsize for s in tensor.effective_strides], writeable=writeable)


def _input_buffer(path: str, tensor, *, raw: bool):
    """IN.npy as the input buffer: its data laid out through ``tensor`` (or itself with ``raw``)."""
    import numpy as np

    from .. import dml

    data = _load_npy(path, "--input")
    expected = _numpy_dtype(tensor, "input_tensor")
    if data.dtype != expected:
        raise dml.DescriptorError.at("input", f"{path} holds {data.dtype}; input_tensor.data_type is "
                                              f"{tensor.data_type.name} ({expected})")
    if raw:
        data = np.ascontiguousarray(data).reshape(-1)
        buffer = _zeros_buffer(_raw_buffer_desc(tensor, data.size), "input_tensor")
        buffer[:] = data
        return buffer
    if tuple(data.shape) != tuple(tensor.sizes):
        raise dml.DescriptorError.at("input", f"{path} has shape {list(data.shape)}; input_tensor.sizes "
                                              f"is {list(tensor.sizes)} (pass --raw-input to give the "
                                              "input buffer itself)")
    buffer = _zeros_buffer(tensor, "input_tensor")
    _strided(buffer, tensor, writeable=True)[...] = data
    # A stride-0 (broadcast) or overlapping desc maps several elements to one buffer element: that
    # is only expressible when those elements are equal (bit for bit).
    bits = np.dtype(f"u{expected.itemsize}")
    if not np.array_equal(_strided(buffer, tensor).view(bits), data.view(bits)):
        raise dml.DescriptorError.at("input", f"{path} has different values at elements that "
                                              "input_tensor.strides map to one buffer element (a "
                                              "stride-0 broadcast dimension must hold equal values)")
    return buffer


def _raw_buffer_desc(tensor, count: int):
    """``tensor`` with its total size set to ``count`` elements (a raw buffer given by the user)."""
    import dataclasses

    return dataclasses.replace(tensor, total_tensor_size_in_bytes=count * tensor.element_size)


def _execute(compiled, in_buffer, out_buffer):
    """Run ``compiled`` on numpy buffers (on the GPU when tritonml runs compiled kernels)."""
    import torch

    from ..core import backend as _backend

    device = "cpu" if _backend.INTERPRET else "cuda"
    x = torch.from_numpy(in_buffer).to(device)
    out = torch.from_numpy(out_buffer).to(device)
    compiled(x, out)
    return out.cpu().numpy()


def _gather(buffer, tensor):
    import numpy as np

    return np.ascontiguousarray(_strided(buffer, tensor))


_NPY_MAGIC = b"\x93NUMPY"  # every .npy file starts with it (numpy.lib.format)


def _load_npy(path: str, option: str):
    """The array in the .npy file ``path`` (given as ``option``), or a _UsageError naming both.

    The magic string is checked first: anything else (text, .npz, a pickle) would otherwise reach
    numpy's pickle fallback, whose message is about pickled data rather than the file's format.
    """
    import numpy as np

    try:
        with open(path, "rb") as f:
            if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
                raise _UsageError(f"{option} {path}: not a .npy file")
            f.seek(0)
            return np.load(f, allow_pickle=False)
    except OSError as e:
        raise _UsageError(f"{option} {path}: cannot read: {e.strerror or e}") from None
    except (ValueError, EOFError) as e:  # a damaged header, truncated data, object arrays
        raise _UsageError(f"{option} {path}: not a readable .npy file: {e}") from None


def _check_writable(path: str, option: str = "--output") -> None:
    """Refuse an output path that cannot be a file before any work is done."""
    if os.path.isdir(path):
        raise _UsageError(f"{option} {path}: is a directory; give a file name such as OUT.npy")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise _UsageError(f"{option} {path}: cannot write: folder {folder} does not exist")


def _save(path: str, array, option: str = "--output") -> None:
    """Write ``array`` to exactly ``path`` (no suffix added) as .npy; _UsageError naming ``option``
    if it cannot be written."""
    import numpy as np

    _check_writable(path, option)
    try:
        with open(path, "wb") as f:
            np.save(f, array, allow_pickle=False)
    except OSError as e:
        raise _UsageError(f"{option} {path}: cannot write: {e.strerror or e}") from None


def main(argv=None) -> int:
    from tritonml_cli import add_dml_subcommands

    parser = argparse.ArgumentParser(prog="python -m tritonml.dml.cli",
                                     description="DirectML operator descriptors on .npy data")
    add_dml_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
