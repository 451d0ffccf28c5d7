import gc
import os

import pytest

# Tests run on the CPU; the sharding test spawns its own process with 4 simulated devices.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

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


_LIMIT = _map_limit()


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """Drop JAX's compiled programs when the process holds more than half its mapping budget."""
    yield
    if _LIMIT and _maps_in_use() > _MAP_BUDGET * _LIMIT:
        import jax

        jax.clear_caches()
        gc.collect()
