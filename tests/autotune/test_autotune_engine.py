"""The tuning engine (autotune/engine.py) and its persistent cache (autotune/cache.py), on the CPU.

Timings come from injected deterministic timers; nothing here calls ``triton.testing.do_bench``.
Every test points ``TRITONML_CACHE_DIR`` at its own temporary directory.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tritonml_autotune import cache as tcache
from tritonml_autotune import engine
from tests.timing import limit

AUTOTUNE_DIR = Path(engine.__file__).parent
CANDIDATES = [{"BLOCK": 64, "num_warps": 4}, {"BLOCK": 128, "num_warps": 4},
              {"BLOCK": 256, "num_warps": 8}]
# Seconds per BLOCK, for the injected timer: 128 is fastest.
FAKE_SECONDS = {64: 3e-5, 128: 1e-5, 256: 2e-5}
# The cost model prefers 256, so a "modeled" choice is told apart from a "timed" one.
COST = {64: 3.0, 128: 2.0, 256: 1.0}


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITONML_AUTOTUNE", raising=False)
    engine.set_timing(None)
    yield tmp_path / "cache"
    engine.set_timing(None)


def cache_file(directory: Path) -> Path:
    return directory / tcache.FILE_NAME


def counting_benchmark(calls: list):
    def benchmark(config):
        calls.append(config["BLOCK"])
        return FAKE_SECONDS[config["BLOCK"]]
    return benchmark


def cost_model(config):
    return COST[config["BLOCK"]]


def run_python(code: str, cache_dir: Path, **env) -> subprocess.Popen:
    environ = dict(os.environ, TRITONML_CACHE_DIR=str(cache_dir), **env)
    environ["PYTHONPATH"] = os.pathsep.join([str(AUTOTUNE_DIR.parent), environ.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=limit(120))
    assert proc.returncode == 0, err
    return out


# ---------------------------------------------------------------------------------------------
# Choosing

def test_timing_picks_the_fastest_candidate_and_times_each_once():
    calls = []
    key = engine.make_key(version="t1", kernel="scan", n=engine.log2_bucket(1000))
    choice = engine.tune(key, CANDIDATES, cost_model=cost_model, benchmark=counting_benchmark(calls))
    assert choice == engine.Choice({"BLOCK": 128, "num_warps": 4}, engine.TIMED, 1e-5)
    assert sorted(calls) == [64, 128, 256]


def test_a_timed_winner_is_cached_and_not_timed_again():
    calls = []
    key = engine.make_key(version="t1", kernel="scan")
    engine.tune(key, CANDIDATES, benchmark=counting_benchmark(calls))
    again = engine.tune(key, CANDIDATES, benchmark=counting_benchmark(calls))
    assert again.source == engine.CACHED and again.config["BLOCK"] == 128
    assert again.config is CANDIDATES[1]  # the caller's own object comes back
    assert len(calls) == 3


def test_bench_with_times_the_built_callable_with_the_injected_timer():
    built = []

    def build(config):
        built.append(config["BLOCK"])
        return lambda: config["BLOCK"]

    def timer(fn):
        return FAKE_SECONDS[fn()]
    choice = engine.tune({"k": 1}, CANDIDATES, benchmark=engine.bench_with(build, timer))
    assert choice.config["BLOCK"] == 128 and choice.source == engine.TIMED
    assert sorted(built) == [64, 128, 256]


def test_candidates_whose_benchmark_raises_are_skipped():
    def benchmark(config):
        if config["BLOCK"] == 128:
            raise RuntimeError("out of resources")
        return FAKE_SECONDS[config["BLOCK"]]
    assert engine.tune({"k": 2}, CANDIDATES, benchmark=benchmark).config["BLOCK"] == 256


def test_every_candidate_failing_is_an_error_and_nothing_is_cached(isolated_cache):
    def benchmark(config):
        raise RuntimeError("no")
    with pytest.raises(RuntimeError, match="every one of 3 candidates"):
        engine.tune({"k": 3}, CANDIDATES, benchmark=benchmark)
    assert not cache_file(isolated_cache).exists()


def test_env_var_zero_turns_timing_off_and_the_cost_model_decides(monkeypatch, isolated_cache):
    monkeypatch.setenv("TRITONML_AUTOTUNE", "0")
    calls = []
    choice = engine.tune({"k": 4}, CANDIDATES, cost_model=cost_model,
                         benchmark=counting_benchmark(calls))
    assert choice == engine.Choice({"BLOCK": 256, "num_warps": 8}, engine.MODELED)
    assert calls == []
    assert not cache_file(isolated_cache).exists()  # modeled choices are not stored


def test_set_timing_and_the_context_manager_turn_timing_off_and_back():
    calls = []
    engine.set_timing(False)
    assert engine.tune({"k": 5}, CANDIDATES, cost_model=cost_model,
                       benchmark=counting_benchmark(calls)).source == engine.MODELED
    engine.set_timing(None)
    with engine.timing(False):
        assert not engine.timing_enabled()
        assert engine.tune({"k": 5}, CANDIDATES, cost_model=cost_model,
                           benchmark=counting_benchmark(calls)).source == engine.MODELED
    assert engine.timing_enabled() and calls == []
    assert engine.tune({"k": 5}, CANDIDATES, cost_model=cost_model,
                       benchmark=counting_benchmark(calls)).source == engine.TIMED


def test_set_timing_overrides_the_env_var(monkeypatch):
    monkeypatch.setenv("TRITONML_AUTOTUNE", "0")
    assert not engine.timing_enabled()
    with engine.timing(True):
        assert engine.timing_enabled()
    assert not engine.timing_enabled()


def test_without_benchmark_the_cost_model_decides_and_without_either_the_first_candidate():
    assert engine.tune({"k": 6}, CANDIDATES, cost_model=cost_model).source == engine.MODELED
    choice = engine.tune({"k": 6}, CANDIDATES)
    assert choice == engine.Choice(CANDIDATES[0], engine.DEFAULT)


def test_a_cached_winner_that_is_no_longer_a_candidate_is_retimed():
    calls = []
    engine.tune({"k": 7}, CANDIDATES, benchmark=counting_benchmark(calls))
    fewer = [c for c in CANDIDATES if c["BLOCK"] != 128]
    choice = engine.tune({"k": 7}, fewer, benchmark=counting_benchmark(calls))
    assert choice.source == engine.TIMED and choice.config["BLOCK"] == 256


def test_keys_are_field_order_independent():
    calls = []
    engine.tune({"a": 1, "b": [2, 3]}, CANDIDATES, benchmark=counting_benchmark(calls))
    assert engine.tune({"b": [2, 3], "a": 1}, CANDIDATES).source == engine.CACHED


def test_make_key_adds_versions_and_rejects_reserved_or_non_json_fields():
    from importlib import metadata
    key = engine.make_key(version="abc", kernel="reduce", dtype="float32")
    assert key == {"kernel": "reduce", "dtype": "float32", "version": "abc",
                   "triton": metadata.version("triton"), "torch": metadata.version("torch")}
    with pytest.raises(ValueError, match="reserved"):
        engine.make_key(version="abc", torch="2.0")
    with pytest.raises(TypeError):
        engine.make_key(version="abc", dtype=object())


def test_tuning_imports_no_torch_triton_tritonml_or_pickle(isolated_cache):
    proc = run_python("""
        import sys
        from tritonml_autotune import engine
        engine.make_key(version="v", n=engine.log2_bucket(5))
        engine.tune({"k": 1}, [{"B": 1}, {"B": 2}], cost_model=lambda c: c["B"])
        engine.tune({"k": 1}, [{"B": 1}, {"B": 2}], benchmark=lambda c: 1.0 / c["B"])
        engine.tune({"k": 1}, [{"B": 1}, {"B": 2}])
        print(sorted(m for m in ("torch", "triton", "tritonml", "pickle") if m in sys.modules))
    """, isolated_cache)
    assert finish(proc).strip() == "[]"


# ---------------------------------------------------------------------------------------------
# Buckets

@pytest.mark.parametrize("n, bucket", [
    (0, 0), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (7, 8), (8, 8), (9, 16),
    (1023, 1024), (1024, 1024), (1025, 2048), (2**31 - 1, 2**31), (2**31, 2**31), (2**31 + 1, 2**32),
])
def test_log2_bucket_edges(n, bucket):
    assert engine.log2_bucket(n) == bucket


@pytest.mark.parametrize("k", range(2, 40))  # 2**1 - 1 = 1 is a power itself
def test_log2_bucket_puts_one_less_than_a_power_with_it_and_one_more_in_the_next(k):
    assert engine.log2_bucket(2**k - 1) == engine.log2_bucket(2**k) == 2**k
    assert engine.log2_bucket(2**k + 1) == 2**(k + 1)


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (2.0, TypeError), (True, TypeError)])
def test_log2_bucket_rejects_negative_and_non_integer_sizes(bad, error):
    with pytest.raises(error):
        engine.log2_bucket(bad)


# ---------------------------------------------------------------------------------------------
# The cache

def test_cache_location_follows_env_and_xdg(monkeypatch, tmp_path):
    assert tcache.cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("TRITONML_CACHE_DIR")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert tcache.cache_dir() == tmp_path / "xdg" / "tritonml"
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
        assert tcache.cache_dir() == Path.home() / ".cache" / "tritonml"
        monkeypatch.delenv("XDG_CACHE_HOME")
        assert tcache.cache_dir() == Path.home() / ".cache" / "tritonml"


def test_results_are_reloaded_in_a_new_process(isolated_cache):
    calls = []
    key = engine.make_key(version="t1", kernel="scan", n=engine.log2_bucket(100))
    engine.tune(key, CANDIDATES, benchmark=counting_benchmark(calls))
    stored = json.loads(cache_file(isolated_cache).read_text())
    assert stored["schema"] == tcache.SCHEMA_VERSION and len(stored["entries"]) == 1
    proc = run_python(f"""
        import json
        from tritonml_autotune import engine
        def benchmark(config):
            raise AssertionError("a cached key must not be timed again")
        key = engine.make_key(version="t1", kernel="scan", n=engine.log2_bucket(100))
        choice = engine.tune(key, {CANDIDATES!r}, benchmark=benchmark)
        print(json.dumps([choice.source, choice.config, choice.seconds]))
    """, isolated_cache)
    assert json.loads(finish(proc)) == ["cached", {"BLOCK": 128, "num_warps": 4}, 1e-5]


def test_concurrent_processes_keep_every_entry(isolated_cache, tmp_path):
    go = tmp_path / "go"
    writer = f"""
        import os, time
        from tritonml_autotune import engine
        worker = int(os.environ["WORKER"])
        while not os.path.exists({str(go)!r}):  # all four start writing together
            time.sleep(0.001)
        for i in range(25):
            engine.tune({{"worker": worker, "i": i}}, [{{"B": 1}}, {{"B": 2}}],
                        benchmark=lambda c: 1.0 / c["B"] + worker * 1e-3 + i * 1e-6)
    """
    procs = [run_python(writer, isolated_cache, WORKER=str(w)) for w in range(4)]
    go.touch()
    for proc in procs:
        finish(proc)
    entries = tcache.read_entries(cache_file(isolated_cache))
    expected = {tcache.key_string({"worker": w, "i": i}) for w in range(4) for i in range(25)}
    assert set(entries) == expected
    assert all(e["config"] == {"B": 2} for e in entries.values())
    leftovers = [p.name for p in isolated_cache.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_warm_lookup_does_not_touch_the_disk(isolated_cache, monkeypatch):
    engine.tune({"k": 8}, CANDIDATES, benchmark=counting_benchmark([]))

    def no_disk(path):
        raise AssertionError("warm lookup read the file")
    monkeypatch.setattr(tcache, "read_entries", no_disk)
    cache_file(isolated_cache).unlink()
    assert engine.tune({"k": 8}, CANDIDATES).source == engine.CACHED


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "wrong schema", "not an object",
                                    "malformed entries", "binary"])
def test_a_damaged_file_warns_once_is_treated_as_empty_and_is_replaced(isolated_cache, damage):
    path = cache_file(isolated_cache)
    path.parent.mkdir(parents=True)
    old_key = tcache.key_string({"old": 1})
    good = json.dumps({"schema": tcache.SCHEMA_VERSION,
                       "entries": {old_key: {"config": {"B": 1}, "seconds": 1.0}}})
    path.write_bytes({
        "corrupt": b"{this is not json",
        "truncated": good[: len(good) // 2].encode(),
        "wrong schema": json.dumps({"schema": tcache.SCHEMA_VERSION + 1,
                                    "entries": {old_key: {"config": {"B": 1}}}}).encode(),
        "not an object": b"[1, 2, 3]",
        "malformed entries": json.dumps({"schema": tcache.SCHEMA_VERSION,
                                         "entries": {old_key: [1]}}).encode(),
        "binary": b"\x80\x04\x95 pickle-like bytes \xff",
    }[damage])
    with pytest.warns(tcache.CacheFileWarning) as record:
        assert tcache.TuningCache(path).get({"old": 1}) is None
        assert tcache.TuningCache(path).get({"old": 1}) is None  # same path: no second warning
        choice = engine.tune({"k": 9}, CANDIDATES, benchmark=counting_benchmark([]),
                             cache=tcache.TuningCache(path))
    assert len(record) == 1 and str(path) in str(record[0].message)
    assert choice.source == engine.TIMED
    stored = json.loads(path.read_text())
    assert stored == {"schema": tcache.SCHEMA_VERSION,
                      "entries": {tcache.key_string({"k": 9}): {
                          "config": {"BLOCK": 128, "num_warps": 4}, "seconds": 1e-5, "source": "timed"}}}


def test_an_unwritable_cache_directory_warns_once_and_keeps_results_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TRITONML_CACHE_DIR", str(blocker / "cache"))
    calls = []
    with pytest.warns(tcache.CacheFileWarning, match="cannot be written") as record:
        assert engine.tune({"k": 10}, CANDIDATES, benchmark=counting_benchmark(calls)).source == "timed"
        assert engine.tune({"k": 11}, CANDIDATES, benchmark=counting_benchmark(calls)).source == "timed"
    assert len(record) == 1
    assert engine.tune({"k": 10}, CANDIDATES).source == engine.CACHED


def imported_packages(path: Path) -> set:
    """The top-level packages the module at ``path`` imports anywhere (in functions too), by
    statement or by ``importlib.import_module``/``__import__`` of a literal name; relative
    imports are of its own package and not counted."""
    return imported_packages_of(path.read_text(encoding="utf-8"))


def imported_packages_of(source: str) -> set:
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__")):
            imported.add(node.args[0].value.split(".")[0])
    return imported


def test_the_cache_and_engine_never_import_pickle_or_other_code_loaders():
    for name in ("cache.py", "engine.py"):
        imported = imported_packages(AUTOTUNE_DIR / name)
        assert not imported & {"pickle", "cPickle", "dill", "marshal", "shelve", "cloudpickle"}, name


def test_no_module_of_the_tuner_imports_tritonml():
    """The tuner is a package of its own (``tritonml_autotune``): tritonml's launchers import it,
    never the other way round; the repository's tools that need both are in benchmarks/."""
    modules = sorted(AUTOTUNE_DIR.rglob("*.py"))
    assert len(modules) > 10, AUTOTUNE_DIR
    importing = [str(path.relative_to(AUTOTUNE_DIR)) for path in modules
                 if "tritonml" in imported_packages(path)]
    assert importing == []


