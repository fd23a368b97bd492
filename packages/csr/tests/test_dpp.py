import numpy as np
import pytest
from contrastive_sr import dpp_greedy_select
from contrastive_sr.dpp import cosine_similarity


def _logdet(L, S):
    return np.linalg.slogdet(L[np.ix_(S, S)])[1] if S else 0.0


def test_first_pick_is_best_and_indices_unique():
    rng = np.random.default_rng(0)
    q = rng.uniform(0.1, 1, size=20)
    sel = dpp_greedy_select(q, rng.normal(size=(20, 50)), 10)
    assert sel[0] == int(np.argmax(q))
    assert len(set(sel)) == 10


def test_identity_similarity_gives_top_q():
    q = np.random.default_rng(1).uniform(size=12)
    sel = dpp_greedy_select(q, np.eye(12), 5, similarity="precomputed")
    assert sel == list(np.argsort(-q)[:5])


def test_each_step_is_the_brute_force_best_logdet_gain():
    rng = np.random.default_rng(2)
    for trial in range(5):
        F = rng.normal(size=(8, 6))
        q = rng.uniform(0.2, 1, size=8)
        L = q[:, None] * cosine_similarity(F) * q[None, :]
        sel = dpp_greedy_select(q, F, 5)
        for step in range(1, 5):
            prefix = sel[:step]
            gains = {c: _logdet(L, [*prefix, c]) for c in range(8) if c not in prefix}
            best = max(gains.values())
            assert gains[sel[step]] == pytest.approx(best, abs=1e-6), (trial, step)


def test_diversity_prefers_a_different_candidate_over_a_duplicate():
    F = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    q = np.array([1.0, 0.99, 0.5])
    assert dpp_greedy_select(q, F, 2) == [0, 2]  # top-2 would take the duplicate 1


def test_bad_input():
    with pytest.raises(ValueError, match="k must be"):
        dpp_greedy_select(np.ones(3), np.eye(3), 4)
    with pytest.raises(ValueError, match="finite"):
        dpp_greedy_select(np.array([1.0, np.nan]), np.eye(2), 1)
