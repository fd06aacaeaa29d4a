"""``tritonml bench`` on tiny selections of the suite: its files, its byte counts against counts
made here from shapes, its modeled time against the model's formula written out here, the "not
available" path of a missing DSL op, the GPU timing path in its CPU dry run, and its errors."""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from collections import Counter

import pytest
import torch

import tritonml  # first: chooses interpreted Triton on a machine without CUDA
import tritonml_cli
from tritonml import cli
from tritonml.bench import cases, run
from tests.timing import limit

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="bytes are counted in Triton's "
                                                                 "interpreter")

# The H100 facts the model is documented with (autotune/devices.py), written out independently.
H100_BYTES_PER_S, H100_SMS, LAUNCH_S = 3.0e12, 132, 4e-6


def _bench(tmp_path, *options):
    directory = tmp_path / "out"
    code = cli.main(["bench", "--quick", "--output", str(directory), *options])
    assert code == 0
    with open(directory / "bench.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(directory / "bench.json") as f:
        document = json.load(f)
    return directory, rows, document


def _modeled_seconds(launches) -> float:
    """bytes / (bandwidth x min(1, programs / SMs)) + overhead, per launch, summed."""
    return sum(launch["bytes"] / (H100_BYTES_PER_S * min(1.0, (launch["programs"] or H100_SMS)
                                                          / H100_SMS)) + LAUNCH_S
               for launch in launches)


def test_bench_writes_csv_json_png_with_exact_bytes_and_the_modeled_time(tmp_path):
    directory, rows, document = _bench(tmp_path, "--cases", "scan-square-last,reduce-rows",
                                       "--dtypes", "float32,float16")
    assert {p.name for p in directory.iterdir()} >= {"bench.csv", "bench.json", "bench.md",
                                                     "bench_bytes.png", "bench_modeled.png"}
    assert [(r["entry"], r["dtype"]) for r in rows] == [
        ("scan-square-last", "float32"), ("scan-square-last", "float16"),
        ("reduce-rows", "float32"), ("reduce-rows", "float16")]
    by_row = {(r["entry"], r["dtype"]): r for r in document["rows"]}
    for r in rows:
        rows_, cols = (int(n) for n in r["shape"].split("x"))
        itemsize = {"float32": 4, "float16": 2}[r["dtype"]]
        # contiguous scan: read x, write out; reduction over rows: read x, write one per row
        ideal = (2 * rows_ * cols * itemsize if r["entry"].startswith("scan")
                 else rows_ * cols * itemsize + rows_ * itemsize)
        assert int(r["ideal_bytes"]) == ideal
        # both regimes are known to move exactly the ideal bytes in one launch
        assert int(r["bytes_moved"]) == ideal and float(r["bytes_ratio"]) == 1.0
        assert r["launches"] == "1" and r["target_bytes"] == "pass"
        launches = by_row[(r["entry"], r["dtype"])]["launch_detail"]
        assert sum(launch["bytes"] for launch in launches) == ideal
        modeled = _modeled_seconds(launches)
        assert float(r["modeled_us"]) == pytest.approx(modeled * 1e6, rel=1e-5)
        ideal_seconds = ideal / H100_BYTES_PER_S + LAUNCH_S
        assert float(r["modeled_ratio"]) == pytest.approx(modeled / ideal_seconds, rel=1e-5)
        assert r["target_modeled_time"] == ("pass" if modeled <= 1.25 * ideal_seconds else "miss")
        assert float(r["tritonml_error"]) <= {"float32": 1e-6, "float16": 1e-3}[r["dtype"]]
        assert int(r["load_bits"]) == 128 and int(r["spill_bytes"]) == 0  # sm_90, compiled
    assert "modeled" in (directory / "bench.md").read_text()


def test_a_missing_dsl_op_is_reported_not_available(tmp_path, monkeypatch):
    monkeypatch.delattr(tritonml, "linear_recurrence", raising=False)
    _, rows, _ = _bench(tmp_path, "--cases", "linear-recurrence", "--dtypes", "float32",
                        "--no-compile", "--no-plots")
    assert [(r["entry"], r["op"], r["status"]) for r in rows] == [
        ("linear-recurrence", "linear_recurrence", "not available in this build")]
    assert rows[0]["bytes_moved"] == ""


def test_the_recurrence_entry_calls_tritonml_linear_recurrence_when_present(tmp_path, monkeypatch):
    calls = []

    def linear_recurrence(gates, tokens, axis, *, reverse=False, initial=None):
        calls.append((gates.shape, tokens.shape, axis))
        # a stand-in of this test only, one step at a time along the last axis
        state = torch.zeros(gates.shape[:-1], dtype=torch.float64)
        steps = []
        for g, t in zip(gates.double().unbind(-1), tokens.double().unbind(-1)):
            state = g * state + t
            steps.append(state)
        return torch.stack(steps, -1).to(tokens.dtype)

    monkeypatch.setattr(tritonml, "linear_recurrence", linear_recurrence, raising=False)
    _, rows, _ = _bench(tmp_path, "--cases", "linear-recurrence", "--dtypes", "float32",
                        "--no-compile", "--no-plots")
    (row,) = rows
    rows_, cols = cases.ENTRIES["linear-recurrence"].quick_shape
    assert row["status"] == "ok" and calls[0] == ((rows_, cols), (rows_, cols), 1)
    assert int(row["ideal_bytes"]) == 3 * rows_ * cols * 4  # gates, tokens read; output written
    assert float(row["tritonml_error"]) < 1e-3


def test_the_gpu_timing_path_runs_as_a_cpu_dry_run(tmp_path):
    directory, rows, document = _bench(tmp_path, "--cases", "scan-middle-axis", "--dtypes",
                                       "float32", "--no-compile", "--dry-run-timing")
    (row,) = rows
    assert "meaningless" in row["timing"]
    for who in ("tritonml", "eager", "compile", "copy"):
        assert float(row[f"{who}_ms"]) > 0
    ideal = 2 * math.prod(int(n) for n in row["timed_shape"].split("x")) * 4
    assert float(row["tritonml_gbps"]) == pytest.approx(ideal / float(row["tritonml_ms"]) / 1e6,
                                                        rel=1e-4)
    assert float(row["eager_error"]) <= 1e-6 and float(row["compile_error"]) <= 1e-6
    # the middle axis is not the last: faster-than-eager is judged (meaninglessly, on the CPU)
    assert row["target_faster_than_eager"] in ("pass", "miss")
    assert (directory / "bench_gbps.png").stat().st_size > 0
    # each timed row was also written as it was timed (what a run cut short keeps)
    (progress,) = [json.loads(line) for line in
                   (directory / run.PROGRESS_FILE).read_text().splitlines()]
    (written,) = document["rows"]
    assert progress["entry"] == "scan-middle-axis"
    assert progress["tritonml_ms"] == written["tritonml_ms"]


def test_counting_in_a_child_process_matches_counting_here(tmp_path):
    """A GPU process counts bytes in an interpreting child: the same rows as counting here."""
    args = cli.build_parser().parse_args(["bench", "--quick", "--cases", "reduce-all", "--dtypes",
                                          "int8", "--no-compile"])
    here = run.count_rows(run.work_items(args), args)
    child = run.count_in_child(args)
    keys = ("entry", "op", "dtype", "shape", "bytes_moved", "launches", "programs", "ideal_bytes")
    assert [{k: r[k] for k in keys} for r in child] == [{k: r[k] for k in keys} for r in here]
    assert here[0]["ideal_bytes"] == 2 ** 16 + 1  # int8 input, one int8 output


@pytest.mark.parametrize("options, message", [
    (["--ops", "cumsum"], "--ops: unknown cumsum"),
    (["--dtypes", "float8"], "--dtypes: unknown float8"),
    (["--cases", "scan-everything"], "--cases: unknown scan-everything"),
    (["--target", "V100"], "--target: unknown target 'V100'"),
    (["--cases", "scan-one-row", "--dtypes", "int8"], "holds no entry"),
])
def test_bad_options_fail_clearly_before_running(tmp_path, capsys, options, message):
    directory = tmp_path / "out"
    assert cli.main(["bench", "--output", str(directory), *options]) == 2
    assert message in capsys.readouterr().err
    assert not directory.exists()


def test_every_suite_entry_runs_its_ops_on_its_dtypes():
    """The suite's promises: each group, the twelve reduce functions, int8 for reductions."""
    assert {e.group for e in cases.SUITE} == {"scan", "reduce", "recurrence", "segment",
                                              "padded", "scatter"}
    functions = cases.ENTRIES["reduce-functions"].ops
    assert sorted(functions) == sorted(tritonml.ReduceFunction.__members__)
    for entry in cases.SUITE:
        assert math.prod(entry.quick_shape) <= math.prod(entry.shape)
        if entry.group == "reduce":
            assert torch.int8 in entry.dtypes or entry.name == "reduce-functions"
    assert os.path.basename(cases.__file__) == "cases.py"


@pytest.mark.parametrize("make, message", [
    (lambda d: d.write_text("x"), "--output {}: is a file, not a folder"),
    (lambda d: (d.mkdir(), (d / "bench.json").mkdir()), "bench.json in it is a folder"),
])
def test_a_bad_output_fails_in_one_line_before_anything_runs(tmp_path, capsys, monkeypatch,
                                                             make, message):
    """The output folder is checked first: no case is counted, then a traceback at the end."""
    directory = tmp_path / "out"
    make(directory)
    monkeypatch.setattr(run, "count_rows", lambda *a: pytest.fail("a case ran"))
    monkeypatch.setattr(run, "work_items", lambda *a: pytest.fail("options checked late"))
    assert cli.main(["bench", "--quick", "--cases", "reduce-rows", "--output", str(directory)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tritonml bench: error: --output ") and err.count("\n") == 1
    assert message.format(directory) in err


def test_a_cpu_run_shows_no_empty_timing_bar(tmp_path, capsys):
    """Nothing is timed on a CPU without --dry-run-timing: no 'timing: 0case' bar."""
    _bench(tmp_path, "--cases", "reduce-rows", "--dtypes", "float32", "--no-compile",
           "--no-plots")
    err = capsys.readouterr().err
    assert "tritonml bench:" in err          # the counting bar is there
    assert "timing" not in err


# An environment without matplotlib (tritonml installed without the ``bench`` extra): the import
# system answers as it does where matplotlib was never installed (no module of that name).
WITHOUT_MATPLOTLIB = """
import sys
for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
    del sys.modules[name]
sys.modules["matplotlib"] = None
import tritonml_cli
sys.exit(tritonml_cli.main(sys.argv[1:]))
"""


def test_bench_without_matplotlib_writes_the_tables_and_says_so_in_one_line(tmp_path):
    """No traceback after the work: plots are turned off first, in one line naming the extra."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    directory = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MATPLOTLIB, "bench", "--quick", "--cases", "reduce-rows",
         "--dtypes", "float32", "--no-compile", "--output", str(directory)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=limit(300))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert "No module named" not in done.stderr
    lines = done.stderr.replace("\r", "\n").splitlines()
    # The notice comes before any work (the counting bar follows it), and is the only mention.
    assert "matplotlib is not installed" in lines[0] and "pip install 'tritonml[bench]'" in lines[0]
    assert sum("tritonml[bench]" in line for line in lines) == 1, lines
    assert sorted(p.name for p in directory.iterdir()) == ["bench.csv", "bench.json", "bench.md"]
    with open(directory / "bench.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    assert (row["entry"], row["dtype"], row["status"]) == ("reduce-rows", "float32", "ok")
    assert done.stdout == (directory / "bench.md").read_text()


@pytest.mark.parametrize("options, notice", [([], True), (["--no-plots"], False)])
def test_missing_matplotlib_turns_the_plots_off_before_anything_runs(tmp_path, capsys,
                                                                     monkeypatch, options, notice):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    args = cli.build_parser().parse_args(["bench", "--output", str(tmp_path / "out"), *options])
    args.check(args)
    assert args.no_plots
    err = capsys.readouterr().err
    assert err.count("\n") == int(notice) and ("tritonml[bench]" in err) == notice


def test_bench_help_names_the_extra_that_brings_the_plots(capsys):
    with pytest.raises(SystemExit):
        tritonml_cli.main(["bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "pip install 'tritonml[bench]'" in help_text
    assert help_text.count("matplotlib") >= 2   # the description and --no-plots


@pytest.mark.source_tree
def test_readme_names_the_extra_that_brings_the_plots():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "README.md")) as f:
        assert "pip install 'tritonml[bench]'" in f.read()


def _suite_rows() -> list:
    """A measured row for every (entry, op, dtype) of the suite, each with its own bytes and
    modeled ratios (tritonml's just above 1, the padded baselines 10 to 30 x) and timings."""
    rows = []
    for i, (entry, op, dtype) in enumerate((e, o, d) for e in cases.SUITE for o in e.ops
                                           for d in e.dtypes):
        padded = entry.group == "padded"
        rows.append({"status": "ok", "entry": entry.name, "group": entry.group, "op": op,
                     "dtype": cases.dtype_text(dtype),
                     "bytes_ratio": (10 if padded else 1) + i / 1000,
                     "modeled_ratio": (20 if padded else 1.001) + i / 1000,
                     "ideal_bytes_timed": 2 ** (16 + i % 8), "timing": "synthetic",
                     "tritonml_gbps": 100.0 + i, "eager_gbps": 50.0 + i, "compile_gbps": 70.0 + i,
                     "copy_gbps": 300.0})
    return rows


def _figures(tmp_path, monkeypatch, rows) -> list:
    """plots(rows): each figure saved, as (figure, its panels, dpi); the panels are the visible
    axes, top to bottom."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from tritonml.bench import output

    saved = []
    real_savefig = Figure.savefig

    def savefig(fig, path, *args, **kwargs):
        saved.append((os.path.basename(path), fig, kwargs.get("dpi", fig.dpi)))
        return real_savefig(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    paths = output.plots(str(tmp_path), rows, "H100")
    assert [os.path.basename(p) for p in paths] == [name for name, _, _ in saved]
    return saved


def _panel_titles(fig) -> list:
    """The first word of each visible panel's title, top to bottom."""
    return [" ".join(ax.get_title(loc="left").split()[:1]).rstrip(",") for ax in fig.axes
            if ax.get_visible()]


def _rendered(fig, dpi):
    """The renderer the PNG was drawn with (plots closed the figure's own canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def test_plot_labels_lie_inside_the_png(tmp_path, monkeypatch):
    """Every text of every figure (tick labels, titles, the legend), measured by matplotlib's
    renderer at the dpi the PNG is saved at, lies within the figure (long labels used to lose
    their first letters), and is at least 7 points: the PNGs are 880 px wide, the width README.md
    shows them at, and are read there unscaled."""
    from matplotlib.text import Text

    saved = _figures(tmp_path, monkeypatch, _suite_rows())
    assert [name for name, _, _ in saved] == ["bench_bytes.png", "bench_modeled.png",
                                              "bench_gbps.png"]
    for name, fig, dpi in saved:
        renderer = _rendered(fig, dpi)
        assert fig.bbox.width == 880
        # Tick labels are Text objects for ticks outside the view too, which are not drawn.
        undrawn = {id(t) for ax in fig.axes for axis, (low, high) in (
            (ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim())))
            for tick in axis.get_major_ticks() + axis.get_minor_ticks()
            if not low <= tick.get_loc() <= high for t in (tick.label1, tick.label2)}
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()
                 and id(t) not in undrawn]
        assert len(texts) > 20
        for text in texts:
            box = text.get_window_extent(renderer)
            assert 0 <= box.x0 and box.x1 <= fig.bbox.width, (name, text.get_text(), box)
            assert 0 <= box.y0 and box.y1 <= fig.bbox.height, (name, text.get_text(), box)
            assert text.get_fontsize() >= 7, (name, text.get_text())


def test_the_ratio_figures_show_each_family_with_the_padded_rows_as_baselines(tmp_path,
                                                                              monkeypatch):
    """One panel per family; one labelled line per entry (and op, where it has several); every
    tritonml row drawn once at its value; each padded row a hollow marker on its segment peer's
    line, not a line of its own, on a log axis; the other panels zoomed near 1 (a linear axis
    reaching the baselines' 20 x left the tritonml rows as slivers); a legend naming the dtypes,
    the ideal, the target and the baseline."""
    rows = _suite_rows()
    by_name = {name: (fig, dpi) for name, fig, dpi in _figures(tmp_path, monkeypatch, rows)}
    ours = [r for r in rows if r["group"] != "padded"]
    padded = [r for r in rows if r["group"] == "padded"]
    # Lines, from the suite: an entry with several ops has a line per op.
    lines = sum(len(e.ops) if len(e.ops) > 1 else 1 for e in cases.SUITE if e.group != "padded")
    for name, column, bound in (("bench_bytes.png", "bytes_ratio", 1.05),
                                ("bench_modeled.png", "modeled_ratio", 1.25)):
        fig, dpi = by_name[name]
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert _panel_titles(fig) == ["cumulative_sum", "reduce", "linear_recurrence",
                                      "segment_reduce", "scatter"]
        labels = [t.get_text() for ax in panels for t in ax.get_yticklabels()]
        assert len(labels) == lines and not any("padded" in label for label in labels)
        drawn = {"tritonml": [], "baseline": []}
        for ax in panels:
            for collection in ax.collections:
                for x, y in collection.get_offsets():
                    drawn[collection.get_gid()].append((float(x), float(y), ax))
        assert Counter(round(x, 9) for x, _, _ in drawn["tritonml"]) == Counter(
            round(r[column], 9) for r in ours)
        assert sorted(round(x, 9) for x, _, _ in drawn["baseline"]) == sorted(
            round(r[column], 9) for r in padded)
        at = {round(x, 9): (y, ax) for x, y, ax in drawn["tritonml"]}
        for r in padded:
            (peer,) = [o for o in ours if (o["entry"], o["op"]) == (
                "segment" + r["entry"][len("padded"):], r["op"])]
            (y, ax), = [(y, ax) for x, y, ax in drawn["baseline"] if round(x, 9) == round(
                r[column], 9)]
            assert at[round(peer[column], 9)] == (y, ax)   # on its peer's line, in its panel
        for ax in panels:
            if ax is drawn["baseline"][0][2]:
                assert ax.get_xscale() == "log"
            else:
                assert ax.get_xscale() == "linear" and ax.get_xlim()[1] < bound + 0.2
        (legend,) = fig.legends
        entries = [t.get_text() for t in legend.get_texts()]
        assert entries[:5] == ["float32", "float16", "bfloat16", "int32", "int8"]
        assert "ideal (1)" in entries and f"target {bound:g}" in entries
        assert any(e.startswith("padded to the longest segment") for e in entries)
    fig, _ = by_name["bench_gbps.png"]
    assert _panel_titles(fig) == ["cumulative_sum", "reduce", "linear_recurrence",
                                  "segment_reduce", "scatter"]
    (legend,) = fig.legends
    entries = [t.get_text() for t in legend.get_texts()]
    assert entries[:3] == ["tritonml", "torch eager", "torch.compile"]
    assert entries[-1].startswith("Tensor.copy_")


@pytest.mark.parametrize("regime", ["chunked", "rows"])
def test_rereads_are_counted_apart_from_first_touches(regime):
    """The chunked scan reads each chunk twice (fold, then scan): the trace counts the second read
    as a re-read, exactly the input's bytes, and nothing else; a tiled scan re-reads nothing."""
    from tritonml_autotune.configs import ScanConfig
    from tritonml.bench.memtrace import trace_memory
    from tritonml.launchers.scan import SUM, cumulative_scan

    x = torch.arange(3 * 1000, dtype=torch.float32).reshape(3, 1000)
    out = torch.empty_like(x)
    config = (ScanConfig("chunked", 64, 1, chunk_tiles=2, window=4) if regime == "chunked"
              else ScanConfig("rows", 256, 1))
    with trace_memory({"input": x, "output": out}) as trace:
        cumulative_scan(x, 1, SUM, out=out, config=config)
    input_bytes = x.numel() * x.element_size()
    assert trace.by_region("input")["load"] == input_bytes * (2 if regime == "chunked" else 1)
    assert trace.reread_bytes == (input_bytes if regime == "chunked" else 0)
    assert trace.by_region("output")["store"] == input_bytes
