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
