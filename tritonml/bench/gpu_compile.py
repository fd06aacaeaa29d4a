"""Compile recorded launches for real GPUs without a GPU, and read what they became.

Triton can compile for a target it is not running on. A launch recorded by
``tritonml.runtime.trace`` (usually with ``execute=False``) is turned into a JSON description
(``describe``); a process running compiled Triton (``TRITON_INTERPRET=0``; CUDA is not needed)
replays the runtime's own argument specialization (integer and alignment specialization, constexprs)
and compiles it for each target (``compile_description``), then reads the PTX and cubin: global
load/store vector widths, registers and spills (``summarize``).

Run as ``python -m tritonml.bench.gpu_compile < launches.json`` to print a JSON summary per launch
and target; ``tritonml bench``, the tests and benchmarks/ do that through ``compile_in_subprocess``,
since their own process interprets. (``tritonml/bench/gpu_compile.py`` re-exports this module.)
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from ..core import backend as _backend
from ..core import triton_compat as _triton_compat
from ..core.dtypes import DTYPE_BY_NAME
from tritonml_autotune.devices import ARCHS


KERNEL_MODULES = ("tritonml.kernels.scan", "tritonml.kernels.scan_chunked",
                  "tritonml.kernels.reduce", "tritonml.kernels.segment",
                  "tritonml.kernels.index_bounds")
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
    if isinstance(value, tuple):  # layout arguments: sizes or strides, one per dim
        return {"tuple": [_describe_value(v) for v in value]}
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
    import triton.language as tl

    if isinstance(value, dict):
        if "tuple" in value:
            return tuple(_rebuild_value(v) for v in value["tuple"])
        if "tensor" in value:
            return _FakeTensor(DTYPE_BY_NAME[value["tensor"]], value["aligned"])
        if "tl_dtype" in value:
            return tl.dtype(value["tl_dtype"])
        if "combine" in value:
            return getattr(importlib.import_module(COMBINE_MODULE), value["combine"])
        if "jit_function" in value:
            module, name = value["jit_function"].split(":")
            return getattr(importlib.import_module(module), name)
    return value


def _kernel(name):
    for module in KERNEL_MODULES:
        mod = importlib.import_module(module)
        if hasattr(mod, name):
            return getattr(mod, name)
    raise KeyError(f"no kernel named {name}")


def compile_description(desc: dict, arch: int):
    """Compile one described launch for ``sm_<arch>`` exactly as the Triton runtime would."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile, make_backend

    if _backend.INTERPRET:
        raise RuntimeError("compile_description needs compiled Triton: run with TRITON_INTERPRET=0")
    kernel = _kernel(desc["kernel"])
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    args = [_rebuild_value(a) for a in desc["args"]]
    meta = {k: _rebuild_value(v) for k, v in desc["meta"].items()}
    signature, constexprs, attrs, options = _triton_compat.specialize(kernel, backend, args, meta)
    return compile(ASTSource(kernel, signature, constexprs, attrs), target=target,
                   options=options.__dict__)


# "ld.global.L1::evict_last.L2::cache_hint.v4.b32": qualifiers (cache and eviction hints, which
# the kernels ask for with ``eviction_policy``), then the vector width and the element type.
_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[A-Za-z0-9_:]+)*?)(?:\.v(\d))?\.(b|f|u|s)(\d+)\b")
_EVICTION = re.compile(r"\.L1::(evict_\w+)")


def _cuobjdump(cubin: bytes, flag: str) -> str | None:
    """``cuobjdump <flag>`` of the cubin, with the cuobjdump that ships with Triton (None without)."""
    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, flag, f.name], capture_output=True, text=True).stdout


# SASS: "/*0670*/  @P3 LDG.E.128 R8, desc[UR8][R36.64] ;"
_SASS_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_SASS_REGISTER = re.compile(r"\bR(\d+)\b")
# One instruction, from its address to its ";" (the "/* 0x... */" encoding that follows dropped).
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/[^;]*;")


