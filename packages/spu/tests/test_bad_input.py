"""Spec section 8: bad input gets a clear error at the boundary (and the tokenizer's rules)."""

import re
import warnings

import pytest
import spu_dna.functional as functional
import torch
from spu_dna import DNATokenizer, SPUConfig, SPUForSequenceClassification, SPUModel
from spu_dna.layers import DomainPlasticity

TOK = DNATokenizer()


def _model(**kw):
    cfg = dict(d_model=16, n_layers=1, lpl_groups=4, lpl_kernel=9, dpl_max_len=32, dropout=0.0)
    return SPUModel(SPUConfig(**{**cfg, **kw})).eval()


def test_characters_outside_acgtn_are_listed():
    with pytest.raises(ValueError, match=r"\['1', 'R', 'Y'\]"):
        TOK("ACGRY1")
    with pytest.raises(ValueError, match=r"\[' '\]"):
        TOK.encode_batch(["ACG T"])


def test_unknown_n_maps_them_and_lowercase_is_uppercased():
    tok = DNATokenizer(unknown="N")
    assert tok("acRy")["input_ids"] == [5, 6, 9, 9]
    assert tok.encode_batch(["acRy"])["input_ids"].tolist() == [[5, 6, 9, 9]]
    assert TOK("acgtn")["input_ids"] == TOK("ACGTN")["input_ids"] == [5, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="unknown must be one of"):
        DNATokenizer(unknown="skip")


def test_encode_batch_matches_the_transformers_path():
    seqs = ["ACGTNacgt", "GGC", "tTaA"]
    fast = TOK.encode_batch(seqs)
    slow = TOK(seqs, padding=True, return_tensors="pt")
    assert torch.equal(fast["input_ids"], slow["input_ids"])
    assert torch.equal(fast["attention_mask"], slow["attention_mask"])


def test_length_above_dpl_max_len():
    model = _model()
    ids = TOK(["A" * 40], return_tensors="pt")["input_ids"]
    with pytest.raises(ValueError, match="40 exceeds dpl_max_len=32"):
        model(input_ids=ids)
    assert (
        _model(length_extrapolation="interpolate")(input_ids=ids).last_hidden_state.shape[1] == 40
    )


def test_padding_without_attention_mask():
    batch = TOK(["ACGTACGTACGT", "ACGTACGTAC"], padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="no attention_mask"):
        _model()(input_ids=batch["input_ids"])
    with pytest.raises(ValueError):  # and the tokenizer refuses ragged tensors itself
        TOK(["ACGTACGTACGT", "ACGTACGTAC"], return_tensors="pt")


def test_one_hot_in_the_wrong_layout_names_the_expected_one():
    with pytest.raises(ValueError, match=r"\(batch, length, 4\).*transpose"):
        _model()(one_hot=torch.zeros(2, 4, 20))


def test_empty_or_shorter_than_the_kernel():
    model = _model()
    with pytest.raises(ValueError, match="shorter than lpl_kernel=9"):
        model(input_ids=torch.full((1, 5), 5))
    with pytest.raises(ValueError, match="shorter than lpl_kernel=9"):
        model(input_ids=torch.zeros((1, 0), dtype=torch.long))


def test_bad_config_values():
    with pytest.raises(ValueError, match="pooling"):
        SPUConfig(pooling="max")
    with pytest.raises(ValueError, match="spl_mode"):
        _model(spl_mode="both")
    with pytest.raises(ValueError, match="pad"):
        _model(dpl_pad="reflect")


