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


def test_readme_generate_example_runs_and_is_bounded(capsys):
    """The ``generate`` example as written, on a tiny untrained Llama: its loop ends within its
    bound (an untrained model finds few valid rows) and its check holds."""
    import ast

    import pytest

    pytest.importorskip("llguidance")
    pytest.importorskip("transformers")
    from shared_core.data import bpe_tokenizer
    from shared_core.models import tiny_llama

    tok = bpe_tokenizer(512)
    model = tiny_llama(vocab_size=len(tok), hidden_size=32, num_layers=1, num_heads=2, seed=0)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    setup = next(b for b in blocks if "LLGuidanceConstraint.from_grammar(" in b)
    example = next(b for b in blocks if "CARSLogitsProcessor(grammar)" in b)
    # The setup block up to the grammar (its own sampling is the sampler's, tested elsewhere).
    body = ast.parse(setup).body
    upto = next(i for i, s in enumerate(body) if "grammar" in ast.unparse(s).split("=")[0]) + 1
    code = ast.unparse(ast.Module(body=body[:upto], type_ignores=[]))
    code = code.replace("AutoTokenizer.from_pretrained('path/to/local/model')", "TOK")
    code = code.replace("AutoModelForCausalLM.from_pretrained('path/to/local/model')", "MODEL")
    ns = {"TOK": tok, "MODEL": model}
    exec(compile(code, str(README), "exec"), ns)
    exec(compile(example, str(README), "exec"), ns)
    assert ns["proc"].attempts <= 200 and "valid of" in capsys.readouterr().out
