"""A test file run by tests/integration/test_pytest_plugin.py under `pytest --gilty`."""

import threading
import time

import pytest


def _spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _two_spinners(seconds=1.0):
    threads = [threading.Thread(target=_spin, args=(seconds,), name=f"spinner-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.gil_budget(max_wait=0.2)
def test_contended_over_budget():
    _two_spinners()


@pytest.mark.gil_budget(max_wait=0.2)
def test_sleeping_within_budget():
    time.sleep(0.5)


@pytest.mark.gil_budget(max_wait=0.9)
def test_contended_with_a_generous_budget():
    _two_spinners()


def test_without_budget_is_not_judged():
    _two_spinners(0.3)