def test_half_precision_on_cpu_runs_the_fft_in_float32_and_warns_once(monkeypatch):
    monkeypatch.setattr(functional, "_warned_half", False)
    model = SPUForSequenceClassification(
        SPUConfig(d_model=16, n_layers=2, lpl_groups=4, dpl_max_len=32, dropout=0.0)
    ).eval()
    ids = TOK(["ACGTTGCAACGTAGGA"], return_tensors="pt")["input_ids"]
    reference = model(input_ids=ids).logits
    model = model.to(torch.bfloat16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = model(input_ids=ids).logits
    messages = [str(w.message) for w in caught if "float32" in str(w.message)]
    assert len(messages) == 1  # once, though two blocks run the FFT
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    torch.testing.assert_close(logits.float(), reference, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("value", [2, 0.5, -1])
def test_attention_mask_other_than_zero_and_one(value):
    ids = torch.full((1, 12), 5)
    mask = torch.ones(1, 12)
    mask[0, 3] = value
    with pytest.raises(ValueError, match=rf"only 0 and 1.*\[{value}"):
        _model()(input_ids=ids, attention_mask=mask)
    with pytest.raises(ValueError, match="only 0 and 1"):  # the block refuses it too
        _model().blocks[0](torch.randn(1, 12, 16), mask)
    bool_mask = torch.ones(1, 12, dtype=torch.bool)  # booleans are fine
    assert _model()(input_ids=ids, attention_mask=bool_mask).last_hidden_state.shape == (1, 12, 16)


def test_a_row_with_every_position_masked_is_named():
    ids = torch.full((3, 12), 5)
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[2] = 0
    with pytest.raises(ValueError, match=r"row\(s\) \[2\]"):
        _model()(input_ids=ids, attention_mask=mask)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_one_hot(bad):
    one_hot = torch.zeros(1, 12, 4)
    one_hot[0, 5, 1] = bad
    with pytest.raises(ValueError, match="NaN or Inf"):
        _model()(one_hot=one_hot)


@pytest.mark.parametrize("bad", [10, -1])
def test_out_of_range_ids_name_the_value_and_the_vocabulary(bad):
    ids = torch.full((1, 12), 5)
    ids[0, 4] = bad
    with pytest.raises(ValueError, match=rf"\[{bad}\].*vocab_size=10"):
        _model()(input_ids=ids)


def test_float_ids_are_refused():
    with pytest.raises(ValueError, match=r"integer token ids in \[0, 10\).*float32"):
        _model()(input_ids=torch.full((1, 12), 5.0))


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("dpl_pad", "causal", "linear"),
        ("spl_mode", "x", "residual"),
        ("dpl_fusion", "sum", "gate"),
        ("length_extrapolation", "clip", "interpolate"),
    ],
)
def test_config_choices_are_checked_at_construction(field, value, allowed):
    with pytest.raises(ValueError, match=rf"{field} must be one of \(.*'{allowed}'.*got '{value}'"):
        SPUConfig(**{field: value})


def test_config_sizes_are_checked_at_construction():
    with pytest.raises(ValueError, match="dpl_max_len must be >= 1, got 0"):
        SPUConfig(dpl_max_len=0)
    with pytest.raises(ValueError, match="lpl_kernel must be >= 1, got 0"):
        SPUConfig(lpl_kernel=0)
    with pytest.raises(ValueError, match=r"dpl_filter_taps must be an int >= 2 .*got 1$"):
        SPUConfig(dpl_filter_taps=1)
    with pytest.raises(ValueError, match=r"dpl_filter_taps must be an int >= 2 .*got 2.5$"):
        SPUConfig(dpl_filter_taps=2.5)


@pytest.mark.parametrize("taps", [1, 2.5, "64", True])
def test_filter_taps_must_be_an_int_of_at_least_two(taps):
    with pytest.raises(ValueError, match=rf"filter_taps must be an int >= 2 .*got {taps!r}$"):
        DomainPlasticity(4, filter_taps=taps)


@pytest.mark.parametrize("n", [0, -4, 8.0])
def test_sample_spectrum_needs_a_positive_int_grid(n):
    with pytest.raises(ValueError, match=rf"n must be a positive int .*got {n!r}$"):
        functional.sample_spectrum(torch.ones(1, 4, dtype=torch.complex64), n)


def test_sample_spectrum_needs_complex_taps_with_two_knots():
    with pytest.raises(
        ValueError, match=r"taps must be a complex \(d, K\) tensor, got torch.float32"
    ):
        functional.sample_spectrum(torch.ones(1, 4), 8)
    with pytest.raises(ValueError, match=r"needs K >= 2 knots .*got 1"):
        functional.sample_spectrum(torch.ones(1, 1, dtype=torch.complex64), 8)


@pytest.mark.parametrize("labels", [[0, 5], [-1, 1], [0, 2]])
def test_class_labels_outside_the_classes_are_named(labels):
    model = SPUForSequenceClassification(
        SPUConfig(d_model=16, n_layers=1, lpl_groups=4, dpl_max_len=32, dropout=0.0)
    )
    bad = sorted(v for v in labels if not 0 <= v < 2)
    expected = r"labels must be class indices in \[0, 2\).*got " + re.escape(str(bad))
    with pytest.raises(ValueError, match=expected):
        model(input_ids=torch.randint(5, 9, (2, 16)), labels=torch.tensor(labels))
