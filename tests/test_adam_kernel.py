"""The compiled optimizer kernels (zero_stages._adam_kernel) against the numpy reference, bit for bit.

Every test calls the kernels themselves, so the same file checks the compiled code (JIT on) and the plain-Python
code numba would compile (``RINGEMU_DISABLE_JIT=1``; sizes stay small); ``test_kernels_match_with_jit_disabled``
also runs a few of them in a JIT-off subprocess. Inputs cover every float class: ±0, subnormals, normals, huge
values near the fp32 maximum, and inf/NaN (in the gradient, and in m, v and master).
"""
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ringemu._jit import JIT_ENABLED
from zero_stages import _adam_kernel as K
from zero_stages.adam import AdamConfig, adam_step, adam_step_reference, fma32, kernel_constants
from zero_stages.averaging import average_gradient, average_gradient_reference
from zero_stages.buffers import cast, quiet_signalling_nans
from zero_stages.model import MLP

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow/invalid: the inputs mean it

MAX_LEN = 40 if JIT_ENABLED else 12
WIRES = {"bf16": (ml_dtypes.bfloat16, K.BF16), "fp16": (np.float16, K.FP16)}


def test_kernel_type_codes_are_ringemus_wire_kinds():
    # Example: _adam_kernel.py repeats ringemu.wire's codes so that its numba cache depends on that file only;
    # the expected values are ringemu.wire's one table, and kernel_kind16 keeps exactly the two 16-bit kinds.
    from ringemu import wire
    from zero_stages.averaging import kernel_kind16
    assert (K.BF16, K.FP16) == (wire.WIRE_BF16, wire.WIRE_FP16)
    assert [kernel_kind16(d) for d in (ml_dtypes.bfloat16, np.float16, np.float32, np.int64, np.int8)] == [
        wire.WIRE_BF16, wire.WIRE_FP16, None, None, None]

# fp32 values of every class: hypothesis' floats already favour 0, ±inf, NaN and boundaries; the samples add
# subnormals, the smallest normal, values just below fp32's maximum and a signalling-free NaN with a payload.
SPECIAL = [0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 1e38, 6.5504e4,
           np.inf, -np.inf, np.nan]
finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
any32 = st.one_of(st.floats(width=32), st.sampled_from(SPECIAL))


def arrays32(elements, n):
    return hnp.arrays(np.float32, n, elements=elements)


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


configs = st.builds(
    AdamConfig,
    lr=st.sampled_from([1e-3, 1e-2, 0.5, 1e-7]),
    beta1=st.sampled_from([0.9, 0.3, 0.0, 0.5, 0.999]),  # lerp weight < 0.5 and >= 0.5: both kernel branches
    beta2=st.sampled_from([0.999, 0.99, 0.0, 0.5]),
    eps=st.sampled_from([1e-8, 0.0, 1e-3, 1e-45]),  # eps = 0: denominators of 0 give inf/NaN, as in numpy
    weight_decay=st.sampled_from([0.0, 0.1, 1e-2]),
    decoupled=st.booleans())


def _run_both(master, grad, m, v, step, config):
    """(reference master, m, v), (kernel master, m, v) from the same inputs."""
    ref = [master.copy(), m.copy(), v.copy()]
    with np.errstate(all="ignore"):
        adam_step_reference(ref[0], grad, ref[1], ref[2], step, config)
    out = [master.copy(), m.copy(), v.copy()]
    K.adam_kernel(out[0], grad, out[1], out[2], *kernel_constants(config, step))
    return ref, out


@st.composite
def adam_inputs(draw, grad_elements=any32, state_elements=finite32):
    n = draw(st.integers(0, MAX_LEN))
    grad = draw(arrays32(grad_elements, n))
    master = draw(arrays32(state_elements, n))
    m = draw(arrays32(state_elements, n))
    v = np.abs(draw(arrays32(state_elements, n)))  # v = E[g²] >= 0 in any reachable state
    return master, grad, m, v


@given(adam_inputs(), st.integers(1, 10 ** 4), configs)
def test_adam_kernel_equals_reference(inputs, step, config):
    """Property: the kernel's master, m, v equal adam_step_reference's bit for bit (every float class in the
    gradient, finite states; NaN payloads included)."""
    ref, out = _run_both(*inputs, step, config)
    for name, r, o in zip(("master", "m", "v"), ref, out):
        assert np.array_equal(bits(r), bits(o)), (name, r, o)


def same_bits_or_both_nan(a, b) -> bool:
    """Equal bits, except that two NaNs count as equal whatever their sign and payload."""
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    return bool(np.array_equal(a_nan, b_nan) and np.array_equal(bits(a)[~a_nan], bits(b)[~b_nan]))


