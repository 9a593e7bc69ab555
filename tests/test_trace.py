"""Reading ray.timeline(): task spans per worker, and how busy the workers were."""

import pytest

from labkit import trace


def _event(cat: str, worker: str, ts_us: float, dur_us: float, task_id: str = "t") -> dict:
    return {
        "cat": cat,
        "name": cat,
        "pid": "10.0.0.1",
        "tid": f"worker:{worker}",
        "ts": ts_us,
        "dur": dur_us,
        "ph": "X",
        "args": {"task_id": task_id},
    }


EVENTS = [
    _event("task::chunk", "bbbbbbbbbb", 2_000_000, 1_000_000, "b1"),
    _event("task:execute", "bbbbbbbbbb", 2_000_100, 900_000),  # a phase: not a task
    _event("task::chunk", "aaaaaaaaaa", 1_000_000, 3_000_000, "a1"),
    _event("task::other", "aaaaaaaaaa", 4_000_000, 500_000, "a2"),
    {"cat": "submit_task", "ph": "X", "ts": 0, "dur": 5, "tid": "driver"},
    {"name": "process_name", "ph": "M", "pid": 1},
]


def test_task_spans_keep_whole_tasks_with_times_from_the_first_start():
    spans = trace.task_spans(EVENTS)
    assert list(spans["task_id"]) == ["a1", "b1", "a2"]  # by start
    assert list(spans["start_s"]) == [0.0, 1.0, 3.0]
    assert list(spans["dur_s"]) == [3.0, 1.0, 0.5]
    assert list(spans["worker"]) == ["w0 aaaaaaaa", "w1 bbbbbbbb", "w0 aaaaaaaa"]
    assert set(spans["node"]) == {"10.0.0.1"}
    assert list(trace.task_spans(EVENTS, names=["other"])["task_id"]) == ["a2"]
    assert trace.task_spans([]).empty


def test_busy_fraction_counts_slots_over_the_window():
    spans = trace.task_spans(EVENTS)  # 4.5 task-seconds over 0..3.5 s
    assert trace.busy_fraction(spans, 2) == pytest.approx(4.5 / 7.0)
    assert trace.busy_fraction(spans, 1, start_s=0.0, end_s=1.0) == pytest.approx(1.0)
    assert trace.busy_fraction(spans, 2, start_s=1.0, end_s=2.0) == pytest.approx(
        1.0
    )  # both workers busy
    assert trace.busy_fraction(spans, 2, start_s=3.5, end_s=5.0) == 0.0
    with pytest.raises(ValueError, match="n_slots"):
        trace.busy_fraction(spans, 0)
    with pytest.raises(ValueError, match="empty"):
        trace.busy_fraction(spans, 1, start_s=2.0, end_s=2.0)


def test_gantt_rows_are_what_plots_gantt_draws():
    rows = trace.gantt_rows(trace.task_spans(EVENTS))
    assert rows[0] == ("w0 aaaaaaaa", 0.0, 3.0, "chunk")
    from labkit import plots

    plots.gantt(rows, title="t")


def test_stages_measure_windows_and_read_the_timeline_inside_them():
    stages = trace.Stages()
    clock = iter([101.0, 103.0, 103.0, 107.0])
    stages._clock = lambda: next(clock)
    stages.origin = 100.0
    with stages("data"):
        pass
    with stages("train"):
        pass
    assert stages.seconds() == {"data": 2.0, "train": 4.0}
    assert stages.windows == {"data": (1.0, 3.0), "train": (3.0, 7.0)}
    events = [  # origin 100 s: one task 1.5-2.5 s, another 3-7 s
        _event("task::a", "w1", 101_500_000, 1_000_000, "a"),
        _event("task::b", "w2", 103_000_000, 4_000_000, "b"),
    ]
    spans = trace.task_spans(events, origin=100.0)
    assert list(spans["start_s"]) == [1.5, 3.0]
    table = stages.table(spans, n_slots=2)
    assert table.loc["data", "task_s"] == pytest.approx(1.0)
    assert table.loc["data", "busy"] == pytest.approx(0.25)
    assert table.loc["train", "busy"] == pytest.approx(0.5)
    assert set(stages.worker_cpu_s) == {"data", "train"}  # measured for every stage
    stages.worker_cpu_s["train"] = 6.0  # as if Ray's workers had used 6 CPU-seconds
    assert stages.table(spans, n_slots=2).loc["train", "worker_busy"] == pytest.approx(0.75)


