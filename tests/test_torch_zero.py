"""The project's ZeRO stage modules on torch.distributed (gloo) against the same stages on the emulator."""
import pytest

from torch_support import require_torch

require_torch()

from zero_stages.torch.torch_zero import TRAFFIC_SOURCE, run_zero_on_torch  # noqa: E402
from zero_stages import STAGES, train  # noqa: E402
from zero_stages.report import stage_json  # noqa: E402


def _by_name(out):
    return {s["name"]: s for s in out["stages"]}


def test_every_stage_on_gloo_equals_the_emulator_with_integer_block_gradients():
    """Property: with integer-block gradients (exact in any order) every stage on gloo's own collectives gives
    the emulator's final and per-step weights16, master, m, v and averaged gradient bit for bit, the same
    memory and modelled traffic, and parity with DP; ZeRO-3's modelled traffic is 3/2 of DP's."""
    out = run_zero_on_torch("all", n_ranks=4, steps=2, wire_dtype="bf16", seed=3, grads="blocks",
                            timeout=120, unit_sizes=[37, 5, 64])
    stages = _by_name(out)
    assert list(stages) == list(STAGES)
    for name, s in stages.items():
        assert s["parity_with_emulator"] is True, (name, s["emulator_mismatches"])
        assert s["parity_with_dp"] is True, (name, s["parity_mismatches"])
    assert stages["zero3"]["traffic_ratio_to_dp"] == "3/2"
    assert len({s["digests"]["master"] for s in stages.values()}) == 1  # every stage: DP's master, bit for bit
    emulated = {s: train(s, 4, 2, "bf16", 3, "blocks", [37, 5, 64]) for s in STAGES}
    for name, s in stages.items():  # the fields of `ringemu zero --json`, from the same function, same values
        want = stage_json(emulated[name], emulated["dp"])
        assert {k: s[k] for k in want if k != "memory_by_category"} == \
            {k: v for k, v in want.items() if k != "memory_by_category"}, name


@pytest.mark.parametrize("wire, steps", [("bf16", 2), ("fp16", 4)])
def test_model_gradients_need_the_ring_order(wire, steps):
    """With the MLP's float gradients only the ring schedule (algorithm="ring") adds in the emulator's order:
    then every stage matches the emulator bit for bit (N = 5: orders of 4+ ranks differ from gloo's). fp16's
    dynamic loss scale skips the first steps (overflow), so it runs 4 steps to include real updates."""
    out = run_zero_on_torch(["zero1", "zero3"], n_ranks=5, steps=steps, wire_dtype=wire, seed=1, grads="model",
                            timeout=120, algorithm="ring")
    for name, s in _by_name(out).items():
        assert not all(s["skipped_steps"]), (wire, name, s["skipped_steps"])
        assert s["parity_with_emulator"] is True, (wire, name, s["emulator_mismatches"])
        assert s["parity_with_dp"] is True, (wire, name, s["parity_mismatches"])


def test_model_gradients_on_gloo_native_differ_from_the_emulator_but_not_from_dp():
    """Measured fact (docs/real_engine.md): with float gradients gloo's own all-reduce adds in its order, so the
    master weights differ from the emulator's; every stage still equals DP on gloo, because gloo's reduce-scatter
    is the slice of the same all-reduce."""
    out = run_zero_on_torch(["zero2"], n_ranks=5, steps=2, wire_dtype="bf16", seed=1, grads="model",
                            timeout=120, algorithm="native")
    s = _by_name(out)["zero2"]
    assert s["parity_with_dp"] is True, s["parity_mismatches"]
    assert s["parity_with_emulator"] is False and "final master" in s["emulator_mismatches"]


def test_zero1_equals_torch_zero_redundancy_optimizer():
    """Property: the project's ZeRO-1 (fp32 master, m, v sharded by flat chunks) equals torch's
    ZeroRedundancyOptimizer wrapping Adam(foreach=False) (sharded by whole parameters) bit for bit, given the same
    averaged fp32 gradients, with torch's square root substituted in ours (zero_stages.adam's module doc)."""
    from zero_stages.torch.torch_zero_redundancy import compare_zero1_with_torch

    out = compare_zero1_with_torch(n_ranks=3, steps=3, wire_dtype="bf16", seed=2, grads="model", timeout=120)
    assert out["updates"] == 3
    assert out["equal"] == {"master": True, "m": True, "v": True}, out["mismatched_elements"]


def test_the_torchrun_form_gives_the_emulators_weights():
    """The cluster form, run here with torchrun on one machine: 2 processes started by torchrun (not by ringemu)
    run ZeRO-3 through communicator_from_env; rank 0 prints digests equal to the emulator's for the same run."""
    import json
    import os
    import subprocess
    import sys

    from zero_stages.torch.torch_zero import digest

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "zero_stages.torch.torch_run", "--stage", "zero3", "--steps", "2", "--grads", "blocks",
           "--units", "37,5,64", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["traffic_source"] == TRAFFIC_SOURCE  # the same words as run_zero_on_torch's
    emu = train("zero3", 2, 2, "bf16", 0, "blocks", [37, 5, 64])
    assert out["digests"] == {k: digest(getattr(emu, k)) for k in ("weights16", "master", "m", "v")}
    assert out["traffic_sent_bytes_per_rank"] == emu.traffic_sent_bytes_per_rank
    assert out["model_state_bytes_per_rank"] == emu.model_state_bytes_per_rank


@pytest.mark.parametrize("kwargs, words", [
    ({"steps": -5}, "steps"), ({"seed": -1}, "seed"), ({"n_ranks": 0}, "n_ranks"), ({"n_ranks": 1025}, "n_ranks"),
    ({"grads": "blocks", "n_ranks": 300}, "n_ranks=300"), ({"wire_dtype": "fp32"}, "wire_dtype"),
    ({"unit_sizes": [0]}, "unit_sizes"), ({"timeout": float("inf")}, "timeout"), ({"timeout": -1}, "timeout"),
])
def test_bad_arguments_are_rejected_before_any_process_starts(kwargs, words):
    """run_zero_on_torch checks its arguments as zero_stages.train does (it builds the same Job)."""
    with pytest.raises((ValueError, TypeError), match=words):
        run_zero_on_torch("dp", **{"n_ranks": 2, "steps": 1, **kwargs})
