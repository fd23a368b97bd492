"""The README's example runs as written, on a tiny Llama and real peft adapters saved locally."""

import re
from pathlib import Path

from lora_testmodels import make_llama, train_peft_adapter

README = Path(__file__).parents[1] / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    from peft import PeftModel

    code = re.search(r"## Example\n\n.*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    make_llama().save_pretrained(tmp_path / "base")
    for i, (rank, alpha) in enumerate([(2, 4.0), (3, 6.0)]):
        train_peft_adapter(tmp_path / "adapters" / f"a{i}", rank, alpha, False, seed=i)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "'kept'" in out and "True" in out
    assert (tmp_path / "merged-model" / "model.safetensors").exists()
    PeftModel.from_pretrained(make_llama(), str(tmp_path / "merged-lora"))  # peft loads the export
