import json
import math
import time

import numpy as np
import pytest

from labkit import measure
from labkit.measure import Timing, compare, read_records, record, speedup, timeit


def test_timeit_warms_up_then_repeats():
    calls = []
    t = timeit(lambda: calls.append(1), repeats=4, warmup=2, label="noop")
    assert len(calls) == 6
    assert len(t.runs) == 4 and t.warmup == 2 and t.label == "noop"
    assert t.min <= t.median <= t.max
    assert "noop" in str(t)


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}])
def test_timeit_rejects_bad_counts(kwargs):
    with pytest.raises(ValueError):
        timeit(lambda: None, **kwargs)


def test_speedup_and_compare_are_ratios_of_medians():
    base = Timing("serial", (2.0, 2.0, 2.0), 1)
    fast = Timing("ray", (0.5, 0.5, 0.6), 1)
    assert speedup(base, fast) == pytest.approx(4.0)
    assert compare(base, fast) == {"serial": 1.0, "ray": pytest.approx(4.0)}
    assert fast.rate(100) == pytest.approx(200.0)
    with pytest.raises(ValueError):
        speedup(base, Timing("zero", (0.0,), 0))


def test_record_appends_json_lines_with_context(fresh_params, results_dir):
    from labkit.params import setup

    setup("00_welcome_and_setup", SIZE="smoke")
    rec = record("welcome.tasks_per_s", 123.4, "tasks/s", n_tasks=10, timing=Timing("t", (1.0,), 0))
    record("welcome.ratio", 2, "x")
    path = results_dir / "00_welcome_and_setup.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["metric"] for r in lines] == ["welcome.tasks_per_s", "welcome.ratio"]
    first = lines[0]
    assert first == rec
    assert first["size"] == "smoke" and first["unit"] == "tasks/s"
    assert first["context"]["n_tasks"] == 10
    assert first["context"]["timing"]["median"] == 1.0
    assert first["machine"]["ray"] and first["machine"]["cpus"] >= 1
    assert read_records(results_dir) == lines
    assert measure.records_path() == path


@pytest.mark.parametrize(
    "metric, value, unit",
    [
        ("tasks_per_s", 1.0, "x"),
        ("Tasks.x", 1.0, "x"),
        ("tasks.x", math.nan, "x"),
        ("tasks.x", "fast", "x"),
        ("tasks.x", True, "x"),
        ("tasks.x", 1.0, ""),
    ],
)
def test_record_rejects_bad_input(fresh_params, results_dir, metric, value, unit):
    from labkit.params import setup

    setup("00_welcome_and_setup")
    with pytest.raises(ValueError):
        record(metric, value, unit)
    assert not results_dir.exists()


def test_record_needs_setup(fresh_params):
    with pytest.raises(RuntimeError):
        record("a.b", 1.0, "x")


def test_record_and_save_echo_nothing_in_a_notebook(results_dir, fresh_params):
    """A cell that ends with labkit.record(...) or plots.save(...) shows no output."""
    import matplotlib

    matplotlib.use("Agg")
    from labkit import plots

    fresh_params.setup("00_quiet")
    rec = record("quiet.value", 1.0, "x")
    assert rec["metric"] == "quiet.value" and rec._ipython_display_() is None
    path = plots.save(plots.bar({"a": 1.0}, title="t", ylabel="x"), "quiet")
    assert path.is_file() and path._ipython_display_() is None


def test_stream_pass_times_the_first_batch_apart_from_the_rest():
    def batches():
        time.sleep(0.05)  # start-up before the first batch
        for _ in range(4):
            yield [0] * 10

    s = measure.stream_pass(batches, len, label="toy")
    assert (s.rows, s.first_rows) == (40, 10)
    assert 0 < s.first_s < s.total_s
    assert s.steady_rate > s.rate  # the wait counts against the whole pass only
    passes = measure.stream_passes(batches, len, repeats=3, warmup=1)
    assert len(passes) == 3
    med = measure.median_stream(passes)
    assert set(med) == {"first_s", "steady_rate", "rate", "first_share"}
    assert med["first_s"] > 0 and 0 < med["first_share"] < 1
    with pytest.raises(ValueError, match="repeats"):
        measure.stream_passes(batches, len, repeats=0)


