"""Tests for shared_core.data: cache, registry, offline loaders, corpus, tokenizer, batches."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from shared_core import data
from shared_core.data import tokenizer as tokenizer_module
from shared_core.data.text import stdlib_root

SMALL_CORPUS = 40_000  # bytes: enough text for a 300-token BPE, trains in well under a second


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(root))
    return root


# --- cache -------------------------------------------------------------------------------


def test_cache_dir_uses_env_var_and_creates_subdirs(isolated_cache: Path) -> None:
    path = data.cache_dir("a", "b")
    assert path == isolated_cache / "a" / "b"
    assert path.is_dir()


def test_cache_dir_falls_back_to_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(data.CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_dir() == tmp_path / "xdg" / "adaptive-methods"


def test_cache_dir_rejects_escaping_parts() -> None:
    with pytest.raises(ValueError, match=r"\.\./x"):
        data.cache_dir("../x")


def test_recipe_hash_ignores_key_order_but_not_values() -> None:
    assert data.recipe_hash({"a": 1, "b": 2}) == data.recipe_hash({"b": 2, "a": 1})
    assert data.recipe_hash({"a": 1, "b": 2}) != data.recipe_hash({"a": 1, "b": 3})


def test_atomic_directory_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "entry"
    with pytest.raises(RuntimeError), data.atomic_directory(target) as tmp:
        (tmp / "half-written").write_text("x")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with data.atomic_directory(target) as tmp:
        (tmp / "done").write_text("x")
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]
    assert (target / "done").read_text() == "x"


# --- registry ----------------------------------------------------------------------------


def test_builtin_loaders_are_registered() -> None:
    names = data.available_loaders()
    for name in (*data.TABULAR_DATASETS, "regression", "classification", "stdlib_corpus", "csv"):
        assert name in names


def test_unknown_loader_lists_available_ones() -> None:
    with pytest.raises(KeyError, match=r"no-such-set.*available:.*iris"):
        data.load("no-such-set")


def test_register_custom_loader_and_reject_clash() -> None:
    @data.register_loader("test-squares")
    def squares(n: int) -> list[int]:
        return [i * i for i in range(n)]

    assert data.load("test-squares", n=4) == [0, 1, 4, 9]
    data.register_loader("test-squares")(squares)  # same function again: allowed

    with pytest.raises(ValueError, match="already registered"):

        @data.register_loader("test-squares")
        def other(n: int) -> list[int]:
            return []


# --- tabular -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shape", "n_classes"),
    [("iris", (150, 4), 3), ("wine", (178, 13), 3), ("breast_cancer", (569, 30), 2)],
)
def test_bundled_classification_sets(name: str, shape: tuple[int, int], n_classes: int) -> None:
    X, y = data.load(name)
    assert X.shape == shape and X.dtype == np.float32
    assert y.dtype == np.int64 and len(np.unique(y)) == n_classes


def test_diabetes_is_regression() -> None:
    X, y = data.load_tabular("diabetes")
    assert X.shape == (442, 10) and y.dtype == np.float32


def test_unknown_tabular_set() -> None:
    with pytest.raises(KeyError, match=r"'housing'.*diabetes"):
        data.load_tabular("housing")


@pytest.mark.parametrize("make", [data.make_regression, data.make_classification])
def test_generators_are_seeded(make: Callable[..., tuple[np.ndarray, np.ndarray]]) -> None:
    X0, y0 = make(50, 5, seed=0)
    X0b, y0b = make(50, 5, seed=0)
    X1, _ = make(50, 5, seed=1)
    assert X0.dtype == np.float32 and X0.shape == (50, 5)
    np.testing.assert_array_equal(X0, X0b)
    np.testing.assert_array_equal(y0, y0b)
    assert not np.array_equal(X0, X1)


# --- stdlib corpus -----------------------------------------------------------------------


def test_stdlib_files_exclude_tests_and_idlelib() -> None:
    root = stdlib_root()
    rel = [p.relative_to(root).as_posix() for p in data.stdlib_source_files()]
    assert "os.py" in rel and "json/decoder.py" in rel
    assert not [r for r in rel if {"test", "tests", "idlelib"} & set(r.split("/")[:-1])]
    assert rel == sorted(rel)


def test_stdlib_corpus_deterministic_per_seed() -> None:
    a = data.stdlib_corpus(max_bytes=20_000, seed=0)
    data.stdlib_corpus.cache_clear()  # really rebuild, not just hit the in-memory cache
    b = data.stdlib_corpus(max_bytes=20_000, seed=0)
    c = data.stdlib_corpus(max_bytes=20_000, seed=1)
    assert a.encode() == b.encode()
    assert a != c
    # Truncation happens at a character boundary, at most 3 bytes short of the budget.
    assert 20_000 - 3 <= len(a.encode("utf-8")) <= 20_000


def test_stdlib_corpus_is_python_source() -> None:
    text = data.stdlib_corpus(max_bytes=50_000, seed=3)
    assert "def " in text and "import " in text


def test_stdlib_corpus_rejects_bad_size() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        data.stdlib_corpus(max_bytes=0)


def test_train_val_split() -> None:
    train, val = data.train_val_split(list(range(100)), 0.2)
    assert train == list(range(80)) and val == list(range(80, 100))
    t_train, t_val = data.train_val_split(torch.arange(10), 0.1)
    assert t_train.tolist() == list(range(9)) and t_val.tolist() == [9]
    with pytest.raises(ValueError, match="val_fraction"):
        data.train_val_split("abc", 1.5)


# --- tokenizer ---------------------------------------------------------------------------


def _random_unicode(rng: random.Random, length: int) -> str:
    # Mix ASCII, Latin-1, CJK, emoji, combining marks and control whitespace; skip surrogates.
    ranges = [(0x09, 0x0D), (0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x4E00, 0x4FFF)]
    ranges += [(0x1F300, 0x1F6FF), (0x10000, 0x1000F)]
    out = []
    for _ in range(length):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def test_bpe_tokenizer_round_trips_unicode() -> None:
    tok = data.bpe_tokenizer(vocab_size=300, corpus_bytes=SMALL_CORPUS)
    texts = [
        "",
        " leading and trailing spaces  ",
        "def f(x):\n\treturn x  # comment , . ;\r\n",
        "naïve café — 日本語テキスト 😀👍🏽 \u200b zero-width",
        "<|pad|> special token text <|mask|>",
    ]
    rng = random.Random(0)
    texts += [_random_unicode(rng, rng.randint(1, 80)) for _ in range(50)]
    for text in texts:
        ids = tok.encode(text)
        assert tok.decode(ids) == text, repr(text)
    assert len(tok) == 300
    specials = [tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.mask_token_id]
    assert specials == [0, 1, 2, 3] and tok.unk_token_id == 4


def test_bpe_tokenizer_is_cached_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "import os\nprint(os.path.join('a', 'b'))\n"
    first = data.bpe_tokenizer(vocab_size=300, corpus_bytes=SMALL_CORPUS)
    entries = list(data.cache_dir("tokenizers").iterdir())
    assert len(entries) == 1 and (entries[0] / "tokenizer.json").is_file()

    def no_training(*args: object) -> None:
        raise AssertionError("second call retrained instead of loading the cache")

    monkeypatch.setattr(tokenizer_module, "_train_bpe", no_training)
    second = data.bpe_tokenizer(vocab_size=300, corpus_bytes=SMALL_CORPUS)
    assert second.encode(text) == first.encode(text)
    # A different recipe is a different cache entry, so it must train (and here, fail).
    with pytest.raises(AssertionError, match="retrained"):
        data.bpe_tokenizer(vocab_size=301, corpus_bytes=SMALL_CORPUS)


def test_bpe_tokenizer_training_is_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = data.bpe_tokenizer(vocab_size=300, corpus_bytes=SMALL_CORPUS)
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(tmp_path / "other-cache"))
    second = data.bpe_tokenizer(vocab_size=300, corpus_bytes=SMALL_CORPUS)
    assert Path(second.name_or_path).is_relative_to(tmp_path / "other-cache")
    assert first.get_vocab() == second.get_vocab()


def test_bpe_tokenizer_rejects_tiny_vocab() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        data.bpe_tokenizer(vocab_size=100)


# --- local files -------------------------------------------------------------------------


def test_csv_round_trip(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.5, 2.0, -3.25], "b": [0, 1, 2], "label": [1, 0, 1]})
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    pd.testing.assert_frame_equal(data.load_csv(path), frame)
    X, y = data.load("csv", path=path, target="label")
    np.testing.assert_array_equal(X, np.array([[1.5, 0], [2.0, 1], [-3.25, 2]], dtype=np.float32))
    np.testing.assert_array_equal(y, [1, 0, 1])
    assert X.dtype == np.float32
    with pytest.raises(KeyError, match=r"'target'.*a, b, label"):
        data.load_csv(path, target="target")


def test_csv_non_numeric_features_are_named(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    path = tmp_path / "mixed.csv"
    pd.DataFrame({"city": ["x", "y"], "v": [1.0, 2.0]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="city"):
        data.load_csv(path, target="v")


def test_parquet_round_trip(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"x": [0.5, 1.5], "y": [2.5, 3.5]})
    path = tmp_path / "table.parquet"
    frame.to_parquet(path)
    pd.testing.assert_frame_equal(data.load_parquet(path), frame)
    X, y = data.load_parquet(path, target="y")
    np.testing.assert_array_equal(X, np.array([[0.5], [1.5]], dtype=np.float32))
    np.testing.assert_array_equal(y, np.array([2.5, 3.5], dtype=np.float32))


@pytest.mark.parametrize("loader", [data.load_csv, data.load_parquet, data.load_local_dataset])
def test_missing_local_file_names_the_path(loader: Callable[..., object], tmp_path: Path) -> None:
    missing = tmp_path / "nope.bin"
    with pytest.raises(FileNotFoundError, match=r"nope\.bin"):
        loader(missing)


def test_local_dataset_without_datasets_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ImportError, match="pip install datasets"):
        data.load_local_dataset(tmp_path)


# --- batches -----------------------------------------------------------------------------


def test_lm_batches_are_contiguous_windows_and_seeded() -> None:
    stream = torch.arange(1000)
    batches = list(data.lm_batches(stream, seq_len=16, batch_size=4, seed=0, num_batches=3))
    assert len(batches) == 3
    for batch in batches:
        assert batch.shape == (4, 16) and batch.dtype == torch.long
        # Windows of arange: each row counts up by one from its start offset.
        assert torch.equal(batch - batch[:, :1], torch.arange(16).expand(4, 16))
    again = list(data.lm_batches(stream, seq_len=16, batch_size=4, seed=0, num_batches=3))
    other = list(data.lm_batches(stream, seq_len=16, batch_size=4, seed=1, num_batches=3))
    assert all(torch.equal(a, b) for a, b in zip(batches, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(batches, other, strict=True))


def test_lm_batches_reject_short_stream() -> None:
    with pytest.raises(ValueError, match="shorter"):
        next(data.lm_batches(torch.arange(5), seq_len=8, batch_size=2))
