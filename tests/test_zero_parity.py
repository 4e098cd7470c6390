"""Every ZeRO stage equals DP bit for bit after every step (lesson claim M11), and the reduced gradient is the
mean of the ranks' gradients summed in the ring's order (checked against a slow single-process reference)."""
import numpy as np
import pytest
from hypothesis import given, settings

from ringemu.reference import ring_sum_reference
from zero_stages import STAGES, AdamConfig, adam_step, parity_mismatches, parity_with_dp, train
from zero_stages.model import MLP, default_width
from zero_stages.workload import BlockWorkload

from strategies_zero import examples, grad_sources, n_ranks, seeds, steps, unit_sizes, wire_dtypes


@settings(max_examples=examples(0.6))
@given(n=n_ranks, units=unit_sizes, seed=seeds, k=steps, wire=wire_dtypes, grads=grad_sources)
def test_every_stage_matches_dp_after_every_step(n, units, seed, k, wire, grads):
    dp = train("dp", n, k, wire, seed, grads, units)
    assert len(dp.history) == k
    for stage in STAGES[1:]:
        report = train(stage, n, k, wire, seed, grads, units)
        assert parity_mismatches(report, dp) == [], stage


def reference_mean(local16: list[np.ndarray], scale: float) -> np.ndarray:
    """The property, stated independently of the stage code: the ranks' 16-bit gradients summed in ring order
    (ringemu.reference.ring_sum_reference, fp32 add and 16-bit round per hop), then fp32(sum) / fp32(N·scale)."""
    world = np.stack(local16)
    return ring_sum_reference(world).astype(np.float32) / np.float32(len(local16) * scale)


def initial_master(report, grads, seed) -> np.ndarray:
    """Initial fp32 weights, rebuilt as the workloads document them (default_rng([seed, 0, u]) per unit)."""
    if grads == "model":
        model = MLP(report.unit_sizes, default_width(report.unit_sizes), 4, seed)
        return np.concatenate([model.init_unit(u) for u in range(len(report.unit_sizes))])
    blocks = BlockWorkload(report.unit_sizes, report.n_ranks, np.float16, seed)
    return np.concatenate([blocks.init_unit(u) for u in range(len(report.unit_sizes))])


def check_gradients_and_moments(report, grads, seed, config=AdamConfig()):
    """Replay the run on one process from the ranks' own 16-bit gradients: the averaged gradient, m, v and the
    master weights must equal the stage's after every step. Adam's near scale-invariance would hide a missing
    1/N in the weights, so the gradient and m are compared directly."""
    n, n_units = report.n_ranks, len(report.unit_sizes)
    master = initial_master(report, grads, seed)
    m, v = np.zeros_like(master), np.zeros_like(master)
    t = 0
    for h in report.history:
        if h["skipped"]:
            assert h["grad32"] is None
            continue
        t += 1
        g = np.concatenate([reference_mean([h["local_grads16"][r][u] for r in range(n)], h["loss_scale"])
                            for u in range(n_units)])
        assert np.array_equal(g.view(np.uint32), h["grad32"].view(np.uint32)), "averaged gradient"
        adam_step(master, g, m, v, t, config)
        assert np.array_equal(m.view(np.uint32), h["m"].view(np.uint32)), "Adam m"
        assert np.array_equal(v.view(np.uint32), h["v"].view(np.uint32)), "Adam v"
        assert np.array_equal(master.view(np.uint32), h["master"].view(np.uint32)), "master"


@settings(max_examples=examples(0.4))
@given(n=n_ranks, units=unit_sizes, seed=seeds, k=steps, wire=wire_dtypes, grads=grad_sources)
def test_reduced_gradient_is_ring_order_mean(n, units, seed, k, wire, grads):
    for stage in STAGES:
        check_gradients_and_moments(train(stage, n, k, wire, seed, grads, units), grads, seed)


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
def test_integer_blocks_reduce_to_the_exact_sum(wire):
    """With integer blocks every partial sum is exact, so the averaged gradient is exactly numpy's sum / N."""
    n, units = 6, (13, 5, 40)
    report = train("zero2", n, 2, wire, 3, "blocks", units)
    for h in report.history:
        exact = np.concatenate([np.sum([h["local_grads16"][r][u].astype(np.float64) for r in range(n)], axis=0)
                                for u in range(len(units))])
        assert np.array_equal(h["grad32"], (exact / (n * h["loss_scale"])).astype(np.float32))


def test_cli_example_matches_dp():
    """The CLI's run (N = 8, 3 steps, default model): every stage matches DP."""
    dp = train("dp", 8, 3)
    assert all(parity_with_dp(train(s, 8, 3), dp) for s in STAGES)


@pytest.mark.parametrize("config", [AdamConfig(lr=0.01, weight_decay=0.1, decoupled=True),
                                    AdamConfig(lr=0.01, weight_decay=0.1, decoupled=False)])
def test_weight_decay_variants_match_dp(config):
    """AdamW (decoupled) and L2 weight decay are elementwise too: every stage still equals DP bit for bit."""
    dp = train("dp", 5, 3, "fp16", 2, "model", (30, 11, 4), adam=config)
    for stage in STAGES[1:]:
        report = train(stage, 5, 3, "fp16", 2, "model", (30, 11, 4), adam=config)
        assert parity_mismatches(report, dp) == []
        check_gradients_and_moments(report, "model", 2, config)
