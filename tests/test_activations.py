"""Activations and recomputation (Korthikanti et al. 2022, §4, Table 2) as a MemoryLedger category recorded by
the stages' size-only runs; claim M8 (activations do not depend on N) proved from the ledger."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringemu.cli import main
from zero_stages import STAGES, ActivationShape, run_size_only
from zero_stages.memory.anchor import ANCHOR_PSI, ANCHOR_UNIT_SIZES, anchor_activations
from zero_stages.workload import SizeOnlyWorkload

shapes = st.builds(ActivationShape, seq=st.integers(1, 64), batch=st.integers(1, 4), hidden=st.integers(1, 64),
                   layers=st.integers(1, 6), recompute=st.sampled_from(("none", "selective", "full")),
                   heads=st.integers(1, 8))


@given(stage=st.sampled_from(STAGES), shape=shapes, units=st.lists(st.integers(1, 300), min_size=1, max_size=5),
       ns=st.lists(st.integers(1, 24), min_size=2, max_size=3, unique=True))
def test_activations_never_depend_on_n(stage, shape, units, ns):
    """Claim M8, from the ledger: every rank's peak 'activations' bytes are the same at every N (and not zero, so
    the comparison is not vacuous)."""
    seen = set()
    for n in ns:
        report = run_size_only(stage, n, unit_sizes=units, activations=shape)
        seen |= {row["activations"]["peak"] for row in report.memory_by_category_per_rank}
        seen |= set(report.activation_peak_bytes_per_rank)
    assert len(seen) == 1 and seen.pop() > 0


@given(n_units=st.integers(1, 80), n_layers=st.integers(1, 80))
def test_every_layer_belongs_to_exactly_one_unit(n_units, n_layers):
    work = SizeOnlyWorkload((1,) * n_units, (1,) * n_layers)
    layers = [l for u in range(n_units) for l in work.layers_of_unit(u)]
    assert layers == list(range(n_layers))
    assert all(l * n_units // n_layers == u for u in range(n_units) for l in work.layers_of_unit(u))


def test_table_2_examples():
    # hand arithmetic: s=2048, b=1, h=12288, a=96 (GPT-3 175B, Korthikanti et al. Table 3): s·b·h = 25,165,824;
    # none: s·b·h·(34 + 5·96·2048/12288) = 25,165,824·114; selective: ·34; full: ·2 (per layer, bytes)
    gpt3 = dict(seq=2048, batch=1, hidden=12288, layers=96, heads=96)
    assert ActivationShape(**gpt3, recompute="none").bytes_per_layer() == 2_868_903_936
    assert ActivationShape(**gpt3, recompute="selective").bytes_per_layer() == 855_638_016
    assert ActivationShape(**gpt3, recompute="full").bytes_per_layer() == 50_331_648


def test_anchor_activations_through_the_ledger():
    # lesson claim M9: 34·4096·1·5120·64 = 45,634,027,520 B (45.6 GB) selective, 2·4096·5120·64 =
    # 2,684,354,560 B (2.7 GB) full, hand-multiplied
    for recompute, expected in (("selective", 45_634_027_520), ("full", 2_684_354_560)):
        report = run_size_only("zero3", 8, psi=ANCHOR_PSI, activations=anchor_activations(recompute))
        assert report.activation_peak_bytes_per_rank == [expected] * 8
        # ZeRO-3 model states 16Ψ/8 = 55,562,855,904 B: 80e9 − that = 24,437,144,096 B left (claim M7)
        assert 80 * 10 ** 9 - report.model_state_bytes_per_rank[0] == 24_437_144_096


def test_anchor_units_sum_to_psi():
    assert sum(ANCHOR_UNIT_SIZES) == ANCHOR_PSI and max(ANCHOR_UNIT_SIZES[1:-1]) == 372_000_000


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(seq=0, batch=1, hidden=1, layers=1), ValueError, "seq"),
    (dict(seq=1, batch=1, hidden=1, layers=1, recompute="some"), ValueError, "recompute"),
    (dict(seq=1, batch=1, hidden=1, layers=1, recompute="none"), ValueError, "heads"),
    (dict(seq=1.5, batch=1, hidden=1, layers=1), TypeError, "seq"),
])
def test_bad_shapes(kwargs, error, match):
    with pytest.raises(error, match=match):
        ActivationShape(**kwargs)


def test_both_activation_inputs_refused():
    with pytest.raises(ValueError, match="not both"):
        run_size_only("dp", 2, psi=10, activation_bytes=5, activations=anchor_activations())


def test_cli_memory_two_verdicts(capsys):
    argv = ["memory", "--params", str(ANCHOR_PSI), "--ranks", "8", "--seq", "4096", "--batch", "1", "--hidden",
            "5120", "--layers", "64", "--recompute", "full"]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    z3 = out["stages"][3]
    assert z3["activation_peak_bytes_per_rank"] == [2_684_354_560] * 8
    # Ψ as one unit: ZeRO-3 gathers the whole model (2Ψ B) at once, so the peak passes the card although the
    # model states (16Ψ/8) do not (claim M6 vs M10)
    assert z3["model_states_fit"] and not z3["peak_fits"]
    assert sum(z3["at_peak_by_category"].values()) == z3["peak_bytes"]
    assert any("Korthikanti" in a for a in out["assumptions"])
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "states fit" in text and "peak fits" in text and "assumes:" in text


@pytest.mark.parametrize("argv, flag", [(["--seq", "4096"], "--batch"), (["--heads", "8"], "--heads"),
                                        (["--seq", "1", "--batch", "1", "--hidden", "1", "--layers", "1",
                                          "--recompute", "none"], "--heads")])
def test_cli_memory_activation_flags(argv, flag, capsys):
    assert main(["memory", "--params", "100", "--ranks", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ringemu: error:") and flag in err and len(err.strip().splitlines()) == 1


# -- the shape's bounds and its words ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["seq", "batch", "hidden"])
def test_each_dimension_is_bounded_at_2_to_the_40(name):
    """s, b, h in [1, 2^40], the bound included; the message names the dimension and the bound."""
    base = dict(seq=1, batch=1, hidden=1, layers=1)
    assert getattr(ActivationShape(**dict(base, **{name: 2 ** 40})), name) == 2 ** 40
    with pytest.raises(ValueError) as err:
        ActivationShape(**dict(base, **{name: 2 ** 40 + 1}))
    assert str(err.value) == f"{name} must be an integer >= 1 and <= 1_099_511_627_776, got 1099511627777"


def test_layers_and_heads_are_bounded():
    """L in [1, 2^15] and a in [1, 2^40], bounds included."""
    assert ActivationShape(1, 1, 1, 2 ** 15).layers == 2 ** 15
    with pytest.raises(ValueError, match=r"^layers must be an integer >= 1 and <= 32_768, got 32769$"):
        ActivationShape(1, 1, 1, 2 ** 15 + 1)
    assert ActivationShape(1, 1, 1, 1, "none", heads=2 ** 40).heads == 2 ** 40
    for heads in (0, 2 ** 40 + 1):
        with pytest.raises(ValueError, match=r"^heads must be an integer >= 1 and <= 1_099_511_627_776, got "):
            ActivationShape(1, 1, 1, 1, "none", heads=heads)


def test_recompute_and_heads_are_named_when_wrong():
    with pytest.raises(ValueError) as err:
        ActivationShape(1, 1, 1, 1, "some")
    assert str(err.value) == "recompute must be one of none, selective, full; got 'some'"
    with pytest.raises(ValueError) as err:
        ActivationShape(1, 1, 1, 1, "none")
    assert str(err.value) == ("heads must be given with recompute='none': s·b·h·(34 + 5·a·s/h) needs a, the number "
                              "of attention heads")
    assert ActivationShape(1, 1, 1, 1, "selective", heads=3).heads == 3  # given but not needed: kept


# 2^63 − 1 = 7²·73·127·337·92737·649657 = 2359 · (34·h + 5·a·2359) with these h and a (worked out by hand)
_EXACT = dict(seq=2359, batch=1, hidden=1_099_511_621_922, layers=1, recompute="none", heads=328_315_541_975)


def test_the_byte_total_may_reach_2_to_the_63_minus_1_but_not_pass_it():
    """Byte counts are aggregated in int64: a shape of exactly 2^63 − 1 B is accepted, one byte-step more is
    refused with the shape in the message."""
    assert ActivationShape(**_EXACT).total_bytes() == 2 ** 63 - 1
    with pytest.raises(ValueError) as err:
        ActivationShape(**dict(_EXACT, hidden=_EXACT["hidden"] + 1))
    assert str(err.value) == ("activations of 9.223e+18 B per rank (s = 2359, b = 1, h = 1099511621923, L = 1) "
                              "exceed 2^63 - 1 B; make s, b, h or L smaller")


def test_a_shape_under_another_recomputation_keeps_everything_else():
    shape = ActivationShape(2, 3, 5, 7, "none", heads=4)
    assert shape.with_recompute("full") == ActivationShape(2, 3, 5, 7, "full", 4)
    assert shape.layer_bytes() == (34 * 30 + 5 * 4 * 2 * 2 * 3,) * 7 and shape.total_bytes() == 7 * 1260


def test_the_figure_states_its_formula_and_assumptions():
    """What ``ringemu memory`` prints under "assumes:": the formula of the kind, the paper, the shape with the
    bytes per layer and per rank (34·4096·5120 = 713,031,680 B; × 64 = 45,634,027,520 B), N-independence and
    when each layer's activations are held."""
    shape = ActivationShape(4096, 1, 5120, 64, "selective")
    assert [ActivationShape(1, 1, 1, 1, k, heads=1).formula() for k in ("none", "selective", "full")] == \
        ["s·b·h·(34 + 5·a·s/h)", "34·s·b·h", "2·s·b·h"]
    assert shape.assumptions() == [
        "activations per layer 34·s·b·h bytes (selective recomputation), Korthikanti et al. 2022 (arXiv "
        "2205.05198) §4, Table 2: 16-bit activations, no tensor or sequence parallelism",
        "s = 4,096, b = 1, h = 5,120, L = 64: 713,031,680 B per layer, 45,634,027,520 B per rank",
        "each rank keeps the activations of its own micro-batch: the figure does not depend on N",
        "layer l's activations are held from the forward of unit ⌊l·U/L⌋ (U units) to that unit's backward"]
    assert ActivationShape(1, 1, 1, 1, "none", heads=1_000).assumptions()[1].endswith(
        ", a = 1,000: 5,034 B per layer, 5,034 B per rank")
    assert shape.as_dict() == {"seq": 4096, "batch": 1, "hidden": 5120, "layers": 64, "heads": None,
                               "recompute": "selective", "bytes_per_layer": 713_031_680,
                               "total_bytes": 45_634_027_520, "formula": "34·s·b·h"}
