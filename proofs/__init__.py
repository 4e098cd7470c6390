"""proofs: every claim of the ZeRO lesson as a checked proposition."""
__all__: list[str] = []
