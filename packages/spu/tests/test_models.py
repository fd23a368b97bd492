"""The transformers models: reverse-complement option, padding invariance, round trips, Trainer."""

import random

import pytest
import torch
from spu_dna import (
    DNATokenizer,
    SPUConfig,
    SPUForMaskedLM,
    SPUForSequenceClassification,
    SPUModel,
    reverse_complement_ids,
)
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer

TOK = DNATokenizer()


def _config(**kw):
    base = dict(d_model=16, n_layers=2, lpl_groups=4, dpl_max_len=64, dropout=0.0)
    return SPUConfig(**{**base, **kw})


def _seq(n, seed=0):
    rng = random.Random(seed)
    return "".join(rng.choice("ACGT") for _ in range(n))


def _revcomp(s):
    return s[::-1].translate(str.maketrans("ACGT", "TGCA"))


@pytest.mark.parametrize("pooling", ["mean", "saliency"])
def test_rc_equivariant_logits_are_identical(pooling):
    torch.manual_seed(0)
    model = SPUForSequenceClassification(_config(rc_equivariant=True, pooling=pooling)).eval()
    s = _seq(40)
    a = model(**TOK([s], return_tensors="pt")).logits
    b = model(**TOK([_revcomp(s)], return_tensors="pt")).logits
    assert torch.equal(a, b)
    # negative control: without the option the two strands disagree
    plain = SPUForSequenceClassification(_config(pooling=pooling)).eval()
    a = plain(**TOK([s], return_tensors="pt")).logits
    b = plain(**TOK([_revcomp(s)], return_tensors="pt")).logits
    assert not torch.allclose(a, b)


def test_rc_equivariant_masked_lm_maps_back_to_the_forward_strand():
    torch.manual_seed(0)
    model = SPUForMaskedLM(_config(rc_equivariant=True)).eval()
    s = _seq(30, seed=1)
    ids = TOK([s], return_tensors="pt")["input_ids"]
    fwd = model(input_ids=ids).logits
    rev = model(input_ids=reverse_complement_ids(ids)).logits
    perm = torch.tensor([0, 1, 2, 3, 4, 8, 7, 6, 5, 9])
    torch.testing.assert_close(rev.flip(1)[..., perm], fwd, atol=1e-6, rtol=1e-6)


def test_padding_changes_nothing_including_pooling():
    torch.manual_seed(0)
    for cls in (SPUForSequenceClassification, SPUForMaskedLM):
        model = cls(_config(pooling="mean")).eval()
        seqs = [_seq(40, 2), _seq(25, 3)]
        batch = TOK(seqs, padding=True, return_tensors="pt")
        alone = model(**TOK([seqs[1]], return_tensors="pt")).logits
        padded = model(**batch).logits[1:2]
        if cls is SPUForMaskedLM:
            padded = padded[:, :25]
        torch.testing.assert_close(padded, alone, atol=1e-5, rtol=1e-5)


def test_one_hot_input_matches_ids():
    torch.manual_seed(0)
    model = SPUModel(_config()).eval()
    ids = TOK([_seq(20, 4)], return_tensors="pt")["input_ids"]
    one_hot = torch.nn.functional.one_hot(ids - 5, 4).float()  # A C G T are ids 5..8
    torch.testing.assert_close(
        model(one_hot=one_hot).last_hidden_state, model(input_ids=ids).last_hidden_state
    )


def test_save_and_from_pretrained_round_trip_through_auto_classes(tmp_path):
    torch.manual_seed(0)
    model = SPUForMaskedLM(_config(rc_equivariant=True, spl_mode="gate")).eval()
    model.save_pretrained(tmp_path)
    TOK.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(config, SPUConfig) and config.spl_mode == "gate"
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert isinstance(tok, DNATokenizer)
    batch = tok([_seq(30, 5)], return_tensors="pt")
    saved = model.state_dict()
    assert all(torch.equal(saved[k], v) for k, v in loaded.state_dict().items())
    # the loaded weights are memory-mapped at whatever alignment the file gives them, and CPU SIMD
    # kernels round differently at another alignment (last bit); copied into fresh memory they give
    # bit-identical logits
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, rtol=0, atol=1e-6)
    with torch.no_grad():
        for parameter in loaded.parameters():
            parameter.data = parameter.data.clone()
    assert torch.equal(loaded(**batch).logits, model(**batch).logits)
    backbone = AutoModel.from_pretrained(tmp_path)
    assert isinstance(backbone, SPUModel)
    for name, value in model.spu.state_dict().items():
        assert torch.equal(backbone.state_dict()[name], value), name


def test_trainer_accepts_outputs(tmp_path):
    pytest.importorskip("accelerate")
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    seqs = [_seq(32, i) for i in range(16)]
    enc = TOK.encode_batch(seqs)
    data = [
        {
            "input_ids": enc["input_ids"][i],
            "attention_mask": enc["attention_mask"][i],
            "labels": i % 2,
        }
        for i in range(16)
    ]
    model = SPUForSequenceClassification(_config())
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=8, num_train_epochs=1,
        report_to=[], use_cpu=True, logging_steps=1, save_strategy="no",
    )  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data)
    before = [p.detach().clone() for p in model.parameters()]
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=False))
    pred = trainer.predict(data)
    assert pred.predictions.shape == (16, 2)


def test_rc_equivariant_one_hot_logits_are_identical():
    torch.manual_seed(0)
    model = SPUForSequenceClassification(_config(rc_equivariant=True)).eval()
    s = _seq(30, seed=5)

    def hot(seq):
        return torch.nn.functional.one_hot(torch.tensor(["ACGT".index(b) for b in seq]), 4)[None]

    a = model(one_hot=hot(s).float()).logits
    b = model(one_hot=hot(_revcomp(s)).float()).logits
    assert torch.equal(a, b)
    torch.testing.assert_close(a, model(**TOK([s], return_tensors="pt")).logits)


def test_rc_equivariant_padded_batch():
    torch.manual_seed(0)
    model = SPUForSequenceClassification(_config(rc_equivariant=True)).eval()
    seqs = [_seq(40, 6), _seq(27, 7)]
    batch = TOK(seqs, padding=True, return_tensors="pt")
    logits = model(**batch).logits
    # the reverse complement of the whole padded batch (padding now in front), with its mask flipped
    rc = model(
        input_ids=reverse_complement_ids(batch["input_ids"]),
        attention_mask=batch["attention_mask"].flip(1),
    ).logits
    assert torch.equal(logits, rc)
    alone = model(**TOK([seqs[1]], return_tensors="pt")).logits
    torch.testing.assert_close(logits[1:2], alone, atol=1e-5, rtol=1e-5)
