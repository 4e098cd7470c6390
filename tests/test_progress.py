"""Progress bars: on a terminal's stderr only, never with --json, never on stdout."""
import io
import os

import pytest

from ringemu.cli import main
from ringemu.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _tqdm():
    if os.environ.get("CI", "").lower() == "true":  # a dependency of ringemu: installed in CI
        import tqdm
        return tqdm
    return pytest.importorskip("tqdm", reason="tqdm (a dependency of ringemu) is not installed in this environment")


def test_a_bar_only_on_a_terminal_and_only_when_enabled():
    _tqdm()
    shown = Terminal()
    with progress_bar(3, "work", stream=shown) as bar:
        for _ in range(3):
            bar.update()
    assert "work:" in shown.getvalue() and "/3 [" in shown.getvalue()  # drawn, then cleared (leave=False)
    for stream, enabled in ((io.StringIO(), True), (Terminal(), False)):  # a pipe or a file; --json
        with progress_bar(3, "work", stream=stream, enabled=enabled) as bar:
            bar.update()
        assert stream.getvalue() == ""


def test_prove_shows_progress_on_a_terminal_but_not_with_json(monkeypatch, capsys):
    _tqdm()
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["prove", "--id", "M2", "C4"]) == 0
    assert "prove:" in terminal.getvalue() and "/2 [" in terminal.getvalue() and "M2" in terminal.getvalue()
    assert "prove" not in capsys.readouterr().out.splitlines()[0]  # stdout: the table only
    terminal.seek(0)
    terminal.truncate()
    assert main(["prove", "--id", "M2", "--json"]) == 0
    assert terminal.getvalue() == ""
