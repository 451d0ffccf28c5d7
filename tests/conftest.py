import ctypes
import gc
import os
import shutil
import tempfile
import time

import pytest

# Tests run on the CPU; the sharding test spawns its own process with 4 simulated devices.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
#: one persistent compilation cache for the session (the first process to load this file makes it, the xdist
#: workers and the command-line processes tests start inherit it): a program one worker compiled, or compiled
#: before its caches were dropped, is loaded instead of compiled again. The user's own cache is never touched.
_SESSION_CACHE_VARIABLE = "DPJAX_TESTS_COMPILATION_CACHE"
_OWNS_SESSION_CACHE = _SESSION_CACHE_VARIABLE not in os.environ
if _OWNS_SESSION_CACHE:
    os.environ[_SESSION_CACHE_VARIABLE] = tempfile.mkdtemp(prefix="dpjax-tests-xla-")
os.environ["DPJAX_COMPILATION_CACHE"] = os.environ[_SESSION_CACHE_VARIABLE]

#: every compiled XLA:CPU executable holds memory mappings of its own; a long test session
#: compiles thousands and reaches the kernel's limit (vm.max_map_count, 65530 by default),
#: after which LLVM's next mapping fails and the process segfaults inside compilation
_MAP_BUDGET = 0.5


def _map_limit():
    try:
        with open("/proc/sys/vm/max_map_count") as fh:
            return int(fh.read())
    except OSError:
        return None


def _maps_in_use():
    try:
        with open("/proc/self/maps", "rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


#: the default suite runs in two workers (beside a local Spark in one test file) and must stay under
#: 3 GB in all: a worker whose resident memory passes this drops the compiled programs it holds (they
#: are what grows; a later test needing one compiles it again) and hands freed heap back to the system
_RSS_BUDGET = 1.0 * 2**30


def _rss():
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


_LIMIT = _map_limit()


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """Drop JAX's compiled programs when the process holds more than half its mapping budget or
    more resident memory than its share of the suite's."""
    yield
    if (_LIMIT and _maps_in_use() > _MAP_BUDGET * _LIMIT) or _rss() > _RSS_BUDGET:
        import jax

        jax.clear_caches()
        gc.collect()
        _trim_heap()


def _trim_heap():
    """Return the C heap's free pages to the system (glibc's malloc_trim; a no-op elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # the files whose tests wait on other processes (two-process launches, the Spark JVM) first: with
    # ``--dist loadfile`` one worker takes them while the other runs the rest, instead of both idling at the end
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in _SUBPROCESS_FILES)


#: test files whose tests spend most of their time in other processes
_SUBPROCESS_FILES = ("tests/test_multihost.py", "tests/test_table_spark.py")


#: the default suite's wall-time budget on the 2-core CI machine (seconds); ``DPJAX_SUITE_BUDGET_S`` overrides it
SUITE_BUDGET_S = float(os.environ.get("DPJAX_SUITE_BUDGET_S", 240))
#: whether exceeding the budget fails the run (``DPJAX_ENFORCE_SUITE_BUDGET=1``); otherwise it is reported
ENFORCE_SUITE_BUDGET = os.environ.get("DPJAX_ENFORCE_SUITE_BUDGET", "") == "1"


def _is_default_suite(config) -> bool:
    """The whole default suite: no file, node or keyword selection, and ``-m 'not slow'`` as configured."""
    explicit = [a for a in config.args if os.path.normpath(a) not in ("tests", os.path.dirname(__file__))]
    return not explicit and not config.option.keyword and config.option.markexpr == "not slow"


def pytest_configure(config):
    import dpjax

    dpjax.enable_compilation_cache(os.environ[_SESSION_CACHE_VARIABLE])


def pytest_unconfigure(config):
    if _OWNS_SESSION_CACHE and not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ[_SESSION_CACHE_VARIABLE], ignore_errors=True)


def pytest_sessionstart(session):
    session.config._dpjax_started = time.monotonic()


def pytest_sessionfinish(session, exitstatus):
    """Fail the default suite when it outgrows its budget: the heaviest tests then move under
    ``@pytest.mark.slow`` where they are defined, each keeping a cheaper default sibling."""
    if hasattr(session.config, "workerinput") or not _is_default_suite(session.config):
        return
    took = time.monotonic() - session.config._dpjax_started
    if took > SUITE_BUDGET_S and exitstatus == 0:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"the default suite took {took:.0f} s, over its budget of {SUITE_BUDGET_S:.0f} s: "
                "mark the heaviest tests slow where they are defined (tests/README.md)",
                red=True,
            )
        if ENFORCE_SUITE_BUDGET:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