@given(adam_inputs(state_elements=any32), st.integers(1, 50), configs)
def test_adam_kernel_equals_reference_nonfinite_state(inputs, step, config):
    """Property: also with inf/NaN already in master, m or v (a run that has diverged), the same bits for every
    non-NaN result and NaN where the reference has NaN. When two NaNs meet in one operation (a NaN master plus
    the 0/0 of a zero denominator) IEEE 754 leaves open which payload survives; x86 keeps the first operand's,
    and LLVM may commute an addition, so only the NaN payload may differ (tests/test_adam_kernel.py's first
    property shows that finite states give identical bits for every gradient, inf and NaN included)."""
    ref, out = _run_both(*inputs, step, config)
    for name, r, o in zip(("master", "m", "v"), ref, out):
        assert same_bits_or_both_nan(r, o), (name, r, o)


@pytest.mark.skipif(not JIT_ENABLED, reason="adam_step uses the reference itself when the JIT is off")
@given(adam_inputs(), st.integers(1, 100), configs)
def test_adam_step_uses_the_kernel_with_the_same_bits(inputs, step, config):
    """Property: the public adam_step (kernel for sqrt='numpy') equals the reference; this is the path every
    stage takes."""
    master, grad, m, v = inputs
    ref = [master.copy(), m.copy(), v.copy()]
    with np.errstate(all="ignore"):
        adam_step_reference(ref[0], grad, ref[1], ref[2], step, config)
        adam_step(master, grad, m, v, step, config)
    assert all(np.array_equal(bits(r), bits(o)) for r, o in zip(ref, (master, m, v)))


def test_adam_kernel_long_array_and_training_run():
    """Example: 10 steps on 2^12 (JIT off: 2^6) elements of gradients spanning 10^-30..10^30 (the vectorised
    loop body, not only its scalar remainder), reference and kernel step for step."""
    n = 4096 if JIT_ENABLED else 64
    rng = np.random.default_rng(7)
    config = AdamConfig(lr=1e-2, weight_decay=0.01)
    master = rng.standard_normal(n).astype(np.float32)
    states = [[master.copy(), np.zeros(n, np.float32), np.zeros(n, np.float32)] for _ in range(2)]
    for step in range(1, 11):
        grad = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 31, n)).astype(np.float32)
        adam_step_reference(states[0][0], grad, states[0][1], states[0][2], step, config)
        K.adam_kernel(states[1][0], grad, states[1][1], states[1][2], *kernel_constants(config, step))
        for r, o in zip(*states):
            assert np.array_equal(bits(r), bits(o)), step


@given(arrays32(finite32, st.integers(0, MAX_LEN)), arrays32(finite32, st.integers(0, MAX_LEN)),
       arrays32(any32, st.integers(0, MAX_LEN)))
def test_fma_equals_reference_fma32(a, b, c):
    """Property: the kernels' fma (llvm.fma.f32 with the JIT, fp64 round-to-odd without) equals fma32, the
    numpy reference checked against exact Fractions in tests/test_adam_fma.py."""
    n = min(len(a), len(b), len(c))
    a, b, c = a[:n], b[:n], c[:n]
    out = np.empty(n, np.float32)
    K.fma_kernel(a, b, c, out)
    with np.errstate(all="ignore"):
        want = fma32(a, b, c)
    assert np.array_equal(bits(out), bits(want)), (a, b, c, out, want)


@given(st.floats(2.0 ** -60, 2.0 ** 60, width=32), st.integers(1, 2 ** 11), st.sampled_from([-1, 1]))
def test_fma_rounds_once_near_midpoints(c, k, sign):
    """Property, the hard cases of tests/test_adam_fma.py (a·b + c within 2^-70·|c| of a midpoint, where
    rounding through fp64 first is wrong half the time): this CPU's fma rounds once, as fma32 does."""
    a = np.float32(1 + k * 2.0 ** -23)
    b = np.float32(float(np.spacing(np.float32(c))) / 2 * (1 + sign * k * 2.0 ** -23))
    out = np.empty(1, np.float32)
    K.fma_kernel(np.array([a]), np.array([b]), np.array([c], np.float32), out)
    assert bits(out)[0] == bits(fma32(a, b, np.float32(c)))