def test_ingest_races_each_reader_and_refuses_a_short_pass():
    """Lesson 06's race as lab_data runs it: a median per reader, and a reader that delivers
    fewer rows than the data has fails, naming it, rather than looking fast."""
    from labkit import loaders

    def full():
        yield {"y": [0] * 6}
        yield ([0] * 4, [1] * 4)  # a DataLoader's (x, y) pair

    medians = measure.ingest({"a": full, "b": full}, loaders.rows_in, repeats=2, n_rows=10)
    assert list(medians) == ["a", "b"] and all(m["rate"] > 0 for m in medians.values())
    with pytest.raises(AssertionError, match=r"short: expected 12 rows a pass, got \[10, 10\]"):
        measure.ingest({"short": full}, loaders.rows_in, repeats=2, n_rows=12)


def test_stream_pass_of_an_empty_stream():
    s = measure.stream_pass(lambda: iter(()), len)
    assert s.rows == 0 and s.first_s == s.total_s


def test_windowed_rate_counts_calls_per_window():
    rate = measure.windowed_rate(
        lambda: time.sleep(0.01), 10, warmup_s=0.02, window_s=0.1, windows=2
    )
    assert 300 < rate <= 1000  # at most 100 calls/s of 10 items each
    with pytest.raises(ValueError, match="windows"):
        measure.windowed_rate(lambda: None, 1, windows=0)


@pytest.mark.parametrize("ratio, side, value", [(1.5, "yes", 1.0), (0.8, "no", 0.0)])
def test_verdict_prints_one_side_and_records_it(
    fresh_params, results_dir, capsys, ratio, side, value
):
    from labkit.params import setup

    setup("01_remote_tasks", SIZE="smoke")
    held = measure.verdict(
        "tasks.verdict_faster",
        ratio > 1,
        yes="faster: {ratio:.2f}x",
        no="not faster: {ratio:.2f}x",
        ratio=ratio,
    )
    assert bool(held) is (ratio > 1) and held == (ratio > 1)
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed == [("faster" if side == "yes" else "not faster") + f": {ratio:.2f}x"]
    (rec,) = read_records(results_dir)
    assert rec["metric"] == "tasks.verdict_faster" and rec["value"] == value
    assert rec["context"]["key"] == f"tasks.verdict_faster:{side}"
    assert rec["context"]["ratio"] == ratio and rec["context"]["sentence"] == printed[0]


def test_a_record_says_which_way_is_better(fresh_params, results_dir):
    from labkit.params import setup

    setup("01_remote_tasks", SIZE="smoke")
    assert measure.record("tasks.rate", 5.0, "tasks/s")["better"] == "higher"
    assert measure.record("tasks.wait_s", 5.0, "s")["better"] == "lower"
    assert measure.record("tasks.ratio", 5.0, "x")["better"] is None  # a ratio's unit says nothing
    assert measure.record("tasks.ratio", 5.0, "x", better="lower")["better"] == "lower"
    with pytest.raises(ValueError, match="better='up'"):
        measure.record("tasks.ratio", 5.0, "x", better="up")
    assert [r["better"] for r in read_records(results_dir)] == ["higher", "lower", None, "lower"]


def test_verdict_is_silent_as_a_cells_last_value(fresh_params, results_dir, capsys):
    """A bare labkit.verdict(...) at a cell's end printed its sentence, then echoed True."""
    from IPython.core.interactiveshell import InteractiveShell

    from labkit.params import setup

    setup("01_remote_tasks", SIZE="smoke")
    held = measure.verdict("tasks.verdict_x", True, yes="ok", no="no")
    shell = InteractiveShell.instance()
    assert shell.display_formatter.format(held) == ({}, {})
    assert shell.display_formatter.format(True) != ({}, {})  # a plain bool would show
    assert held and not measure.verdict("tasks.verdict_y", False, yes="ok", no="no")


