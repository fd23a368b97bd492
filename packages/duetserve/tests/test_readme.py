"""The README's python example runs as written and prints what the README shows."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_as_written(capsys):
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, str(README), "exec"), {})
    printed = capsys.readouterr().out
    shown = re.search(r"prints\n\n```text\n(.*?)```", text, re.S).group(1)
    assert printed == shown