def loads_in_flight(sass: str) -> int:
    """Global loads one warp has in flight at once in the kernel's busiest loop (the loop with the
    most LDG instructions): the longest run of loads issued before an instruction reads the result
    of one of them. The streaming loop of a memory-bound kernel hides memory latency with these and
    with resident warps; 0 when there is no loop with a global load."""
    instructions = []
    for line in sass.splitlines():
        if m := _SASS_INSTRUCTION.search(line):
            instructions.append((int(m.group(1), 16), m.group(2), m.group(3)))
    best = (0, 0)   # (loads in the loop, most in flight)
    for address, opcode, operands in instructions:
        target = re.search(r"0x([0-9a-f]+)", operands) if opcode.startswith("BRA") else None
        if target is None or int(target.group(1), 16) >= address:
            continue
        body = [i for i in instructions if int(target.group(1), 16) <= i[0] <= address]
        pending, run, most, loads = set(), 0, 0, 0
        for _, op, args in body:
            written, _, read = args.partition(",")
            if op.startswith(("ST", "RED", "ATOM")):
                read = args   # stores and atomics read every operand
            if {int(r) for r in _SASS_REGISTER.findall(read)} & pending:
                most, pending, run = max(most, run), set(), 0
            if op.startswith("LDG"):
                loads += 1
                first = _SASS_REGISTER.search(written)
                width = 4 if ".128" in op else 2 if ".64" in op else 1
                if first:
                    pending |= set(range(int(first.group(1)), int(first.group(1)) + width))
                run += 1
        best = max(best, (loads, max(most, run)))
    return best[1]


def local_accesses_in_loops(sass: str) -> int:
    """Local-memory loads and stores (``LDL``/``STL``: what ptxas keeps in the stack frame) inside
    any loop (from a backward branch's target to the branch). A value parked in the frame across
    a loop costs a few accesses per program; one spilled inside a streaming loop, some per tile."""
    instructions = [(int(m.group(1), 16), m.group(2), m.group(3))
                    for m in map(_SASS_INSTRUCTION.search, sass.splitlines()) if m]
    loops = []
    for address, opcode, operands in instructions:
        target = re.search(r"0x([0-9a-f]+)", operands) if opcode.startswith("BRA") else None
        if target is not None and int(target.group(1), 16) < address:
            loops.append((int(target.group(1), 16), address))
    return sum(1 for address, opcode, _ in instructions if opcode.startswith(("LDL", "STL"))
               and any(start <= address <= end for start, end in loops))


def sass_instructions(sass: str) -> list[str]:
    """The instructions of ``cuobjdump -sass`` output, one "address predicate opcode operands"
    string each with runs of blanks made one: no header (target, function name, ELF flags), no
    encoding comments, nothing that names a file or a source line."""
    return [" ".join(m.group(0).split()) for m in map(_SASS_LINE.search, sass.splitlines()) if m]


def sass_fingerprint(sass: str) -> str:
    """sha256 (hex) of the kernel's instructions (``sass_instructions``): equal for two compiles of
    the same specialization wherever the source lives, different when the code ptxas emits is."""
    return hashlib.sha256("\n".join(sass_instructions(sass)).encode()).hexdigest()


def _resource_usage(cubin: bytes) -> dict:
    """Registers and spill bytes from the cubin, the busiest loop's loads in flight, the
    local-memory accesses inside loops and the fingerprint of the SASS."""
    text = _cuobjdump(cubin, "-res-usage")
    if text is None:
        return {}
    sass = _cuobjdump(cubin, "-sass") or ""
    usage = {"loads_in_flight": loads_in_flight(sass),
             "local_accesses_in_loops": local_accesses_in_loops(sass),
             "sass_sha256": sass_fingerprint(sass)}
    if m := re.search(r"REG:(\d+)", text):
        usage["registers"] = int(m.group(1))
    if m := re.search(r"STACK:(\d+)", text):
        usage["stack_bytes"] = int(m.group(1))
    if m := re.search(r"LOCAL:(\d+)", text):
        usage["local_bytes"] = int(m.group(1))
    return usage


