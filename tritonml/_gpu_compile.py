"""Compile recorded launches for real GPUs without a GPU, and read what they became.

Triton can compile for a target it is not running on. A launch recorded by ``tritonml._trace``
(usually with ``execute=False``) is turned into a JSON description (``describe``); a process
running compiled Triton (``TRITON_INTERPRET=0``; CUDA is not needed) replays the runtime's own
argument specialization (integer and alignment specialization, constexprs) and compiles it for
each target (``compile_description``), then reads the PTX and cubin: global load/store vector
widths, registers and spills (``summarize``).

Run as ``python -m tritonml._gpu_compile < launches.json`` to print a JSON summary per launch and
target; tests and benchmarks do that in a subprocess, since their own process interprets.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import torch

_TORCH_DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
    torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64)}

KERNEL_MODULES = ("tritonml.kernels.scan", "tritonml.kernels.reduce")
COMBINE_MODULE = "tritonml.kernels.combine"


# ---------------------------------------------------------------------------------------------
# Describe (in the recording process)
# ---------------------------------------------------------------------------------------------
def _describe_value(value):
    import triton.language as tl

    if isinstance(value, torch.Tensor):
        return {"tensor": str(value.dtype).replace("torch.", ""), "aligned": value.data_ptr() % 16 == 0}
    if isinstance(value, tl.dtype):
        return {"tl_dtype": value.name}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    import importlib
    combine = importlib.import_module(COMBINE_MODULE)
    for name in dir(combine):
        if getattr(combine, name) is value:
            return {"combine": name}
    fn = getattr(value, "fn", None)  # a user's @triton.jit function: found again by import
    if fn is not None and "<locals>" not in fn.__qualname__:
        return {"jit_function": f"{fn.__module__}:{fn.__qualname__}"}
    raise TypeError(f"cannot describe launch argument {value!r}")


def describe(launch) -> dict:
    return {"kernel": launch.name,
            "args": [_describe_value(a) for a in launch.args],
            "meta": {k: _describe_value(v) for k, v in launch.meta.items()}}


# ---------------------------------------------------------------------------------------------
# Compile (in a compiled-mode process)
# ---------------------------------------------------------------------------------------------
class _FakeTensor:
    """Stands in for a tensor argument: Triton's specialization reads only dtype and data_ptr."""

    def __init__(self, dtype, aligned: bool):
        self.dtype = dtype
        self._ptr = 1 << 20 if aligned else (1 << 20) + 2

    def data_ptr(self):
        return self._ptr


def _rebuild_value(value):
    import importlib

    import triton.language as tl

    if isinstance(value, dict):
        if "tensor" in value:
            return _FakeTensor(_TORCH_DTYPES[value["tensor"]], value["aligned"])
        if "tl_dtype" in value:
            return tl.dtype(value["tl_dtype"])
        if "combine" in value:
            return getattr(importlib.import_module(COMBINE_MODULE), value["combine"])
        if "jit_function" in value:
            module, name = value["jit_function"].split(":")
            return getattr(importlib.import_module(module), name)
    return value


def _kernel(name):
    import importlib
    for module in KERNEL_MODULES:
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(mod, name):
            return getattr(mod, name)
    raise KeyError(f"no kernel named {name}")


def compile_description(desc: dict, arch: int):
    """Compile one described launch for ``sm_<arch>`` exactly as the Triton runtime would."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile, make_backend
    from triton.runtime.jit import create_function_from_signature

    kernel = _kernel(desc["kernel"])
    if not hasattr(kernel, "params"):
        raise RuntimeError("compile_description needs compiled Triton: run with TRITON_INTERPRET=0")
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    args = [_rebuild_value(a) for a in desc["args"]]
    meta = {k: _rebuild_value(v) for k, v in desc["meta"].items()}
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound_args, specialization, options = binder(*args, **meta)
    options, signature, constexprs, attrs = kernel._pack_args(backend, meta, bound_args,
                                                              specialization, options)
    return compile(ASTSource(kernel, signature, constexprs, attrs), target=target,
                   options=options.__dict__)


_ACCESS = re.compile(r"\b(ld|st)\.global(?:\.[a-z0-9]+)*?(?:\.v(\d))?\.(b|f|u|s)(\d+)\b")


def _resource_usage(cubin: bytes) -> dict:
    """Registers and spill bytes from the cubin, via the cuobjdump that ships with Triton."""
    import tempfile

    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    usage = {}
    if m := re.search(r"REG:(\d+)", text):
        usage["registers"] = int(m.group(1))
    if m := re.search(r"STACK:(\d+)", text):
        usage["stack_bytes"] = int(m.group(1))
    if m := re.search(r"LOCAL:(\d+)", text):
        usage["local_bytes"] = int(m.group(1))
    return usage


def summarize(compiled) -> dict:
    """Widest vector access (bits) of global loads and stores, registers, spills."""
    widths = {"ld": [], "st": []}
    for m in _ACCESS.finditer(compiled.asm["ptx"]):
        op, vec, _, bits = m.group(1), m.group(2), m.group(3), int(m.group(4))
        widths[op].append(int(vec or 1) * bits)
    summary = {"max_load_bits": max(widths["ld"], default=0),
               "max_store_bits": max(widths["st"], default=0),
               "num_warps": compiled.metadata.num_warps,
               "shared_bytes": compiled.metadata.shared}
    summary.update(_resource_usage(compiled.asm["cubin"]))
    return summary


def compile_in_subprocess(descriptions: list, archs=(80, 90), timeout: float = 3600,
                          workers: int | None = None) -> list:
    """Compile every description for every arch in compiled-mode Python processes (``workers``
    of them, default: one per CPU core, ptxas being single-threaded); results keep the order
    of ``descriptions`` x ``archs``."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(descriptions) or 1))
    env = dict(os.environ, TRITON_INTERPRET="0")
    chunks = [descriptions[i::workers] for i in range(workers)]
    procs = [subprocess.Popen([sys.executable, "-m", "tritonml._gpu_compile"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in chunks]
    outputs = []
    for proc, chunk in zip(procs, chunks):
        proc.stdin.write(json.dumps({"archs": list(archs), "launches": chunk}))
        proc.stdin.close()
    for proc in procs:
        stdout, stderr = proc.stdout.read(), proc.stderr.read()
        if proc.wait(timeout=timeout) != 0:
            raise RuntimeError(f"GPU compilation failed:\n{stderr[-4000:]}")
        outputs.append(json.loads(stdout))
    # interleave the chunks back into the original order
    per = len(archs)
    results = [None] * (len(descriptions) * per)
    for w, out in enumerate(outputs):
        for j, entry in enumerate(out):
            results[(w + (j // per) * workers) * per + j % per] = entry
    return results


def main() -> None:
    request = json.load(sys.stdin)
    results = []
    for desc in request["launches"]:
        for arch in request["archs"]:
            entry = {"kernel": desc["kernel"], "arch": arch, "meta": desc["meta"],
                     "case": desc.get("case")}
            try:
                entry.update(summarize(compile_description(desc, arch)))
                entry["ok"] = True
            except Exception as e:  # reported per launch so one failure names itself
                entry["ok"] = False
                entry["error"] = f"{type(e).__name__}: {e}"[-2000:]
            results.append(entry)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
