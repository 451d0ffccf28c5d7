import os

# Tests run on the CPU; the sharding test spawns its own process with 4 simulated devices.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
