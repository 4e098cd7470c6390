"""Property: every public entry point and every CLI subcommand answers malformed input cleanly (harness and
outcome rules in tests/fuzzing.py): the library raises ValueError/TypeError naming the argument, the CLI prints
one ``ringemu: error:`` line and exits 2, nothing raises anything else, prints a traceback or runs for long."""
import pytest
from hypothesis import given, settings

from fuzzing import SUBCOMMANDS, call_cli, call_library, cli_examples, is_bad, library_entry_points, library_examples

POINTS = {p.name: p for p in library_entry_points()}


@pytest.mark.parametrize("name", sorted(POINTS))
def test_library_entry_point_refuses_malformed_arguments(name):
    point = POINTS[name]

    @settings(max_examples=25)
    @given(library_examples(point))
    def check(example):
        arg, value = example
        outcome = call_library(point, arg, value)
        assert not is_bad(outcome), f"{name}({arg}={value!r}): {outcome}"

    check()


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_cli_subcommand_refuses_malformed_flags(command):
    @settings(max_examples=25)
    @given(cli_examples(command))
    def check(argv):
        outcome = call_cli(argv)
        assert not is_bad(outcome), f"ringemu {' '.join(argv)}: {outcome}"

    check()
