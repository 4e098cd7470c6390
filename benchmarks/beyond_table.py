"""Regenerates the numbers of docs/zero.md's section "Beyond the four stages": runs each command shown there and
prints its output (per-rank memory rows left out), so the page is pasted from a run, never typed.

    python benchmarks/beyond_table.py            # from the repository root
"""
import re
import subprocess
import sys

COMMANDS = [
    "zero --stage hsdp --ranks 16 --ranks-per-node 8 --grads blocks",
    "zero --stage zeropp --ranks 16 --ranks-per-node 8",
    "zero --stage zeropp --ranks 16 --ranks-per-node 8 --zeropp hpz",
    "zero --stage offload --ranks 8",
    "memory --anchor --ranks 64 --ranks-per-node 8",
    "audit torch --script examples/fsdp2_hsdp.py --ranks 8 --ranks-per-node 4",
    "prove --id XB1 --id XB2 --id XB3",
]
_RANK_ROW = re.compile(r"^\s*\d+\s+\d+/")  # a per-rank row of the memory table


def main() -> int:
    for command in COMMANDS:
        out = subprocess.run([sys.executable, "-m", "ringemu", *command.split()], capture_output=True, text=True)
        print(f"$ ringemu {command}")
        for line in out.stdout.splitlines():
            if not _RANK_ROW.match(line) and not line.startswith("rank "):
                print(line)
        print(f"(exit status {out.returncode})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
