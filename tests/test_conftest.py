"""The test suite's own machinery (tests/conftest.py): the whole default suite fails when its CPU seconds outgrow the
budget and names its heaviest tests; a partial run is not checked."""

from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

CONFTEST = Path(__file__).with_name("conftest.py")


@pytest.fixture
def suite(pytester):
    """A two-test suite beside a copy of tests/conftest.py, configured as the project's (``-m 'not slow'``)."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    slow: heavy\naddopts = -m 'not slow' -p no:cacheprovider\n")
    pytester.makepyfile(
        test_work="""
import time


def test_busy():
    start = time.process_time()
    while time.process_time() - start < 0.05:
        pass


def test_idle():
    pass
"""
    )
    return pytester


def test_the_default_suite_fails_over_its_cpu_budget_and_names_its_heaviest_tests(suite, monkeypatch):
    monkeypatch.setenv("DPJAX_SUITE_CPU_BUDGET_S", "0.01")
    result = suite.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*CPU seconds of its budget of 0*", "*over budget*", "*test_work.py::test_busy"])
    monkeypatch.setenv("DPJAX_SUITE_CPU_BUDGET_S", "1000")
    result = suite.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*CPU seconds of its budget of 1000*"])
    assert "over budget" not in result.stdout.str()


@pytest.mark.parametrize("selection", [["-k", "busy"], ["test_work.py"], ["-m", "slow or not slow"]])
def test_a_partial_run_is_not_checked(suite, monkeypatch, selection):
    monkeypatch.setenv("DPJAX_SUITE_CPU_BUDGET_S", "0")
    result = suite.runpytest_inprocess(*selection)
    assert result.ret == pytest.ExitCode.OK
    assert "budget" not in result.stdout.str()
