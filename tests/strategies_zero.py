"""Hypothesis strategies for the ZeRO stage tests: world sizes, unit sizes (including sizes not divisible by N
and units smaller than N), seeds, step counts, 16-bit types, gradient sources; and one expected value they share."""
from hypothesis import settings
from hypothesis import strategies as st

__all__ = ["n_ranks", "unit_sizes", "seeds", "steps", "wire_dtypes", "grad_sources", "big_psi", "zero3_expected_peak",
           "examples"]

n_ranks = st.integers(min_value=1, max_value=16)
unit_sizes = st.lists(st.integers(min_value=1, max_value=48), min_size=1, max_size=4).map(tuple)
seeds = st.integers(min_value=0, max_value=2 ** 32 - 1)
steps = st.integers(min_value=1, max_value=5)
wire_dtypes = st.sampled_from(["bf16", "fp16"])
grad_sources = st.sampled_from(["model", "blocks"])
big_psi = st.integers(min_value=1, max_value=10 ** 12)


def examples(fraction: float) -> int:
    """A share of the active profile's max_examples (default 25, ci 150) for the slower real-number tests."""
    return max(5, int(settings.default.max_examples * fraction))


def zero3_expected_peak(unit_sizes, n_ranks, activation_bytes=0):
    """ZeRO-3's peak bytes per rank with prefetching, derived by walking zero_stages/stages/zero3.py's schedule:
    persistent shards P = 16·Σ ceil(S_u/N); the forward holds units u and u+1 (2 B each); the backward holds
    units u and u−1 plus unit u's 16-bit gradient bucket: P + 2·max_u(2·S_u + S_{u−1}). The backward term is
    never below the forward one. Activations (size-only runs) are live through forward and backward."""
    shards = 16 * sum(-(-s // n_ranks) for s in unit_sizes)
    previous = (0, *unit_sizes[:-1])
    return shards + activation_bytes + 2 * max(2 * s + p for s, p in zip(unit_sizes, previous))
