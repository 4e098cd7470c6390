"""Peer implementations of the same collectives, each a script printing one JSON object (see benchmarks/run.py)."""
