"""The shipped kernel specializations compile to the SASS the committed compile facts record.

``autotune/tables/compiled.json`` holds, per specialization (kernel, arch, dtype class, state
class, tile, warps, window), the registers, spills, loads in flight and a sha256 of the SASS
instructions (``tritonml.bench.gpu_compile.sass_fingerprint``: no header, encodings, paths or line
info). A refactor of the kernels or launchers must leave what ptxas emits as it was: this test
recompiles a deterministic spread of the table (two specializations per kernel and state class,
every dtype class, both archs: ``benchmarks.compile_facts.spread``) and compares.
``python -m benchmarks.compile_facts --check`` compares every entry (about 1,500 compiles: too
slow for the suite).
"""
import json

import pytest


@pytest.fixture(scope="module")
def facts():
    """The generator, a tool of the repository (it imports tritonml and the tuner)."""
    from benchmarks import compile_facts

    return compile_facts


def _regenerate(facts) -> str:
    return facts.GENERATOR


SASS = """
	code for sm_90a
	.target	sm_90a

		Function : {name}
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;              /* 0x00000a00ff017b82 */
                                                                       /* {control} */
        /*0010*/               @P2 BRA 0x{target} ;                    /* 0x0000000000642947 */
                                                                       /* 0x000fea0003800000 */
        /*0020*/                   EXIT ;                              /* 0x000000000000794d */
		..........
"""


def test_the_sass_fingerprint_reads_only_the_instructions():
    from tritonml.bench.gpu_compile import sass_fingerprint, sass_instructions

    base = SASS.format(name="scan_kernel", control="0x000fe20000000800", target="0")
    assert sass_instructions(base) == ["/*0000*/ LDC R1, c[0x0][0x28] ;",
                                       "/*0010*/ @P2 BRA 0x0 ;", "/*0020*/ EXIT ;"]
    renamed = SASS.format(name="renamed_kernel", control="0x000fc80000000800", target="0")
    assert sass_fingerprint(renamed.replace("        ", "    ")) == sass_fingerprint(base)
    assert sass_fingerprint(SASS.format(name="scan_kernel", control="0x000fe20000000800",
                                        target="10")) != sass_fingerprint(base)


@pytest.mark.source_tree
def test_the_committed_table_fingerprints_every_entry(facts):
    entries = json.loads(facts.OUTPUT.read_text(encoding="utf-8"))["entries"]
    missing = [e for e in entries if not e.get("sass_sha256")]
    assert not missing, (f"{len(missing)} entries have no SASS fingerprint; regenerate: "
                         f"{_regenerate(facts)}")


def test_the_spread_covers_every_kernel_state_arch_and_dtype(facts):
    chosen = facts.spread(list(facts.launches()))
    every = {(kernel, state) for _, kernel, state, _ in facts.launches()}
    assert {(kernel, state) for _, kernel, state, _ in chosen} == every
    assert {dtype for dtype, *_ in chosen} == set(facts.compiled.DTYPE_CLASSES)


@pytest.mark.source_tree
def test_compiled_sass_sm80_sm90_of_the_spread_is_as_committed(facts):
    chosen = facts.spread(list(facts.launches()))
    entries = facts.measure(chosen)
    table = json.loads(facts.OUTPUT.read_text(encoding="utf-8"))
    import triton
    from packaging.version import Version

    from tests import triton_releases
    if triton_releases.RELEASE != Version(table["triton"]).release[:2]:
        # Registers and fingerprints are one Triton release's ptxas's (the table's); on another
        # supported release (3.6: .ci/run) the spread must compile for both archs, every entry.
        assert len(entries) == len(chosen) * 2 and all(e["registers"] > 0 for e in entries)
        return
    changed = facts.differences(entries, table["entries"])
    assert not changed, (
        "the compiled code of these kernel specializations changed:\n  " + "\n  ".join(changed)
        + f"\nA refactor must leave the SASS as it was. If the change is intended, regenerate the "
          f"table ({_regenerate(facts)}, or --only KERNEL) and commit it with the change. (The "
          f"table was compiled with triton {table['triton']}, this run with {triton.__version__}: "
          f"another Triton's ptxas emits other code.)")
