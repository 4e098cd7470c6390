"""Sharded checkpoints: one file per rank and a manifest (:mod:`~zero_stages.checkpoint.format`), written and read
back by :mod:`~zero_stages.checkpoint.save_load`, which resumes a run where it stopped with DP parity intact.

May import the stages' API and foundations; the commands import it, never the other way round.
"""
__all__: list[str] = []
