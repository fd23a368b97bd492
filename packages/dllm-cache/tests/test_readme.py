"""The README's CPU example runs as written (the LLaDA-8B one needs weights and a GPU)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_cpu_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    runnable = [b for b in blocks if "from_pretrained" not in b]
    assert runnable, "the README has no CPU example"
    for block in runnable:
        exec(compile(block, str(README), "exec"), {})
    assert "fewer block FLOPs" in capsys.readouterr().out
