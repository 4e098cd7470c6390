"""Steps that fail leave nothing half-updated (zero_stages.step_guard): for every stage and fault kind, a failed
step leaves each rank's 16-bit weights, master, m, v, step counter and loss scale as a run that stopped before
that step has them, and a retried step trains on to the bits of a run that never failed."""
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringemu.cli import main
from ringemu.faults.plan import FaultPlan
from zero_stages.api import StepFailed, train
from zero_stages.flat import FlatParams

N, UNITS, STEPS, FAIL_AT = 4, (10, 7), 3, 1  # the fault hits training step 1 of 3
# per stage: a collective it calls once per unit and step (so call = len(UNITS)·step + j lands in that step)
LABELS = {"dp": "grad_all_reduce", "zero1": "param_all_gather", "zero2": "grad_reduce_scatter",
          "zero3": "param_all_gather_bwd"}
KINDS = {"stop": "rank=2", "drop": "src=1,dst=2", "corrupt": "src=1,dst=2,bit=14,elem=1",
         "duplicate": "src=1,dst=2", "misroute": "src=1,dst=2,to=3"}


def _spec(stage: str, kind: str) -> str:
    return f"{kind}:label={LABELS[stage]},call={len(UNITS) * FAIL_AT + 1},step=1,{KINDS[kind]}"


def _run(stage, steps, faults=None, dtype="bf16"):
    return train(stage, N, steps, dtype, seed=3, unit_sizes=UNITS, micro_batch=2, faults=faults)


def _assemble(stage, states, key, dtype):
    """Rank states (per-unit buffers as held, padding included) -> the length-Ψ vector, each element taken from
    the rank that holds it (ZeRO shards: chunk r of each unit; DP: rank 0's whole unit)."""
    flat = FlatParams(UNITS, N)
    out = np.zeros(flat.psi, dtype=dtype)
    for r, state in states.items():
        for u in range(len(UNITS)):
            sl = slice(0, UNITS[u]) if stage == "dp" or (key == "weights16" and stage != "zero3") \
                else flat.shard_slice(u, r)
            out[flat.offsets[u] + sl.start:flat.offsets[u] + sl.stop] = state[key][u][:sl.stop - sl.start]
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("stage", sorted(LABELS))
def test_failed_step_leaves_every_rank_as_before_it(stage, kind):
    with pytest.raises(StepFailed) as info:
        _run(stage, STEPS, faults=[_spec(stage, kind)])
    failed = info.value
    assert failed.step == FAIL_AT and sorted(failed.states) == list(range(N))
    before = _run(stage, FAIL_AT)  # the expected state: a run that stopped before the failing step
    wire = before.weights16.dtype
    for key, ref, dtype in (("weights16", before.weights16, wire), ("master", before.master, np.float32),
                            ("m", before.m, np.float32), ("v", before.v, np.float32)):
        got = _assemble(stage, failed.states, key, dtype)
        assert got.view(np.uint8).tobytes() == ref.view(np.uint8).tobytes(), key
    assert all(s["step_count"] == FAIL_AT for s in failed.states.values())  # bf16: no step skipped
    assert all(s["loss_scale"] == before.loss_scales[-1] for s in failed.states.values())


@pytest.mark.parametrize("stage", sorted(LABELS))
def test_retried_step_trains_on_to_the_bits_of_a_run_that_never_failed(stage):
    kind = sorted(KINDS)[sorted(LABELS).index(stage)]
    plan = FaultPlan((_spec(stage, kind),), retry=True)
    retried, clean = _run(stage, STEPS, faults=plan), _run(stage, STEPS)
    assert len(plan.fired) == 1
    for key in ("weights16", "master", "m", "v"):
        assert getattr(retried, key).tobytes() == getattr(clean, key).tobytes(), key
    assert len(retried.history) == STEPS
    for h, c in zip(retried.history, clean.history):
        assert h["master"].tobytes() == c["master"].tobytes()


