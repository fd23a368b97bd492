"""Every python block of the README runs as written, and prints what the README says it prints."""

import re
from pathlib import Path

import torch

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    spaces = []
    for block in blocks:
        space = {"__name__": "__readme__"}
        exec(compile(block, str(README), "exec"), space)
        spaces.append(space)
    # the triangle example's commented outputs: 2κ(4/9, 1/9, 1/9) and R_eff = 2/3
    (triangle,) = [s for s in spaces if "energy" in s]
    expected = torch.tensor([4 / 9, 1 / 9, 1 / 9], dtype=torch.float64)
    torch.testing.assert_close(triangle["energy"] / 200, expected, rtol=1e-6, atol=1e-9)
    reff = triangle["effective_resistance"](triangle["sc"])[0, 1]
    assert abs(float(reff) - 2 / 3) < 1e-9
