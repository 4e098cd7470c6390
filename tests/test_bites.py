"""Tests aimed at bugs that once survived the suite (each names the single-point bug it catches; see
tests/mutation/run.py, which plants them)."""
import importlib.util
import math

import numpy as np
from hypothesis import given, strategies as st

import ringemu._jit
from ringemu.worlds.emulator import EmulatedWorld
from ringemu.ledger import CommLedger
from ringemu.units import format_gb
from zero_stages.stages import zero3
from zero_stages.adam import AdamConfig, adam_step, adam_step_reference
from zero_stages.api import run_size_only, size_only_job
from zero_stages.buffers import cast
from zero_stages.precision import LossScaler, LossScaling

units_lists = st.lists(st.integers(1, 40), min_size=1, max_size=5)


def _ring_elements(n: int, sizes) -> int:
    """Closed form (ZeRO §7.2; the ring sends N-1 chunks of ceil(S_u/N) per pass): one pass over every unit."""
    return sum((n - 1) * math.ceil(s / n) for s in sizes)


@given(n=st.integers(1, 9), sizes=units_lists)
def test_traffic_per_label_per_rank_matches_its_closed_form(n, sizes):
    """Catches: ZeRO-3's backward prefetch recorded under the forward label (and any label mix-up)."""
    one = _ring_elements(n, sizes)
    expected = {  # label -> elements each rank sends in one step
        "dp": {"grad_all_reduce": 2 * one},
        "zero1": {"grad_reduce_scatter": one, "param_all_gather": one},
        "zero2": {"grad_reduce_scatter": one, "param_all_gather": one},
        "zero3": {"param_all_gather_fwd": one, "param_all_gather_bwd": one, "grad_reduce_scatter": one},
    }
    for stage, labels in expected.items():
        by_label = run_size_only(stage, n, unit_sizes=sizes).traffic_by_label
        got = {label: t["sent_elements_per_rank"] for label, t in by_label.items() if label != "overflow_check"}
        assert got == {label: [count] * n for label, count in labels.items() if n > 1 or label in got}, stage


def _forward_only(comm, job):
    arena, mine, weights16, _, _ = zero3.init_state(comm, job)
    ctx = job.workload.begin_step(arena, 0, comm.rank)
    zero3.forward(comm, job, arena, weights16, mine, ctx)
    return job.memory.peak(comm.rank, "gathered")


@given(n=st.integers(1, 6), sizes=st.lists(st.integers(1, 40), min_size=2, max_size=5))
def test_zero3_forward_phase_peak_holds_the_prefetched_unit(n, sizes):
    """Catches: ZeRO-3's forward prefetch skipped (the backward would still set the overall peak). Expected from
    the schedule in zero_stages/stages/zero3.py: while unit u runs, unit u+1 is already gathered, 2 B per element."""
    job = size_only_job(n, unit_sizes=sizes)
    peaks = EmulatedWorld(n, CommLedger()).run(_forward_only, job)
    assert peaks == [2 * max(a + b for a, b in zip(sizes, sizes[1:]))] * n


@given(grad=st.lists(st.floats(1e-3, 1e3) | st.floats(-1e3, -1e-3), min_size=1, max_size=64),
       lr=st.sampled_from([1e-3, 1e-2, 0.1]))
def test_first_adam_step_moves_each_weight_by_lr_against_the_gradient_sign(grad, lr):
    """Catches: Adam's bias correction applied without its square root (torch-free). Kingma & Ba 2015, §2: at
    t = 1, m̂ = g and v̂ = g², so the step is lr·g/(|g| + eps) = lr·sign(g) up to eps/|g| <= 1e-5 relative."""
    g = np.array(grad, dtype=np.float32)
    config = AdamConfig(lr=lr)
    for step_fn in (adam_step, adam_step_reference):
        master, m, v = np.zeros_like(g), np.zeros_like(g), np.zeros_like(g)
        step_fn(master, g, m, v, 1, config)
        np.testing.assert_allclose(master, -lr * np.sign(g), rtol=2e-5)


def test_loss_scaler_resets_its_clean_count_on_overflow():
    """Catches: the clean-step counter not reset on overflow. GradScaler's rule (torch.cuda.amp): halve on
    overflow, double after growth_interval consecutive clean steps; with interval 2 from scale 8:
    clean -> 8 (1 clean), overflow -> 4 (count reset), clean -> 4 (1), clean -> 8 (2: grow)."""
    scaler = LossScaler(LossScaling("dynamic", init_scale=8.0, growth_interval=2))
    scales = []
    for overflow in (False, True, False, False, False, False):
        scaler.update(overflow)
        scales.append(scaler.scale)
    assert scales == [8.0, 4.0, 4.0, 8.0, 8.0, 16.0]


def test_gb_rounding_breaks_ties_upwards():
    """Catches: ties rounded to even. 250,000,000 B = 0.25 GB exactly; the lesson's rule prints 0.3
    (ties away from zero); ties-to-even would print 0.2."""
    assert format_gb(250_000_000) == "0.3"
    assert format_gb(350_000_000) == "0.4"  # and 0.35 -> 0.4 (the lesson's own example)


def _jit_off_module():
    """A fresh copy of ringemu._jit as it loads with RINGEMU_DISABLE_JIT=1 (its pure-numpy conversions)."""
    import os
    spec = importlib.util.spec_from_file_location("_jit_off_copy", ringemu._jit.__file__)
    module = importlib.util.module_from_spec(spec)
    saved = os.environ.get("RINGEMU_DISABLE_JIT")
    os.environ["RINGEMU_DISABLE_JIT"] = "1"
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del os.environ["RINGEMU_DISABLE_JIT"]
        else:
            os.environ["RINGEMU_DISABLE_JIT"] = saved
    return module


SIGNALLING = [0x7F800001, 0xFF800001, 0x7FA00000, 0x7F80E000]  # fp32 signalling NaNs (quiet bit 0x00400000 clear)


def test_jit_off_fp16_conversion_quiets_signalling_nans(monkeypatch):
    """Catches (under plain pytest, not only CI's JIT-off pass): the JIT-off fp32 -> fp16 conversion not quieting
    a signalling NaN. IEEE 754-2019 §6.2: converting a signalling NaN signals and delivers a quiet NaN; the
    top 10 payload bits are kept, as F16C's vcvtps2ph does: 0x7F800001 -> 0x7E00, 0x7FA00000 -> 0x7F00."""
    expected = [0x7E00, 0xFE00, 0x7F00, 0x7E07]
    off = _jit_off_module()
    assert not off.JIT_ENABLED
    assert [int(off.f32_to_half(np.uint32(b).view(np.float32))) for b in SIGNALLING] == expected
    monkeypatch.setattr(ringemu._jit, "JIT_ENABLED", False)  # buffers.cast reads it at call time
    values = np.array(SIGNALLING, dtype=np.uint32).view(np.float32)
    assert cast(values, np.float16).view(np.uint16).tolist() == expected