def test_fma_double_rounding_example():
    """Example built by hand (tests/test_adam_fma.py): a·b + c = 1 + 2^-23 + 2^-24 - 2^-70 rounds once to
    1 + 2^-23; rounding through fp64 first would give 1 + 2^-22."""
    a, b = np.float32(1 + 2 ** -23), np.float32(2 ** -24 - 2 ** -47)
    out = np.empty(1, np.float32)
    K.fma_kernel(np.array([a]), np.array([b]), np.array([a]), out)
    assert out[0] == np.float32(1 + 2 ** -23)


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_average_all_16_bit_patterns(wire):
    """Exhaustive: every 16-bit pattern (JIT off: every 97th) averaged over N = 8 with loss scale 2^16, and
    over N = 3 (an inexact divisor), equals the numpy reference bit for bit."""
    dtype, kind = WIRES[wire]
    every = np.arange(0, 2 ** 16, 1 if JIT_ENABLED else 97, dtype=np.uint16).view(dtype)
    for n_ranks, scale in ((8, 2.0 ** 16), (3, 1.0)):
        out = np.empty(every.shape, np.float32)
        K.average_kernel(every.view(np.uint16), kind, np.float32(n_ranks * scale), out)
        assert np.array_equal(bits(out), bits(average_gradient_reference(every, n_ranks, scale)))
        assert np.array_equal(bits(average_gradient(every, n_ranks, scale)), bits(out))


@pytest.mark.parametrize("wire", sorted(WIRES))
@given(values=arrays32(any32, st.integers(0, MAX_LEN)))
def test_cast16_equals_astype(wire, values):
    """Property: fp32 -> bf16/fp16 by the kernel equals numpy's astype (ml_dtypes for bf16) bit for bit, NaN
    included, except that an fp32 signalling NaN becomes a quiet fp16 NaN (F16C quiets it; the expected value
    quiets it first); buffers.cast gives the same."""
    dtype, kind = WIRES[wire]
    out = np.empty(values.shape, np.uint16)
    K.cast16_kernel(values, kind, out)
    with np.errstate(all="ignore"):
        want = (quiet_signalling_nans(values) if np.dtype(dtype) == np.float16 else values).astype(dtype)
        assert np.array_equal(out, bits(want)), (values, out, bits(want))
        assert np.array_equal(bits(cast(values, dtype)), bits(want))


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_cast16_signalling_nans(wire):
    """Example (IEEE 754 §6.2, F16C): fp32 signalling NaNs 0x7F800001 and 0xFFA00000 become quiet 16-bit NaNs
    with the sign kept: fp16 0x7E00 and 0xFF00 (top payload bits, quiet bit set), bf16 0x7FC0 and 0xFFC0 (ml_dtypes'
    canonical NaN). The kernel and buffers.cast agree, with the JIT on and off."""
    dtype, kind = WIRES[wire]
    values = np.array([0x7F800001, 0xFFA00000], dtype=np.uint32).view(np.float32)
    want = [0x7E00, 0xFF00] if np.dtype(dtype) == np.float16 else [0x7FC0, 0xFFC0]
    out = np.empty(2, np.uint16)
    K.cast16_kernel(values, kind, out)
    assert out.tolist() == want
    assert bits(cast(values, dtype)).tolist() == want


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_cast16_ties_and_overflow(wire):
    """Example: fp32 values exactly halfway between two 16-bit values round to the even one; values past the
    16-bit maximum give inf (bf16: above 3.3961776e38, fp16: 65520 and above)."""
    dtype, kind = WIRES[wire]
    grid = np.arange(0, 2 ** 16, 1 if JIT_ENABLED else 251, dtype=np.uint16).view(dtype).astype(np.float32)
    grid = grid[np.isfinite(grid)]
    halfway = (grid[:-1].astype(np.float64) + np.diff(grid.astype(np.float64)) / 2).astype(np.float32)
    values = np.concatenate([halfway, np.array([65519.0, 65520.0, 3.3961776e38, 3.4028235e38], np.float32)])
    out = np.empty(values.shape, np.uint16)
    K.cast16_kernel(values, kind, out)
    with np.errstate(all="ignore"):
        assert np.array_equal(out, bits(values.astype(dtype)))


@pytest.mark.parametrize("wire", sorted(WIRES))
@given(inputs=adam_inputs(), step=st.integers(1, 1000), config=configs, n_ranks=st.integers(1, 64),
       scale=st.sampled_from([1.0, 2.0 ** 16, 2.0 ** -3, 3.0]))
def test_fused_update_equals_the_reference_steps(wire, inputs, step, config, n_ranks, scale):
    """Property: the one-pass kernel equals average_gradient_reference, then adam_step_reference, then astype
    of the new master, bit for bit (gradient, master, m, v, 16-bit weights)."""
    dtype, kind = WIRES[wire]
    master, grad, m, v = inputs
    with np.errstate(all="ignore"):
        reduced16 = grad.astype(dtype)
        g_ref = average_gradient_reference(reduced16, n_ranks, scale)
        ref = [master.copy(), m.copy(), v.copy()]
        adam_step_reference(ref[0], g_ref, ref[1], ref[2], step, config)
        w_ref = ref[0].astype(dtype)
    out = [master.copy(), m.copy(), v.copy()]
    g_out, w_out = np.empty(grad.shape, np.float32), np.empty(grad.shape, np.uint16)
    K.fused_update_kernel(reduced16.view(np.uint16), kind, np.float32(n_ranks * scale), out[0], out[1], out[2],
                          g_out, w_out, *kernel_constants(config, step))
    assert np.array_equal(bits(g_out), bits(g_ref))
    assert all(np.array_equal(bits(r), bits(o)) for r, o in zip(ref, out))
    assert np.array_equal(w_out, bits(w_ref))


