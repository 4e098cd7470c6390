"""JAX with N host (CPU) devices in one process: psum_scatter, all_gather and psum under shard_map, jitted.

The world is an (N, S) fp32 array sharded one row per device; each run blocks until the result is ready.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import OPS, emit, parse, sizes  # noqa: E402


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.ranks}"  # before jax loads
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:
        from jax.experimental.shard_map import shard_map
    n = args.ranks
    chunk, padded = sizes(n, args.numel)
    mesh = Mesh(jax.devices()[:n], ("r",))
    rows = NamedSharding(mesh, P("r"))
    world = jax.device_put(jnp.full((n, padded), 1e-3, jnp.float32), rows)
    shards = jax.device_put(jnp.full((n, chunk), 1e-3, jnp.float32), rows)

    def sm(f):
        return jax.jit(shard_map(f, mesh=mesh, in_specs=P("r"), out_specs=P("r")))

    calls = {"reduce-scatter": (sm(lambda a: jax.lax.psum_scatter(a[0], "r", tiled=True)[None]), world),
             "all-gather": (sm(lambda s: jax.lax.all_gather(s[0], "r", tiled=True)[None]), shards),
             "all-reduce": (sm(lambda a: jax.lax.psum(a, "r")), world)}
    results = {}
    for op in OPS:
        fn, arg = calls[op]
        fn(arg).block_until_ready()  # compile and warm up
        samples = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn(arg).block_until_ready()
            samples.append(time.perf_counter() - start)
        results[op] = samples
    emit("jax-host", n, args.numel, results, version=jax.__version__)


if __name__ == "__main__":
    main()
