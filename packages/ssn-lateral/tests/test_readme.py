"""The README's examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    out = capsys.readouterr().out
    assert "contrast 0.05" in out and "contrast 2.0" in out
    r = namespace["r"]
    assert abs(float(r[0, 0]) - 9.607) < 0.005 and abs(float(r[0, 1]) - 11.140) < 0.005
    assert bool(namespace["net"].is_isn(r)[0]) and bool(namespace["net"].is_stable(r)[0])
