"""Tiny models and real peft adapter folders for the tests (a plain module: importable under importlib mode)."""

import torch

VOCAB = 24
LLAMA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# (rank, alpha, rsLoRA): heterogeneous ranks and one rsLoRA adapter.
ADAPTERS = ((2, 8.0, False), (4, 4.0, True), (3, 6.0, False))


def make_llama(seed: int = 0):
    from shared_core.models import tiny_llama

    return tiny_llama(
        vocab_size=VOCAB, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=24, seed=seed
    ).eval()


def make_mlp(seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 4))


def train_peft_adapter(folder, rank, alpha, rslora, seed):
    """A real peft LoRA on the tiny Llama: a few AdamW steps on a seeded token task, saved."""
    from peft import LoraConfig, get_peft_model

    model = make_llama()
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        use_rslora=rslora,
        target_modules=list(LLAMA_MODULES),
        task_type="CAUSAL_LM",
        lora_dropout=0.0,
    )
    peft_model = get_peft_model(model, config)
    torch.manual_seed(seed)
    # peft starts B at 0; a random B makes every module carry a non-trivial ΔW from the start.
    for name, p in peft_model.named_parameters():
        if "lora_B" in name:
            p.data.normal_(0, 0.2)
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(5):
        ids = torch.randint(0, VOCAB, (4, 8), generator=generator)
        loss = peft_model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    peft_model.save_pretrained(folder)
    return folder
