"""The README's python blocks run as written."""

import re
import warnings
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    for block in blocks:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an example that warns is a broken example
            exec(compile(block, str(README), "exec"), {})
