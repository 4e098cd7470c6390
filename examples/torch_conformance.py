"""ringemu's own torch backend through the conformance suite: N gloo processes per example, ``ring`` and
``native`` algorithms (``docs/testing.md``). Needs ``ringemu[torch]``."""
import sys

from ringemu.worlds.torch_launch import TorchWorld
from ringemu.testing.conformance import check_communicator


def main() -> int:
    ok = True
    for algorithm in ("ring", "native"):
        report = check_communicator(lambda n: TorchWorld(n, algorithm=algorithm, timeout=120),
                                    name=f"TorchWorld(algorithm={algorithm!r})", min_ranks=4, max_ranks=5,
                                    max_numel=40, min_numel=16, max_examples=4,
                                    dtypes=("int32", "int64", "fp32", "bf16"))
        print(report.text())
        ok = ok and report.ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