def test_stages_count_the_cpu_of_work_the_timeline_does_not_list():
    """Ray worker processes busy in a stage show in worker_cpu_s, with no task in the timeline
    (as Serve's replicas answering HTTP requests): one that outlives the stage, and one that
    ends inside it (as a Tune trial or Train's worker group does)."""
    import subprocess
    import sys
    import time

    spin = "import time\nwhile time.process_time() < 1.2: pass\n"  # CPU seconds, not wall
    stages = trace.Stages()
    with stages("serve"):
        lasting = subprocess.Popen(
            [sys.executable, "-c", spin + "time.sleep(60)", "default_worker.py"]
        )
        ending = subprocess.Popen([sys.executable, "-c", spin, "default_worker.py"])
        ending.wait(timeout=60)
        time.sleep(1.2)  # past two of the stage's samples
    lasting.kill()
    lasting.wait()
    table = stages.table(trace.task_spans([], origin=stages.origin), n_slots=1)
    assert table.loc["serve", "busy"] == 0.0  # nothing in the timeline
    # 1.2 CPU-s each; the one that ended counts up to its last sample, at most 0.5 s before
    assert table.loc["serve", "worker_cpu_s"] >= 1.7


STATS = """Operator 0 ReadFiles:

Operator 1 ListFiles: 1 tasks executed, 2 blocks produced in 1.53s
* Remote wall time: 2.28ms min, 1.52s max, 760.02ms mean, 1.52s total
* Remote cpu time: 765.24us min, 66.86ms max, 33.81ms mean, 67.62ms total
* Output num rows per block: 8 min, 8 max, 8 mean, 8 total

Operator 2 ReadFilesParquetV2: 2 tasks executed, 2 blocks produced in 0.53s
* Remote wall time: 316.5ms min, 477.41ms max, 396.96ms mean, 793.91ms total
* Remote cpu time: 100.63ms min, 669.98ms max, 385.3ms mean, 770.61ms total

Dataset throughput:
	* Ray Data throughput: 96745.77 rows/s
"""


def test_data_ops_reads_dataset_stats():
    ops = trace.data_ops(STATS)
    assert set(ops) == {"ListFiles", "ReadFilesParquetV2"}
    lf = ops["ListFiles"]
    assert lf["tasks"] == 1 and lf["wall_s"] == pytest.approx(1.53)
    assert lf["task_wall_s"] == pytest.approx(1.52) and lf["cpu_s"] == pytest.approx(0.06762)
    assert ops["ReadFilesParquetV2"]["cpu_s"] == pytest.approx(0.77061)
    assert trace.data_ops("no operators here") == {}


def test_task_spans_keep_one_jobs_tasks():
    """The timeline lists every job the cluster ran; a task's id ends with its job's id."""
    events = [
        _event("task::mine", "w1", 1_000_000, 1_000_000, "aa" * 20 + "01000000"),
        _event("task::theirs", "w2", 1_000_000, 1_000_000, "bb" * 20 + "02000000"),
    ]
    assert list(trace.task_spans(events)["task"]) == ["mine", "theirs"]
    assert list(trace.task_spans(events, job="01000000")["task"]) == ["mine"]


@pytest.mark.ray
def test_stages_per_node_count_the_workers_under_each_raylet():
    """With per_node=True, a counter actor per node counts that node's Ray workers: a task's CPU
    seconds show in the stage that ran it, and none in a stage where nothing ran."""
    import time

    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote
        def spin(cpu_s: float) -> None:
            while time.process_time() < cpu_s:
                pass

        stages = trace.Stages(per_node=True)
        assert len(stages.nodes) == 1
        with stages("work"):
            ray.get(spin.remote(1.0))
        with stages("idle"):
            time.sleep(1.0)
        assert stages.worker_cpu_s["work"] >= 0.8
        assert stages.worker_cpu_s["idle"] < 0.3
    finally:
        ray.shutdown()
