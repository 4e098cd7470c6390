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


def test_faults_prints_a_readable_table_by_default():
    from ringemu.cli.faults import summary_table
    # a made-up summary: 10 trials, 3 of 4 integer faults found, 2 of 4 located, 1 of 1 stop named
    text = summary_table({"trials": 10, "integer_any_found": [3, 4], "integer_any_located": [2, 4],
                          "stop_located": [1, 1]}, 2, 5)
    lines = text.splitlines()
    assert lines[0].startswith("10 fault trials (2 per") and "seed 5" in lines[0]
    assert "count" in lines[1] and "share" in lines[1]
    assert lines[2].split()[-5:] == ["3", "/", "4", "75.0", "%"] and lines[3].split()[-3:-1] == ["4", "50.0"]
    assert lines[4].endswith("1 / 1  100.0 %")
    assert len({len(line) for line in lines[1:5]}) == 1  # the columns line up


def test_lesson_shows_progress_on_a_terminal_only(monkeypatch, tmp_path):
    _tqdm()
    import zero_stages.lesson.page as lesson
    monkeypatch.setattr(lesson, "RANKS_GRID", (1, 8))  # the command's grid, kept small here
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["lesson", "-o", str(tmp_path / "a.html"), "--ranks", "2"]) == 0
    assert "lesson" in terminal.getvalue() and "/5 [" in terminal.getvalue()
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    assert main(["lesson", "-o", str(tmp_path / "b.html"), "--ranks", "2"]) == 0
    assert pipe.getvalue() == ""
