"""The README's python blocks run as written (the torchvision one where torchvision imports)."""

import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 2
    for block in blocks:
        if "torchvision" in block and importlib.util.find_spec("torchvision") is None:
            continue
        exec(compile(block, str(README), "exec"), {"__name__": "__readme__"})


def test_readme_torchvision_block_where_it_imports():
    pytest.importorskip("torchvision")
