import ctypes
import gc
import os
import resource
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


#: the default suite's budget: 4 minutes on the CI machine's 2 cores, counted in CPU seconds (user + system) of every
#: process the suite runs: the xdist controller, its workers and the processes they start (the command-line runs, the
#: two-process launches, the Spark JVM). Unlike the wall time, this does not grow when other work shares the machine;
#: ``DPJAX_SUITE_CPU_BUDGET_S`` raises it on a slower machine
SUITE_CPU_BUDGET_S = float(os.environ.get("DPJAX_SUITE_CPU_BUDGET_S", 2 * 240))
#: how many of the heaviest tests (CPU seconds of the test and of the processes it waited for) a run over budget names
_HEAVIEST = 10


def _is_default_suite(config) -> bool:
    """The whole default suite: no file, node or keyword selection, ``-m 'not slow'`` as configured, tests run."""
    explicit = [a for a in config.args if os.path.normpath(a) not in ("tests", os.path.dirname(__file__))]
    return (
        not explicit
        and not config.option.keyword
        and config.option.markexpr == "not slow"
        and not config.option.collectonly
    )


def _cpu_seconds(children: bool = True) -> float:
    """User + system CPU seconds of this process and (``children``) of its children that ended and were waited for."""
    use = [resource.getrusage(resource.RUSAGE_SELF)]
    if children:
        use.append(resource.getrusage(resource.RUSAGE_CHILDREN))
    return sum(r.ru_utime + r.ru_stime for r in use)


def _unreaped_descendants_cpu_seconds() -> float:
    """CPU seconds of this process's descendants not yet waited for, running or ended (Linux ``/proc``; 0 elsewhere):
    a JVM that outlives the test that started it is counted too."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0.0
    parent, cpu = {}, {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the command: state, ppid, ..., utime and stime (fields 14, 15), cutime and cstime (its reaped children)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - mine
        mine |= frontier
    return sum(cpu[pid] for pid in mine)


def pytest_configure(config):
    import dpjax

    dpjax.enable_compilation_cache(os.environ[_SESSION_CACHE_VARIABLE])


def pytest_unconfigure(config):
    if _OWNS_SESSION_CACHE and not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ[_SESSION_CACHE_VARIABLE], ignore_errors=True)


def pytest_sessionstart(session):
    session.config._dpjax_started = time.monotonic()
    session.config._dpjax_cpu_started = _cpu_seconds()
    session.config._dpjax_own_cpu_started = _cpu_seconds(children=False)
    session.config._dpjax_workers = []  # the xdist workers' CPU seconds, added as each one ends
    session.config._dpjax_tests = []  # (CPU seconds, node id) of this process's tests, or the workers' heaviest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Record each test's CPU seconds (setup, call and teardown; the processes it waited for included)."""
    start = _cpu_seconds()
    try:
        return (yield)
    finally:
        item.config._dpjax_tests.append((_cpu_seconds() - start, item.nodeid))


def _session_cpu_seconds(config) -> float:
    """This process's CPU seconds since the session started, its unreaped descendants' included."""
    return _cpu_seconds() - config._dpjax_cpu_started + _unreaped_descendants_cpu_seconds()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """An xdist worker ended: add its CPU seconds and heaviest tests to the controller's."""
    out = getattr(node, "workeroutput", {})
    node.config._dpjax_workers.append(out.get("dpjax_cpu_s", 0.0))
    node.config._dpjax_tests.extend(tuple(t) for t in out.get("dpjax_heaviest", ()))


def pytest_sessionfinish(session, exitstatus):
    """Fail the whole default suite when its CPU seconds outgrow :data:`SUITE_CPU_BUDGET_S`: the heaviest tests
    then move under ``@pytest.mark.slow`` where they are defined, each keeping a cheaper default sibling."""
    config = session.config
    heaviest = sorted(config._dpjax_tests, reverse=True)[:_HEAVIEST]
    if hasattr(config, "workerinput"):  # an xdist worker: its figures go to the controller
        config.workeroutput["dpjax_cpu_s"] = _session_cpu_seconds(config)
        config.workeroutput["dpjax_heaviest"] = [list(t) for t in heaviest]
        return
    if not _is_default_suite(config):
        return
    if config._dpjax_workers:  # the xdist controller: the workers counted their own processes and descendants
        cpu = sum(config._dpjax_workers) + _cpu_seconds(children=False) - config._dpjax_own_cpu_started
    else:
        cpu = _session_cpu_seconds(config)
    wall = time.monotonic() - config._dpjax_started
    over = cpu > SUITE_CPU_BUDGET_S
    lines = [
        f"{cpu:.0f} CPU seconds of its budget of {SUITE_CPU_BUDGET_S:.0f} (DPJAX_SUITE_CPU_BUDGET_S), {wall:.0f} s wall"
    ]
    if over:
        lines.append(
            "over budget: mark the heaviest tests slow where they are defined, each keeping a cheaper default sibling "
            "(tests/README.md); the heaviest, in CPU seconds:"
        )
        lines += [f"  {took:6.1f}  {nodeid}" for took, nodeid in heaviest]
        if exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    config._dpjax_budget = (over, lines)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The default suite's CPU seconds against its budget (and, over it, the heaviest tests)."""
    over, lines = getattr(config, "_dpjax_budget", (False, []))
    if lines:
        terminalreporter.section("the default suite's budget", red=over, bold=over)
        for line in lines:
            terminalreporter.write_line(line, red=over)
