"""``tritonml tune``: records modeled choices without a GPU, times with an injected deterministic
timer where it could time, ``--show``, ``--clear``, ``--write-table``; every test has its own
``TRITONML_CACHE_DIR``."""
from __future__ import annotations

import json
import math

import pytest
import torch

from tritonml.runtime import trace as _trace
from tritonml import cli, tuning
from tritonml_autotune.configs import ReduceConfig
from tritonml_autotune import devices, engine, select, shipped, suite


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITONML_AUTOTUNE", raising=False)
    monkeypatch.delenv(devices.TARGET_ENV, raising=False)
    monkeypatch.setattr(cli, "_tuning_device", lambda: None)  # as on a machine without CUDA
    engine.set_timing(None)
    select.forget()
    yield tmp_path / "cache" / "autotune-v1.json"
    select.forget()


def stored(path) -> list:
    return [(json.loads(k), v) for k, v in json.loads(path.read_text())["entries"].items()]


def test_without_a_gpu_the_modeled_choices_are_recorded_and_shown(isolated, capsys):
    assert cli.main(["tune", "--target", "h100", "--ops", "sum,cumulative_sum",
                     "--shapes", "4096x4096:0,1x1048576:1", "--dtypes", "float32,float16"]) == 0
    out, err = capsys.readouterr()
    assert "tritonml tune" in err and "8/8" in err  # the progress bar
    entries = stored(isolated)
    assert len(entries) == 8 == out.count("| modeled |")
    for key, entry in entries:
        assert entry["source"] == "modeled" and key["device"] == "H100"
        item = suite.Item("SUM" if key["op"] == "reduce" else "cumulative_sum",
                                 (4096, 4096) if key["axis"] == 4096 else (1, 1048576),
                                 (0,) if key["axis"] == 4096 else (1,))
        with tuning.target("H100"):
            plan, _ = tuning.plan_for(item, getattr(torch, key["dtype"]), None)
        assert entry["config"] == select.fields(select.modeled(plan).config)
    assert cli.main(["tune", "--show"]) == 0
    shown = capsys.readouterr().out
    assert f"8 entries in {isolated}" in shown
    rows = [line for line in shown.splitlines() if line.startswith("| H100 |")]
    assert len(rows) == 8 and all("| modeled |" in row for row in rows)
    assert "| H100 | reduce | SUM | float16 | 4096 | 4096 | 1 | strided |" in shown


def test_clear_removes_every_entry(isolated, capsys):
    cli.main(["tune", "--target", "A100", "--ops", "MAX", "--shapes", "64x4096:1",
              "--dtypes", "float32"])
    assert len(stored(isolated)) == 1
    assert cli.main(["tune", "--clear"]) == 0
    assert f"removed 1 entries from {isolated}" in capsys.readouterr().out
    assert not isolated.exists()
    cli.main(["tune", "--show"])
    assert "0 entries" in capsys.readouterr().out


def fake_seconds(block_axis, block_inner, num_warps) -> float:
    """A deterministic stand-in for do_bench: prefers 1024-element tiles, then fewer warps."""
    return abs(math.log2(block_axis * block_inner) - 10) * 1e-5 + num_warps * 1e-7


def timer_from_launches(fn) -> float:
    with _trace.record(execute=False) as rec:  # nothing runs: the launch's tile is read
        fn()
    meta = rec.launches[0].meta
    return fake_seconds(meta["BLOCK_AXIS"], meta["BLOCK_INNER"], meta["num_warps"])


def test_on_the_target_gpu_candidates_are_timed_and_the_fastest_stored(isolated, monkeypatch,
                                                                        capsys):
    # The interpreter's CPU device stands in for the GPU; the injected timer never runs a kernel.
    monkeypatch.setattr(cli, "_tuning_device", lambda: torch.device("cpu"))
    monkeypatch.setattr(select, "cuda_gpu", lambda device: devices.H100)
    with engine.using_timer(timer_from_launches):
        assert cli.main(["tune", "--target", "H100", "--ops", "SUM", "--shapes", "3000x70:0",
                         "--dtypes", "float32"]) == 0
    [(key, entry)] = stored(isolated)
    with tuning.target("H100"):
        plan, _ = tuning.plan_for(suite.Item("SUM", (3000, 70), (0,)), torch.float32, None)
    seconds = {json.dumps(c, sort_keys=True): fake_seconds(c["block_axis"], c["block_inner"],
                                                           c["num_warps"])
               for c in plan.candidates}
    best = min(seconds, key=seconds.get)
    assert entry == {"config": json.loads(best), "seconds": seconds[best], "source": "timed"}
    assert "| timed |" in capsys.readouterr().out
    # A second run finds it in the cache and times nothing.
    with engine.using_timer(lambda fn: pytest.fail("timed again")):
        cli.main(["tune", "--target", "H100", "--ops", "SUM", "--shapes", "3000x70:0",
                  "--dtypes", "float32"])
    assert "| cached |" in capsys.readouterr().out
    # And what a launcher gets for that problem is that winner.
    assert select.decide(plan) == engine.Choice(ReduceConfig(**json.loads(best)), engine.CACHED,
                                                seconds[best])


