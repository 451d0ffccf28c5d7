import ctypes
import gc
import os

import pytest

# Tests run on the CPU; the sharding test spawns its own process with 4 simulated devices.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# the command line's persistent compilation cache stays off in tests (JAX's configuration is process-wide):
# tests/test_cli_safe.py turns it on where it is what is tested
os.environ.setdefault("DPJAX_COMPILATION_CACHE", "off")

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


_SLOW_LIST = os.path.join(os.path.dirname(__file__), "slow_tests.txt")


def _listed_slow():
    with open(_SLOW_LIST, encoding="utf-8") as fh:
        return {line.strip() for line in fh if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests listed in tests/slow_tests.txt ``slow`` (before ``-m`` selects): the default
    suite's time budget, kept as data next to the tests rather than as markers spread over them."""
    listed = _listed_slow()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)
    # the files whose tests wait on other processes (two-process launches, the Spark JVM) first: with
    # ``--dist loadfile`` one worker takes them while the other runs the rest, instead of both idling at the end
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in _SUBPROCESS_FILES)


#: test files whose tests spend most of their time in other processes
_SUBPROCESS_FILES = ("tests/test_multihost.py", "tests/test_table_spark.py")