def test_verdict_takes_a_translation_by_key_and_rejects_bad_names(
    fresh_params, results_dir, capsys, monkeypatch
):
    from labkit.params import setup

    setup("01_remote_tasks", SIZE="smoke")
    monkeypatch.setitem(measure.MESSAGES, "tasks.verdict_faster:no", "更慢: {ratio:.1f}x")
    measure.verdict("tasks.verdict_faster", False, yes="faster", no="slower", ratio=0.5)
    assert capsys.readouterr().out.strip() == "更慢: 0.5x"
    with pytest.raises(ValueError, match="verdict_"):
        measure.verdict("tasks.faster", True, yes="a", no="b")
    with pytest.raises(ValueError, match="speedup"):  # the side not taken is checked too
        measure.verdict("tasks.verdict_x", True, yes="ok", no="{speedup}x")
    with pytest.raises(ValueError, match="named fields"):
        measure.verdict("tasks.verdict_x", True, yes="{}x", no="no", ratio=2)
    with pytest.raises(ValueError, match="rename"):
        measure.verdict("tasks.verdict_x", True, yes="{key}", no="no", key=1)


def test_a_noisy_pair_is_within_noise_and_a_separated_pair_is_not(
    fresh_params, results_dir, capsys
):
    """Issue 40: a verdict on two measurements reads their repeated samples, not two scalars."""
    from labkit.params import setup

    setup("04_scheduling_and_resources", SIZE="smoke")
    templates = dict(
        yes="slower: {a:.2f} s against {b:.2f} s",
        no="not slower: {a:.2f} s against {b:.2f} s",
        within_noise="within noise: {a_range} and {b_range} over {n} repeats",
    )
    noisy = measure.versus([0.5, 0.9, 4.8], [0.4, 0.6, 5.1], unit="s")  # ranges overlap
    assert noisy.overlap and noisy.ratio == pytest.approx(0.9 / 0.6)
    held = measure.verdict("xfer.verdict_slower", noisy.ratio > 1, samples=noisy, **templates)
    assert not held
    assert capsys.readouterr().out.strip() == "within noise: 0.5-4.8 s and 0.4-5.1 s over 3 repeats"
    apart = measure.versus([2.0, 2.2, 2.1], [0.4, 0.6, 0.5], unit="s")
    assert not apart.overlap
    assert measure.verdict("xfer.verdict_slower", apart.ratio > 1, samples=apart, **templates)
    assert capsys.readouterr().out.strip() == "slower: 2.10 s against 0.50 s"
    values = [(r["value"], r["context"]["key"]) for r in read_records(results_dir)]
    assert values == [(0.5, "xfer.verdict_slower:within_noise"), (1.0, "xfer.verdict_slower:yes")]
    with pytest.raises(ValueError, match="repeated samples"):
        measure.versus([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="within_noise= template"):
        measure.verdict("xfer.verdict_slower", True, yes="a", no="b", samples=apart)


def test_repeats_against_a_fixed_bound_are_within_noise_when_they_straddle_it():
    """Issue 40: a figure judged against a claim's bound (2 ms for "about 1 ms") reads its
    repeats: on both sides of the bound, it is within noise; all on one side, it is not."""
    straddle = measure.versus([1.5, 1.8, 2.3], 2.0, unit="ms")
    assert straddle.overlap
    fields = straddle.fields()
    assert (fields["a_range"], fields["b_range"], fields["n"]) == ("1.5-2.3 ms", "2 ms", 3)
    below = measure.versus([1.2, 1.4, 1.3], 2.0, unit="ms")
    assert not below.overlap and below.ratio == pytest.approx(1.3 / 2.0)
    with pytest.raises(ValueError, match="repeated samples"):
        measure.versus([1.0], 2.0)
    assert measure.versus([1.5, 2.5], np.float64(2.0)).overlap  # a numpy figure is one figure
