import numpy as np
import pytest
from contrastive_sr.primitives import BOUND, PRIMITIVES, resolve_primitives
from contrastive_sr.selection import double_lexicase, lexicase_select, mad_epsilon, size_roulette
from contrastive_sr.trees import (
    crossover,
    evaluate_tree,
    height,
    mutate,
    random_tree,
    subtree_end,
    to_string,
)

EXTREME = np.array([0.0, -0.0, 1e-300, -1e-300, 1.0, -1.0, 1e100, -1e100, 1e308, -1e308, 3.5])


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_protected_primitives_finite_on_extreme_inputs(name):
    prim = PRIMITIVES[name]
    grid = np.meshgrid(*[EXTREME] * prim.arity)
    with np.errstate(over="ignore"):
        out = prim.function(*[g.ravel() for g in grid])
    assert np.all(np.isfinite(out))
    # within the bound (the inputs a tree can see: standardised features, constants, bounded
    # outputs) every output stays within it
    inside = [g.ravel() for g in np.meshgrid(*[EXTREME[np.abs(EXTREME) <= BOUND]] * prim.arity)]
    assert np.all(np.abs(prim.function(*inside)) <= BOUND)


def test_deep_products_stay_finite():
    rng = np.random.default_rng(0)
    prims = resolve_primitives(["mul", "square"])
    X = rng.normal(size=(50, 3)) * 1e5
    for _ in range(50):
        t = random_tree(rng, prims, 3, 6, 8)
        assert np.all(np.isfinite(evaluate_tree(t, X)))


def test_tree_structure_and_string():
    t = (("f", "add"), ("x", 0), ("f", "mul"), ("x", 1), ("c", 2.0))
    X = np.array([[1.0, 3.0], [2.0, -1.0]])
    np.testing.assert_allclose(evaluate_tree(t, X), [7.0, 0.0])
    assert height(t) == 2 and subtree_end(t, 2) == 5 and subtree_end(t, 0) == 5
    assert to_string(t, ["a", "b"]) == "(a + (b*2.0))"
    sympy = pytest.importorskip("sympy")
    expr = sympy.sympify(to_string(t, ["a", "b"]))
    assert sympy.simplify(expr - (sympy.Symbol("a") + 2 * sympy.Symbol("b"))) == 0


def test_random_tree_respects_heights_and_variation_limit():
    rng = np.random.default_rng(1)
    prims = resolve_primitives(list(PRIMITIVES))
    trees = [random_tree(rng, prims, 4, 0, 2) for _ in range(200)]
    assert all(height(t) <= 2 for t in trees)
    assert {height(t) for t in trees} == {0, 1, 2}
    a, b = tuple(trees[:3]), tuple(trees[3:6])
    for _ in range(200):
        a, b = crossover(rng, a, b, True, 4)
        a = mutate(rng, a, prims, 4, (0, 2), 4)
        assert all(height(t) <= 4 for t in a + b)
        assert all(subtree_end(t, 0) == len(t) for t in a + b)  # still well-formed


def test_lexicase_picks_the_specialist_and_size_roulette_favours_small():
    rng = np.random.default_rng(2)
    errors = np.array([[0.0, 5.0], [5.0, 0.0], [3.0, 3.0]])
    wins = {lexicase_select(rng, errors, np.zeros(2)) for _ in range(50)}
    assert wins == {0, 1}  # the generalist never wins plain lexicase
    assert np.all(mad_epsilon(errors) == [2.0, 2.0])  # medians 3, |deviations| (3, 2, 0)
    sizes = np.array([10, 30])
    picks = [size_roulette(rng, sizes) for _ in range(2000)]
    assert np.mean(np.array(picks) == 0) == pytest.approx(30 / 40, abs=0.04)
    chosen = double_lexicase(rng, errors, np.array([1, 1, 1]), 10, 2)
    assert len(chosen) == 10


def test_unknown_primitive():
    with pytest.raises(ValueError, match="unknown primitive"):
        resolve_primitives(["add", "tanh"])
