"""Data for the method packages: cache paths, a loader registry, offline data sets, tokenizers.

Everything here works without network access. scikit-learn, tokenizers, transformers,
pandas, pyarrow and datasets are imported only by the functions that need them.
"""

from shared_core.data.batches import lm_batches
from shared_core.data.cache import CACHE_ENV_VAR, atomic_directory, cache_dir, recipe_hash
from shared_core.data.local import load_csv, load_local_dataset, load_parquet
from shared_core.data.registry import available_loaders, load, register_loader
from shared_core.data.tabular import (
    TABULAR_DATASETS,
    load_tabular,
    make_classification,
    make_regression,
)
from shared_core.data.text import stdlib_corpus, stdlib_source_files, train_val_split
from shared_core.data.tokenizer import SPECIAL_TOKENS, bpe_tokenizer

__all__ = [
    "CACHE_ENV_VAR",
    "SPECIAL_TOKENS",
    "TABULAR_DATASETS",
    "atomic_directory",
    "available_loaders",
    "bpe_tokenizer",
    "cache_dir",
    "lm_batches",
    "load",
    "load_csv",
    "load_local_dataset",
    "load_parquet",
    "load_tabular",
    "make_classification",
    "make_regression",
    "recipe_hash",
    "register_loader",
    "stdlib_corpus",
    "stdlib_source_files",
    "train_val_split",
]