def summarize(compiled) -> dict:
    """Widest vector access (bits) of global loads and stores (and of loads per L1 eviction
    policy: the chunked scan's first read asks ``evict_last``, its second ``evict_first``),
    registers, spills, and the loads one warp keeps in flight in the busiest loop
    (``loads_in_flight``)."""
    widths = {"ld": [], "st": []}
    by_eviction = {}   # the widest load per L1 eviction policy ("none": no policy asked)
    for m in _ACCESS.finditer(compiled.asm["ptx"]):
        op, qualifiers, vec, bits = m.group(1), m.group(2), m.group(3), int(m.group(5))
        widths[op].append(int(vec or 1) * bits)
        if op == "ld":
            policy = _EVICTION.search(qualifiers)
            key = policy.group(1) if policy else "none"
            by_eviction[key] = max(by_eviction.get(key, 0), int(vec or 1) * bits)
    summary = {"max_load_bits": max(widths["ld"], default=0),
               "max_store_bits": max(widths["st"], default=0),
               "load_bits_by_eviction": by_eviction,
               "num_warps": compiled.metadata.num_warps,
               "shared_bytes": compiled.metadata.shared}
    summary.update(_resource_usage(compiled.asm["cubin"]))
    return summary


# The directory holding the ``tritonml`` package: children import ``tritonml.bench.gpu_compile``
# from it (the same tritonml as the parent's, installed or not), whatever their working directory.
_REPO_ROOT = str(Path(__file__).resolve().parents[2])
WORKER_COMMAND = (sys.executable, "-m", "tritonml.bench.gpu_compile")


def run_workers(command, inputs: list, timeout: float, env: dict | None = None) -> list:
    """Run ``command`` once per entry of ``inputs`` (its stdin), all at once; return their stdouts.

    The children's stdin, stdout and stderr are temporary files, not pipes, so a child that writes
    a lot to either stream never blocks on a pipe nobody is reading. A child still running
    ``timeout`` seconds after the start is killed (all of them are), and a ``TimeoutError`` says
    so; a child that exits with an error raises a ``RuntimeError`` with the end of its stderr.
    """
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="tritonml-workers-") as scratch:
        procs, outputs = [], []
        try:
            for i, text in enumerate(inputs):
                streams = [open(os.path.join(scratch, f"{i}.{name}"), "w+", encoding="utf-8")
                           for name in ("stdin", "stdout", "stderr")]
                streams[0].write(text)
                streams[0].seek(0)
                procs.append((subprocess.Popen(list(command), stdin=streams[0], stdout=streams[1],
                                               stderr=streams[2], text=True, env=env), streams))
            for i, (proc, (_, stdout, stderr)) in enumerate(procs):
                try:
                    returncode = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    stderr.seek(0)
                    raise TimeoutError(
                        f"worker {i + 1} of {len(procs)} ({' '.join(command)}) still ran after "
                        f"{timeout:g} s and was killed; the end of its stderr:\n"
                        f"{stderr.read()[-4000:]}") from None
                stdout.seek(0)
                stderr.seek(0)
                if returncode != 0:
                    raise RuntimeError(f"worker {i + 1} of {len(procs)} ({' '.join(command)}) "
                                       f"exited with {returncode}:\n{stderr.read()[-4000:]}")
                outputs.append(stdout.read())
        finally:
            for proc, streams in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                for stream in streams:
                    stream.close()
    return outputs


def compile_in_subprocess(descriptions: list, archs=ARCHS, timeout: float = 3600,
                          workers: int | None = None, command=WORKER_COMMAND) -> list:
    """Compile every description for every arch in compiled-mode Python processes (``workers``
    of them, default: one per CPU core, ptxas being single-threaded); results keep the order
    of ``descriptions`` x ``archs``. ``timeout`` bounds the whole run, in seconds."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(descriptions) or 1))
    path = [_REPO_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.pathsep.join(path))
    chunks = [descriptions[i::workers] for i in range(workers)]
    stdouts = run_workers(command, [json.dumps({"archs": list(archs), "launches": chunk})
                                    for chunk in chunks], timeout, env)
    outputs = [json.loads(stdout) for stdout in stdouts]
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
