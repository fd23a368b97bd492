"""The README's examples that need no model download run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_without_a_model_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    runnable = [b for b in blocks if "ToyLM(" in b]
    assert runnable, "the README lost its self-contained example"
    for block in runnable:
        exec(compile(block, str(README), "exec"), {})
