"""The LLM evaluation script on a tiny random Llama saved to disk (transformers import: slow)."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).parents[1] / "scripts" / "eval_llm.py"


def test_eval_llm_script_runs_on_a_local_model(tmp_path):
    pytest.importorskip("transformers")
    from shared_core.data import bpe_tokenizer
    from shared_core.models import tiny_llama, tiny_llama_config

    tokenizer = bpe_tokenizer(300, corpus_bytes=50_000)
    model = tiny_llama(tiny_llama_config(len(tokenizer), hidden_size=32, num_heads=2), seed=0)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    text = tmp_path / "text.txt"
    text.write_text("def add(a, b):\n    return a + b\n" * 200)
    spec = importlib.util.spec_from_file_location("eval_llm", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "out.json"
    ppl = module.main(["--model", str(tmp_path / "model"), "--text", str(text), "--seq-len", "64",
                       "--max-windows", "4", "--out", str(out)])  # fmt: skip
    assert set(ppl) == {"fp", "nvfp4", "mixfp4", "mxfp4"} and out.exists()
    assert all(v > 1 for v in ppl.values())