@pytest.mark.parametrize("wire", sorted(WIRES))
@given(size=st.integers(1, 60), extra=st.integers(0, 3), seed=st.integers(0, 2 ** 32 - 1))
def test_expand16_equals_resize(wire, size, extra, seed):
    """Property: the tied layer's entries (entry j = p[j mod S]) equal np.resize(p.astype(float32), w² + w),
    and the model's forward and backward equal the reference formulas (np.resize, concatenate, _fold)."""
    dtype, kind = WIRES[wire]
    mlp = MLP((size,), max(1, int(np.ceil(np.sqrt(size)))) + extra, 3, seed)
    rng = np.random.default_rng(seed)
    w16 = (rng.standard_normal(size) * 4).astype(dtype)
    w16[::5] = -0.0
    out = np.empty(mlp.entries, np.float32)
    K.expand16_kernel(w16.view(np.uint16), kind, out)
    want = np.resize(w16.astype(np.float32), mlp.entries)
    assert np.array_equal(bits(out), bits(want))
    w = mlp.width
    W, b = want[:w * w].reshape(w, w), want[w * w:]
    x, dy = rng.standard_normal((3, w)).astype(np.float32), rng.standard_normal((3, w)).astype(np.float32)
    dy[0] = -0.0  # -0 gradients: the fold's +0 padding must turn them into +0 as the reference does
    assert np.array_equal(bits(mlp.forward_unit(0, w16, x)), bits(x @ W.T + b))
    grad, dx = mlp.backward_unit(0, w16, x, x, dy)
    entries = np.concatenate([(dy.T @ x).ravel(), dy.sum(axis=0)])
    assert np.array_equal(bits(grad), bits(MLP._fold(entries, size)))
    assert np.array_equal(bits(dx), bits(dy @ W))


@pytest.mark.skipif(not JIT_ENABLED, reason="this test starts the JIT-off run itself")
def test_kernels_match_with_jit_disabled():
    """The plain-Python kernels (RINGEMU_DISABLE_JIT=1, a fresh process) pass this file's property tests on
    few, small examples: the fallback fma and casts give the compiled kernels' bits."""
    env = dict(os.environ, RINGEMU_DISABLE_JIT="1", HYPOTHESIS_PROFILE="default")
    here = Path(__file__).resolve()
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", str(here),
           "-k", "fma or fused or cast16_equals or average or long_array"]
    done = subprocess.run(cmd, cwd=here.parent.parent, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " skipped" not in done.stdout, done.stdout[-500:]


@settings(max_examples=10)
@given(st.integers(1, 8), st.sampled_from(sorted(WIRES)), st.integers(1, 200))
def test_optimizer_fused_path_equals_reference_path(n_ranks, wire, numel):
    """Property: OptimizerShard.update + weights16 (fused kernel with the JIT) equal the reference functions
    applied in sequence, over three steps."""
    from ringemu.memory import MemoryLedger
    from zero_stages.buffers import Arena
    from zero_stages.optimizer import OptimizerShard
    dtype, _ = WIRES[wire]
    rng = np.random.default_rng(numel)
    init = rng.standard_normal(numel).astype(np.float32)
    config = AdamConfig(lr=1e-2)
    opt = OptimizerShard(Arena(MemoryLedger(1), 0), [slice(0, numel)], [numel], lambda u: init, config)
    master, m, v = init.copy(), np.zeros(numel, np.float32), np.zeros(numel, np.float32)
    for step in range(1, 4):
        reduced16 = (rng.standard_normal(numel) * n_ranks).astype(dtype)
        opt.next_step()
        g = opt.update(0, reduced16, n_ranks, 1.0)
        g_ref = average_gradient_reference(reduced16, n_ranks, 1.0)
        adam_step_reference(master, g_ref, m, v, step, config)
        assert np.array_equal(bits(g), bits(g_ref))
        assert np.array_equal(bits(opt.weights16(0, dtype)), bits(master.astype(dtype)))
        assert np.array_equal(bits(opt.payload(opt.master, 0)), bits(master))
        assert np.array_equal(bits(opt.payload(opt.m, 0)), bits(m))
        assert np.array_equal(bits(opt.payload(opt.v, 0)), bits(v))
