"""LLaDA parity (issue 27 §3) on LLaDA-shaped remote code loaded with ``trust_remote_code``.

``llada_remote/`` holds module code written after LLaDA-8B's ``modeling_llada.py``: same module
names, SDPA with ``attn_mask=None`` and no ``logits_to_keep``. A tiny random checkpoint of it is
saved to a local folder and loaded through ``AutoModel.from_pretrained(..., trust_remote_code=True)``,
the path a user of ``GSAI-ML/LLaDA-8B-Instruct`` takes.
"""

import json
import shutil
from pathlib import Path

import pytest
import torch
from dllm_cache import DLLMCacheConfig, apply_dllm_cache, generate

MASK = 3
HERE = Path(__file__).resolve().parent / "llada_remote"


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    from transformers import AutoConfig, AutoModel

    folder = tmp_path_factory.mktemp("llada-tiny")
    for name in ("configuration_llada.py", "modeling_llada.py"):
        shutil.copy(HERE / name, folder / name)
    config = {
        "model_type": "llada",
        "architectures": ["LLaDAModelLM"],
        "auto_map": {
            "AutoConfig": "configuration_llada.LLaDAConfig",
            "AutoModel": "modeling_llada.LLaDAModelLM",
        },
        "d_model": 32, "n_heads": 4, "n_layers": 3, "mlp_hidden_size": 64,
        "vocab_size": 48, "embedding_size": 48, "mask_token_id": MASK,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    cfg = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    AutoModel.from_config(cfg, trust_remote_code=True).save_pretrained(folder)
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    assert type(model).__name__ == "LLaDAModelLM"
    return model


GEN = dict(mask_id=MASK, gen_length=8, block_length=8, steps=8)


def _padded(prompts):
    rows = [prompts(1, n, seed=i) for i, n in enumerate([14, 9, 12])]
    P = 14
    batch = torch.zeros(3, P, dtype=torch.long)
    mask = torch.zeros(3, P, dtype=torch.long)
    for i, r in enumerate(rows):
        batch[i, P - r.shape[1] :], mask[i, P - r.shape[1] :] = r, 1
    return batch, mask


def test_identity_config_equals_the_remote_model(llada, prompts):
    x = prompts(2, 12)
    plain = generate(llada, x, **GEN)
    with apply_dllm_cache(llada, DLLMCacheConfig(1, 1, 0.25)) as handle:
        assert handle.adapter.name == "llada"
        assert torch.equal(generate(llada, x, **GEN, cache=handle.cache), plain)


def test_padding_follows_the_model_by_default(llada, prompts):
    # LLaDA's SDPA gets attn_mask=None: uncached, padding is attended to. The cache must do
    # the same by default, or padded batches differ even at Kp = Kr = 1 (0.1 did).
    batch, mask = _padded(prompts)
    plain = generate(llada, batch, mask, **GEN)
    assert torch.equal(plain, generate(llada, batch, **GEN))  # the model ignores the mask
    with apply_dllm_cache(llada, DLLMCacheConfig(1, 1, 0.0)) as handle:
        assert handle.cache.honours_padding is False
        assert torch.equal(generate(llada, batch, mask, **GEN, cache=handle.cache), plain)
    # padding-aware attention is the option, and it changes the padded rows
    with apply_dllm_cache(llada, DLLMCacheConfig(1, 1, 0.0, padding="mask")) as handle:
        masked = generate(llada, batch, mask, **GEN, cache=handle.cache)
    assert not torch.equal(masked, plain)


def test_lm_head_runs_on_response_rows_only_under_the_cache(llada, prompts):
    x = prompts(2, 20)
    rows_seen = []
    hook = llada.model.transformer.ff_out.register_forward_hook(
        lambda m, args, out: rows_seen.append(args[0].shape[1])
    )
    try:
        plain = generate(llada, x, **GEN)
        n_plain = len(rows_seen)
        with apply_dllm_cache(llada, DLLMCacheConfig(1, 1, 0.0)) as handle:
            cached = generate(llada, x, **GEN, cache=handle.cache)
        # outside a generation the patched norm passes the whole sequence through
        assert llada(torch.cat([x, x], 1)).logits.shape[1] == 40
    finally:
        hook.remove()
    assert set(rows_seen[:n_plain]) == {28}  # uncached: LLaDA's head over all 28 rows
    assert set(rows_seen[n_plain : n_plain + 8]) == {8}  # cached: the 8 response rows
    assert torch.equal(cached, plain)
    assert "forward" not in llada.model.transformer.ln_f.__dict__  # remove() restored it
