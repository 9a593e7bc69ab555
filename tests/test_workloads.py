import time

import pytest

from labkit import workloads


def test_spin_is_deterministic_and_checks_input():
    assert workloads.spin(1000) == workloads.spin(1000)
    assert workloads.spin(0) == 0
    with pytest.raises(ValueError):
        workloads.spin(-1)


def test_calibrate_gives_roughly_the_asked_time():
    n = workloads.calibrate(20)
    start = time.perf_counter()
    workloads.spin(n)
    elapsed_ms = (time.perf_counter() - start) * 1e3
    assert n > 0 and elapsed_ms > 2  # real work, same order of magnitude (no timing window)
    assert workloads.calibrate(40) > workloads.calibrate(10)
    with pytest.raises(ValueError):
        workloads.calibrate(0)


def test_split_covers_the_range():
    chunks = workloads.split(10, 3)
    assert chunks == [(0, 3), (3, 6), (6, 10)]
    assert workloads.split(2, 4) == [(0, 1), (1, 2)]
    with pytest.raises(ValueError):
        workloads.split(10, 0)