def test_timing_off_records_the_modeled_choice_even_on_the_gpu(isolated, monkeypatch):
    monkeypatch.setattr(cli, "_tuning_device", lambda: torch.device("cpu"))
    monkeypatch.setattr(select, "cuda_gpu", lambda device: devices.H100)
    monkeypatch.setenv("TRITONML_AUTOTUNE", "0")
    with engine.using_timer(lambda fn: pytest.fail("timed with TRITONML_AUTOTUNE=0")):
        cli.main(["tune", "--ops", "SUM", "--shapes", "3000x70:0", "--dtypes", "float32"])
    assert [entry["source"] for _, entry in stored(isolated)] == ["modeled"]


def test_write_table_writes_a_table_the_lookup_reads(tmp_path, capsys):
    path = tmp_path / "H100.json"
    assert cli.main(["tune", "--target", "H100", "--ops", "ARGMAX", "--shapes", "64x4096:1",
                     "--dtypes", "float32", "--write-table", str(path)]) == 0
    data = shipped.read(path)
    assert data["device"] == "H100"
    [(text, entry)] = data["entries"].items()
    assert entry["source"] == "modeled" and entry["generator"] == select.version()
    assert "version" not in json.loads(text) and json.loads(text)["function"] == "ARGMAX"


@pytest.mark.parametrize("argv, message", [
    (["tune", "--target", "H100", "--ops", "CUMSUM"], "--ops: unknown CUMSUM"),
    (["tune", "--target", "V100"], "--target: unknown target 'V100'"),
    (["tune", "--target", "H100", "--shapes", "4096xx:0"], "--shapes: cannot read"),
    (["tune"], "no CUDA device here"),
    (["tune", "--target", "H100", "--dtypes", "float33"], "--dtypes: unknown float33"),
    (["tune", "--target", "H100", "--ops", "SUM", "--shapes", "64x32:2"],
     "--shapes: '64x32:2': axis 2 is out of range for 2 dims"),
    (["tune", "--target", "H100", "--ops", "SUM", "--shapes", "64x32:-3"],
     "--shapes: '64x32:-3': axis -3 is out of range"),
    (["tune", "--target", "H100", "--ops", "SUM", "--shapes", "64x32x8:0+0"],
     "--shapes: '64x32x8:0+0': an axis is repeated"),
    (["tune", "--target", "H100", "--ops", "SUM", "--shapes", "64x32:1+-1"],
     "--shapes: '64x32:1+-1': an axis is repeated"),
    (["tune", "--target", "H100", "--ops", "cumulative_sum", "--shapes", "64x32:0+1"],
     "--shapes: '64x32:0+1': cumulative_sum scans exactly one axis"),
    (["tune", "--target", "H100", "--ops", "cumulative_product,SUM", "--shapes", "64x32:all"],
     "--shapes: '64x32:all': cumulative_product scans exactly one axis"),
    (["tune", "--target", "H100", "--shapes", " , "], "--shapes: no shape in"),
    (["tune", "--target", "H100", "--ops", "SUM", "--write-table", "/no/such/folder/t.json"],
     "--write-table /no/such/folder/t.json: cannot write: folder /no/such/folder does not exist"),
])
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys, isolated):
    """One argparse-style line, exit code 2, before anything is tuned or the cache is touched."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tritonml tune: error: ") and err.count("\n") == 1
    assert message in err
    assert not isolated.exists()


def test_the_default_is_the_benchmark_suite(isolated, capsys):
    assert cli.main(["tune", "--target", "A100"]) == 0
    count = sum(len(item.dtypes) for item in suite.ITEMS)
    assert f"{count} problems" in capsys.readouterr().out
    keys = {tuple(sorted(k.items())) for k, _ in stored(isolated)}
    assert len(keys) == len(shipped.read(shipped.path_for("A100"))["entries"])


def test_parse_shapes():
    assert tuning.parse_shapes("4096x4096:0, 1x1048576:1,64x64x64:0+2,1024:all,8x9") == [
        ((4096, 4096), (0,)), ((1, 1048576), (1,)), ((64, 64, 64), (0, 2)), ((1024,), None),
        ((8, 9), (1,))]
    # Negative axes count from the end, as torch's do.
    assert tuning.parse_shapes("8x9:-1,8x9x3:-3+2") == [((8, 9), (1,)), ((8, 9, 3), (0, 2))]


def test_tune_help_is_plain_text_and_names_every_option():
    parser = cli.build_parser()
    tune = next(action for action in parser._subparsers._group_actions).choices["tune"]
    text = tune.format_help()
    assert "`" not in text and tune.description
    for option in ("--ops", "--shapes", "--dtypes", "--target", "--write-table", "--show", "--clear"):
        assert option in text
