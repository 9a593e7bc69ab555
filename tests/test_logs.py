"""labkit.runtime.logs: expected errors reduced to one line; teardown noise dropped."""

import logging
import os
import sys

import pytest

from labkit.runtime import logs


def test_expected_errors_hide_fd_and_python_output_and_keep_the_teaching_line(capfd):
    with logs.expected_errors("a worker crash, on purpose") as seen:
        os.write(2, b"[2026 E 1] core_worker.cc:1 some C++ chatter\n")
        os.write(1, b"(raylet) more chatter\n")
        print("Traceback (most recent call last):", file=sys.stderr)
        print("\x1b[33m(raylet)\x1b[0m ray.exceptions.WorkerCrashedError: The worker died")
        logging.getLogger("ray.train").error("a logger line")
    out = capfd.readouterr()
    assert "chatter" not in out.out + out.err and "a logger line" not in out.out + out.err
    assert len(seen.lines) == 4
    assert seen.teaching_line == "(raylet) ray.exceptions.WorkerCrashedError: The worker died"
    assert "expected: a worker crash, on purpose; 4 lines" in out.out
    assert "WorkerCrashedError" in out.out
    assert logging.getLogger("ray.train").level != logging.CRITICAL  # restored


def test_expected_errors_never_hide_an_exception(capfd):
    with pytest.raises(ValueError, match="a real bug"):
        with logs.expected_errors("nothing"):
            raise ValueError("a real bug")
    os.write(2, b"visible again\n")
    assert "visible again" in capfd.readouterr().err


def test_nothing_hidden_prints_nothing():
    assert logs.Expected("a drill").summary() == ""  # nothing hidden, nothing printed


def test_an_autoscaler_event_repeated_at_once_prints_once_and_again_later():
    repeats = logs.RepeatFilter(window_s=10)
    burst = ["x :event_summary:Resized to 0 CPUs.", "x :event_summary:Adding 3 node(s)."]
    assert repeats(burst, now=0.0) == burst
    assert repeats(burst, now=0.1) == [] and repeats(burst, now=0.2) == []
    assert repeats(["y :event_summary:Resized to 3 CPUs."], now=5.0) == [
        "y :event_summary:Resized to 3 CPUs."
    ]
    assert repeats(burst[:1], now=30.0) == burst[:1]  # the same event, a new decision


def test_rays_own_chatter_is_dropped_and_the_learners_lines_are_kept():
    lines = [
        "keep me",
        "[E core_worker.cc:2465: Actor with class name: 'PreemptionWatcher' and ID: 'a3' has "
        "constructor arguments in the object store and max_restarts > 0. If the arguments",
        "Progress bars disabled. To enable, set `ray.data.DataContext...`",
        "✔️  Dataset train_0356_1 execution finished in 0.30 seconds",
        "/x/execution_options.py:436: RayDeprecationWarning: `ExecutionOptions.exclude_resources` "
        "is deprecated and will be removed",
        "  self.exclude_resources = exclude_resources",
        "Exception ignored in: <function WeakSet.__init__.<locals>._remove at 0x7f07>",
        "Traceback (most recent call last):",
        '  File "/x/ray/_private/worker.py", line 1063, in sigterm_handler',
        "SystemExit: 1",
        "Reporting training result 1: TrainingReport(checkpoint=Checkpoint(...), metrics={})",
        "Checkpoint successfully created at: Checkpoint(filesystem=local, path=/x)",
        "[W1204 13:13:48.529347649 socket.cpp:207] [c10d] The hostname of the client socket "
        "cannot be retrieved. err=-3",
        "and me",
    ]
    assert logs.drop_noise(lines) == ["keep me", "and me"]


def test_the_teaching_line_prefers_an_error_then_a_death_and_skips_info_logs():
    seen = logs.Expected("node2 is killed")
    seen.lines = [
        "[2026-12-01 03:43:46,378 I 9506 9506] (raylet) node_manager.cc:1477: failed to send",
        "(raylet) Raylet is terminated. Termination is unexpected.",
        "(raylet) Task step failed. There are 3 retries remaining",
    ]
    assert seen.teaching_line == "(raylet) Raylet is terminated. Termination is unexpected."
    seen.lines.append("RuntimeError: gloo read error")
    assert seen.teaching_line == "RuntimeError: gloo read error"


def test_ray_error_messages_are_filtered_too(capsys):
    from ray._private import worker

    from labkit.runtime import logs

    logs.filter_worker_logs()
    logs.filter_worker_logs()  # twice: wrapped once
    noise = (
        "Task ServeController.graceful_shutdown failed. There are infinite retries remaining, "
        "so the task will be retried."
    )
    worker.print_to_stdstream(
        {"lines": [noise, "a real error"], "pid": "raylet", "is_err": False}, False
    )
    out = capsys.readouterr()
    text = out.out + out.err
    assert "a real error" in text and "graceful_shutdown" not in text


def test_tunes_sigterm_block_with_its_blank_line_is_dropped():
    """As 08 printed it in make test (a trial's actor stopped by ASHA): the frames of the
    signal handler come after an empty line."""
    lines = [
        "Exception ignored in: <function WeakSet.__init__.<locals>._remove at 0x7f3312a12520>",
        "Traceback (most recent call last):",
        '  File "/py/lib/python3.11/_weakrefset.py", line 39, in _remove',
        "    def _remove(item, selfref=ref(self)):",
        "",
        '  File "/x/ray/_private/worker.py", line 1063, in sigterm_handler',
        "    raise_sys_exit_with_custom_error_message(",
        '  File "python/ray/_raylet.pyx", line 712, in ray._raylet.raise_sys_exit_with_custom_',
        "SystemExit: 1",
        "after",
    ]
    assert logs.drop_noise(lines) == ["after"]


def test_a_noisy_block_that_ends_otherwise_is_kept_whole():
    lines = [
        "Exception ignored in: <function WeakSet.__init__.<locals>._remove at 0x7f07>",
        "Traceback (most recent call last):",
        '  File "/x/app.py", line 3, in _remove',
        "KeyError: 'a real error'",
        "after",
    ]
    assert logs.drop_noise(lines) == lines


def test_the_worker_start_warning_is_dropped_only_while_a_lesson_expects_it(monkeypatch):
    line = (
        "WARNING: 8 PYTHON worker processes have been started on node: 2f00c1 with address: "
        "192.0.2.2, which is 4x the maximum expected startup concurrency (2). This could be"
    )
    monkeypatch.setattr(logs, "_worker_starts_until", 0.0)
    assert logs.drop_noise([line]) == [line]  # a clue, by default
    logs.expect_worker_starts(30)
    assert logs.drop_noise([line]) == []
