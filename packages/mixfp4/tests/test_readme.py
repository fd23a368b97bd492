"""The README's example runs as written (on a smaller weight)."""

import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    text = README.read_text()
    code = re.search(r"## Example\n\n```python\n(.*?)```", text, re.S).group(1)
    code = code.replace("torch.randn(4096, 4096)", "torch.randn(64, 256)")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {})
    assert (tmp_path / "model.safetensors").exists()
    assert "e1m2_fraction" in capsys.readouterr().out