def test_fp16_loss_scale_and_skipped_steps_are_rolled_back():
    """fp16 with dynamic scaling: the first steps overflow and halve the scale; the rolled-back scaler is the
    one a run stopped before the failing step ends with."""
    spec = "drop:label=overflow_check,call=1,step=0,src=0,dst=1"  # the flag's all-reduce of training step 1
    with pytest.raises(StepFailed) as info:
        _run("zero2", STEPS, faults=[spec], dtype="fp16")
    before = _run("zero2", 1, dtype="fp16")
    clean = _run("zero2", 2, dtype="fp16")
    for state in info.value.states.values():
        assert state["loss_scale"] == clean.loss_scales[1]  # the scale step 1 started with
        assert state["step_count"] == sum(not s for s in before.skipped_steps)


def test_a_fault_that_never_fires_is_an_error():
    with pytest.raises(ValueError, match=r"never fired: zero3 made no matching collective call \(labels seen: "):
        _run("zero3", 1, faults=["stop:label=grad_all_reduce,step=0,rank=1"])


def test_cli_done_when(capsys):
    """The issue's command: one line naming rank 5, the collective and the step; exit 1."""
    code = main(["zero", "--stage", "zero3", "--ranks", "8", "--steps", "6", "--fault",
                 "stop:rank=5,label=param_all_gather_bwd,step=2"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert "rank 5 stopped" in err and "'param_all_gather_bwd'" in err and "step 2 " in err
    assert "rolled back on every rank" in err
    assert main(["zero", "--stage", "all", "--ranks", "4", "--fault", "stop:rank=1,step=0"]) == 2
    assert main(["zero", "--stage", "zero1", "--ranks", "4", "--backend", "torch", "--on-fault", "retry", "--fault",
                 "stop:rank=1,step=0"]) == 2
    assert "--on-fault retry runs on the emulator backend only" in capsys.readouterr().err
    assert main(["zero", "--stage", "zero1", "--ranks", "4", "--on-fault", "retry"]) == 2
    assert "--on-fault needs --fault" in capsys.readouterr().err
    assert main(["zero", "--stage", "zero1", "--ranks", "4", "--steps", "2", "--on-fault", "retry", "--fault",
                 "corrupt:label=param_all_gather,step=0,src=0,dst=1,bit=3"]) == 0
    assert "parity with DP yes" in capsys.readouterr().out


# per stage: the labels it calls once per unit in every training step (bf16: no overflow flag)
STAGE_LABELS = {"dp": ("grad_all_reduce",), "zero1": ("grad_reduce_scatter", "param_all_gather"),
                "zero2": ("grad_reduce_scatter", "param_all_gather"),
                "zero3": ("param_all_gather_fwd", "param_all_gather_bwd", "grad_reduce_scatter")}


@lru_cache(maxsize=None)
def _stopped_before(stage: str, steps: int):
    return _run(stage, steps)


@given(st.sampled_from(sorted(STAGE_LABELS)), st.data())
def test_any_fault_anywhere_rolls_back_to_the_state_before_its_step(stage, data):
    """Whatever the fault, collective, call and link, the failing step leaves every rank as a run stopped before
    that step (ring schedules on 4 ranks: rank r sends to r + 1 in every step)."""
    label = data.draw(st.sampled_from(STAGE_LABELS[stage]))
    step_t = data.draw(st.integers(0, STEPS - 1))
    call = len(UNITS) * step_t + data.draw(st.integers(0, len(UNITS) - 1))
    kind = data.draw(st.sampled_from(sorted(KINDS)))
    s = data.draw(st.integers(0, (6 if label == "grad_all_reduce" else 3) - 1))
    src = data.draw(st.integers(0, N - 1))
    where = {"stop": f"rank={src}", "drop": "", "duplicate": "", "corrupt": f"bit={data.draw(st.integers(0, 15))}",
             "misroute": f"to={data.draw(st.sampled_from([r for r in range(N) if r != (src + 1) % N]))}"}[kind]
    link = "" if kind == "stop" else f",src={src},dst={(src + 1) % N}"
    spec = f"{kind}:label={label},call={call},step={s}{link}" + (f",{where}" if where else "")
    with pytest.raises(StepFailed) as info:
        _run(stage, STEPS, faults=[spec])
    assert info.value.step == step_t
    before = _stopped_before(stage, step_t)  # steps=0: the initial states
    assert all(state["step_count"] == step_t for state in info.value.states.values())
    for key in ("weights16", "master", "m", "v"):
        got = _assemble(stage, info.value.states, key, getattr(before, key).dtype)
        assert got.tobytes() == getattr(before, key).tobytes(), (spec, key)
