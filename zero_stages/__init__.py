"""zero_stages: DP, ZeRO-1, ZeRO-2 and ZeRO-3 (Rajbhandari et al. 2019, §5) on a Communicator."""
__all__: list[str] = []
