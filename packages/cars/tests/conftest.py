import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models run faster on one thread than on two busy cores.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


VOCAB = ["a", "b", "c", None]  # token 3 is EOS
EOS = 3


@pytest.fixture
def toy():
    """An enumerable pair: a seeded toy LM over {a, b, c, EOS} and the regex (ab|c)+a? (len <= 6)."""
    from cars_sampling import DFAConstraint, ToyLM

    lm = ToyLM(4, EOS, seed=1)
    constraint = DFAConstraint.from_regex("(ab|c)+a?", VOCAB, EOS)
    return lm, constraint, 6


@pytest.fixture
def sparse_toy():
    """A pair whose language is a thin slice of the LM's mass (RS acceptance about 2%)."""
    from cars_sampling import DFAConstraint, ToyLM

    lm = ToyLM(4, EOS, seed=3, eos_bias=-1.0)
    constraint = DFAConstraint.from_regex("a(bc|cb)*b?c", VOCAB, EOS)
    return lm, constraint, 7


@pytest.fixture(scope="session")
def small_tokenizer():
    """A byte-level BPE (vocab 300) trained in memory on grammar-like text, with an EOS token."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    from cars_sampling.reproduce import small_bpe_tokenizer

    return small_bpe_tokenizer()


@pytest.fixture
def cone_mutant():
    """The classic CARS bug: drawing at a node created in this attempt from the cone-masked weights.

    The parent's θ entry does not include the new cone yet, so the proposal no longer telescopes;
    the first sample of a fresh sampler then follows greedy constrained decoding.
    """
    from cars_sampling import CARSSampler

    class ConeMaskedCARS(CARSSampler):
        def _proposal(self, node, fresh, depth):
            if self.style == "cars" and fresh:
                return self.trie.weights_array(node, theta=True)
            return super()._proposal(node, fresh, depth)

    return ConeMaskedCARS


@pytest.fixture
def chi_square():
    """Chi-square goodness-of-fit p-value of samples against an ExactDistribution."""
    from cars_sampling.exact import chi_square_pvalue

    return chi_square_pvalue