def test_the_import_check_sees_every_way_of_importing():
    sources = ("import tritonml", "import os, tritonml.core", "from tritonml.core import layout",
               "def f():\n    from tritonml import tuning",
               "import importlib\nimportlib.import_module('tritonml.launchers')",
               "__import__('tritonml')")
    for source in sources:
        assert "tritonml" in imported_packages_of(source), source
    assert "tritonml" not in imported_packages_of("from . import cost\nimport tritonml_autotune")


# ---------------------------------------------------------------------------------------------
# Injected timers, recorded modeled choices, listing and clearing

def test_using_timer_times_benchmarks_without_their_own_timer_and_restores_the_default():
    def build(config):
        return lambda: config["BLOCK"]
    benchmark = engine.bench_with(build)
    with engine.using_timer(lambda fn: FAKE_SECONDS[fn()]):
        assert engine.tune({"k": 20}, CANDIDATES, benchmark=benchmark).config["BLOCK"] == 128
        with engine.using_timer(lambda fn: 1.0 / fn()):  # innermost wins
            assert engine.tune({"k": 21}, CANDIDATES, benchmark=benchmark).config["BLOCK"] == 256
    assert engine._timer_override is None


def test_a_recorded_modeled_choice_is_listed_but_never_returned_nor_over_a_timed_one(isolated_cache):
    engine.record_modeled({"k": 22}, CANDIDATES[2])
    assert engine.lookup({"k": 22}, CANDIDATES) is None
    stored = tcache.default_cache().entries()
    assert stored == {tcache.key_string({"k": 22}): {"config": CANDIDATES[2], "source": "modeled"}}
    calls = []
    assert engine.tune({"k": 22}, CANDIDATES, benchmark=counting_benchmark(calls)).source == engine.TIMED
    engine.record_modeled({"k": 22}, CANDIDATES[0])
    assert engine.lookup({"k": 22}, CANDIDATES) == engine.Choice(CANDIDATES[1], engine.CACHED, 1e-5)


def test_entries_see_other_processes_and_clear_removes_the_file(isolated_cache):
    engine.tune({"k": 23}, CANDIDATES, benchmark=counting_benchmark([]))
    finish(run_python("""
        from tritonml_autotune import engine
        engine.tune({"k": 24}, [{"B": 1}, {"B": 2}], benchmark=lambda c: float(c["B"]))
    """, isolated_cache))
    cache = tcache.default_cache()
    assert set(cache.entries()) == {tcache.key_string({"k": 23}), tcache.key_string({"k": 24})}
    cache.clear()
    assert not cache_file(isolated_cache).exists() and len(cache) == 0
    assert engine.lookup({"k": 23}, CANDIDATES) is None
