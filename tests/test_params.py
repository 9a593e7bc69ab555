from pathlib import Path

import pytest

from labkit import params
from labkit.params import ParameterError, setup

BY_SIZE = {"n": (1, 10, 100)}


def test_defaults_are_what_a_learner_wants(fresh_params):
    p = setup("00_welcome_and_setup")
    assert (p.size, p.device, p.seed) == ("small", "auto", 0)
    assert p.results_dir == params.repo_root() / "runs" / "latest"
    assert p.sources["SIZE"] == "default"


def test_environment_fills_values_left_none(fresh_params, monkeypatch):
    monkeypatch.setenv("LABKIT_SIZE", "smoke")
    monkeypatch.setenv("LABKIT_DEVICE", "CPU")
    monkeypatch.setenv("LABKIT_SEED", "7")
    p = setup("01_remote_tasks", by_size=BY_SIZE)
    assert (p.size, p.device, p.seed) == ("smoke", "cpu", 7)
    assert p["n"] == 1
    assert p.is_smoke
    assert p.sources["SIZE"] == "$LABKIT_SIZE"


def test_notebook_value_beats_environment(fresh_params, monkeypatch):
    monkeypatch.setenv("LABKIT_SIZE", "smoke")
    p = setup("01_remote_tasks", SIZE="full", by_size=BY_SIZE)
    assert p.size == "full" and p["n"] == 100


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"SIZE": "huge"}, ["SIZE='huge'", "smoke, small, full"]),
        ({"DEVICE": "tpu"}, ["DEVICE='tpu'", "auto, cpu, cuda"]),
        ({"SEED": "abc"}, ["SEED='abc'", "integer"]),
        ({"SEED": -1}, ["SEED=-1"]),
        ({"SEED": True}, ["SEED=True"]),
        ({"RESULTS_DIR": " "}, ["RESULTS_DIR"]),
    ],
)
def test_bad_values_fail_with_the_valid_ones_named(fresh_params, kwargs, words):
    with pytest.raises(ParameterError) as err:
        setup("00_welcome_and_setup", **kwargs)
    for word in words:
        assert word in str(err.value)


def test_bad_environment_value_names_its_source(fresh_params, monkeypatch):
    monkeypatch.setenv("LABKIT_SIZE", "medium")
    with pytest.raises(ParameterError, match=r"LABKIT_SIZE.*smoke, small, full"):
        setup("00_welcome_and_setup")


@pytest.mark.parametrize("name", ["welcome", "0_x", "00-welcome", "00_Welcome", None])
def test_notebook_name_must_match_its_file(fresh_params, name):
    with pytest.raises(ParameterError, match="notebook name"):
        setup(name)


@pytest.mark.parametrize(
    "by_size, words",
    [
        ({"n": (1, 2)}, ["by_size['n']", "smoke, small, full", "(1, 2)"]),
        ({"n": (1, 2, 3, 4)}, ["by_size['n']", "(1, 2, 3, 4)"]),
        ({"n": 5}, ["by_size['n']", "got 5"]),
        ({"smoke": {"n": 1}, "small": {"n": 2}, "full": {"n": 3}}, ["by_size['smoke']"]),
        ([("n", (1, 2, 3))], ["by_size must map"]),
    ],
)
def test_a_setting_must_give_one_value_per_size_and_the_error_names_it(
    fresh_params, by_size, words
):
    """The old shape (a dict per SIZE) is refused too, naming the row that is not one."""
    with pytest.raises(ParameterError) as err:
        setup("00_welcome_and_setup", by_size=by_size)
    for word in words:
        assert word in str(err.value)


def test_the_old_scale_shape_is_refused_with_what_to_write(fresh_params):
    """A learner's copy from before issue 42, whose set-up cell they edited, still says scale=."""
    with pytest.raises(ParameterError, match=r"by_size=\{name: \(smoke, small, full\)\}"):
        setup("00_welcome_and_setup", scale={"smoke": {"n": 1}, "small": {"n": 2}, "full": {}})


def test_each_size_reads_its_own_column(fresh_params):
    table = {"n_rows": (1, 2, 3), "names": (["a"], ["a", "b"], ["a", "b", "c"])}
    for size, n in zip(("smoke", "small", "full"), (1, 2, 3)):
        p = setup("00_welcome_and_setup", SIZE=size, by_size=table)
        assert p["n_rows"] == n and len(p["names"]) == n
        assert f"  n_rows = {n}" in p.describe()


def test_unknown_setting_is_a_clear_key_error(fresh_params):
    p = setup("00_welcome_and_setup", by_size=BY_SIZE)
    with pytest.raises(KeyError, match="defines: n"):
        p["tasks"]


def test_paths_resolve_from_repo_root_not_cwd(fresh_params, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = setup("00_welcome_and_setup", RESULTS_DIR="runs/x")
    assert p.results_dir == Path(__file__).resolve().parents[1] / "runs" / "x"
    assert params.resolve_path(tmp_path) == tmp_path


def test_current_needs_setup_first(fresh_params):
    with pytest.raises(RuntimeError, match="labkit.setup"):
        params.current()
    p = setup("00_welcome_and_setup")
    assert params.current() is p
    assert "SIZE" in p.describe()


def test_setup_seeds_numpy(fresh_params):
    import numpy as np

    setup("00_welcome_and_setup", SEED=3)
    a = np.random.rand(3)
    setup("00_welcome_and_setup", SEED=3)
    assert (np.random.rand(3) == a).all()


def test_params_imports_no_ray():
    import subprocess
    import sys

    code = (
        "import sys, labkit; labkit.setup('00_x'); "
        "print('ray' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_a_knob_takes_the_size_default_a_number_or_a_list_and_names_what_is_valid():
    from labkit.params import knob

    assert knob("TASK_MS", None, [1.0, 100.0], many=True) == [1.0, 100.0]
    assert knob("TASK_MS", 10, [1.0], many=True) == [10.0]
    assert knob("TASK_MS", [0.5, "2"], [1.0], many=True) == [0.5, 2.0]
    assert knob("SIZES_MB", "[64, 1024]", [256], kind=int, many=True) == [64, 1024]
    assert knob("N_TASKS", "64", 16, kind=int) == 64
    for bad in (0, -1, "x", True, 1.5):
        with pytest.raises(ParameterError, match="N_TASKS=.* int above 0"):
            knob("N_TASKS", bad, 16, kind=int)
    with pytest.raises(ParameterError, match=r"TASK_MS=\[1, 0\].*list of floats above 0"):
        knob("TASK_MS", [1, 0], [1.0], many=True)
    with pytest.raises(ParameterError, match="TASK_MS=\\[\\]"):
        knob("TASK_MS", [], [1.0], many=True)


def test_a_lab_report_name_is_valid_and_a_stray_one_is_not(tmp_path):
    setup("lab_tasks", SIZE="smoke", RESULTS_DIR=str(tmp_path))
    with pytest.raises(ParameterError, match="lab_topic"):
        setup("tasks_lab", SIZE="smoke", RESULTS_DIR=str(tmp_path))
