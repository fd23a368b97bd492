"""GP trees in prefix notation: random generation, evaluation, variation and printing.

A tree is a tuple of nodes in prefix order; a node is ``("f", name)`` (a primitive), ``("x", j)``
(input feature ``j``) or ``("c", value)`` (a float constant). An individual is a tuple of
``n_features`` trees, each one constructed feature. The operators follow DEAP, which the upstream
EvolutionaryForest builds on: ramped half-and-half generation, one-point subtree crossover, uniform
mutation and a static height limit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contrastive_sr.primitives import PRIMITIVES, Primitive

Node = tuple[str, str | int | float]
Tree = tuple[Node, ...]
Individual = tuple[Tree, ...]


def arity(node: Node) -> int:
    return PRIMITIVES[str(node[1])].arity if node[0] == "f" else 0


def subtree_end(tree: Sequence[Node], begin: int) -> int:
    """One past the last node of the subtree rooted at ``begin``."""
    end, need = begin + 1, arity(tree[begin])
    while need > 0:
        need += arity(tree[end]) - 1
        end += 1
    return end


def height(tree: Sequence[Node]) -> int:
    """Depth of the deepest node (a lone terminal has height 0)."""
    stack = [0]
    best = 0
    for node in tree:
        depth = stack.pop()
        best = max(best, depth)
        stack.extend([depth + 1] * arity(node))
    return best


def size(individual: Individual) -> int:
    return sum(len(t) for t in individual)


# -- generation -------------------------------------------------------------------------------
def _terminal(rng: np.random.Generator, n_inputs: int) -> Node:
    # DEAP picks uniformly among the terminals: every input and one ephemeral float constant
    j = int(rng.integers(n_inputs + 1))
    if j == n_inputs:
        return ("c", float(rng.uniform(-1.0, 1.0)))
    return ("x", j)


def random_tree(
    rng: np.random.Generator,
    primitives: Sequence[Primitive],
    n_inputs: int,
    min_height: int,
    max_height: int,
) -> Tree:
    """Ramped half-and-half (DEAP ``genHalfAndHalf``): full or grow, height in [min, max]."""
    target = int(rng.integers(min_height, max_height + 1))
    full = bool(rng.integers(2))
    ratio = (n_inputs + 1) / (n_inputs + 1 + len(primitives))
    nodes: list[Node] = []
    stack = [0]
    while stack:
        depth = stack.pop()
        stop = depth == target or (not full and depth >= min_height and rng.random() < ratio)
        if stop:
            nodes.append(_terminal(rng, n_inputs))
        else:
            prim = primitives[int(rng.integers(len(primitives)))]
            nodes.append(("f", prim.name))
            stack.extend([depth + 1] * prim.arity)
    return tuple(nodes)


# -- evaluation -------------------------------------------------------------------------------
def evaluate_tree(tree: Tree, X: np.ndarray) -> np.ndarray:
    """The tree's value on every row of ``X`` (n×p), a float64 vector of length n."""
    n = X.shape[0]
    stack: list[np.ndarray] = []
    for node in reversed(tree):  # prefix read backwards is postfix
        kind, value = node
        if kind == "x":
            stack.append(X[:, int(value)])
        elif kind == "c":
            stack.append(np.full(n, float(value)))
        else:
            prim = PRIMITIVES[str(value)]
            args = [stack.pop() for _ in range(prim.arity)]
            stack.append(prim.function(*args))
    return np.asarray(stack[0], dtype=np.float64)


def evaluate_individual(individual: Individual, X: np.ndarray) -> np.ndarray:
    """The constructed features Φ (n × n_trees)."""
    return np.column_stack([evaluate_tree(t, X) for t in individual])


def to_string(tree: Tree, names: Sequence[str]) -> str:
    """A sympy-parsable expression of the tree over the input ``names``."""
    stack: list[str] = []
    for kind, value in reversed(tree):
        if kind == "x":
            stack.append(names[int(value)])
        elif kind == "c":
            stack.append(repr(float(value)) if float(value) >= 0 else f"({float(value)!r})")
        else:
            prim = PRIMITIVES[str(value)]
            stack.append(prim.template.format(*[stack.pop() for _ in range(prim.arity)]))
    return stack[0]


# -- variation --------------------------------------------------------------------------------
def _point(rng: np.random.Generator, tree: Tree, root: bool) -> int:
    if len(tree) == 1 or root:
        return int(rng.integers(len(tree)))
    return int(rng.integers(1, len(tree)))


def crossover(
    rng: np.random.Generator, a: Individual, b: Individual, root: bool, max_height: int
) -> tuple[Individual, Individual]:
    """One-point subtree crossover on one randomly chosen tree of each parent.

    ``root=True`` lets the root be a crossover point (whole trees swap then), the reading of the
    upstream flag ``root_crossover``; DEAP's default excludes it. A child over ``max_height`` keeps
    its parent's tree (DEAP's ``staticLimit``).
    """
    i, j = int(rng.integers(len(a))), int(rng.integers(len(b)))
    ta, tb = a[i], b[j]
    pa, pb = _point(rng, ta, root), _point(rng, tb, root)
    ea, eb = subtree_end(ta, pa), subtree_end(tb, pb)
    na = ta[:pa] + tb[pb:eb] + ta[ea:]
    nb = tb[:pb] + ta[pa:ea] + tb[eb:]
    if height(na) > max_height:
        na = ta
    if height(nb) > max_height:
        nb = tb
    return (*a[:i], na, *a[i + 1 :]), (*b[:j], nb, *b[j + 1 :])


def mutate(
    rng: np.random.Generator,
    a: Individual,
    primitives: Sequence[Primitive],
    n_inputs: int,
    init_height: tuple[int, int],
    max_height: int,
) -> Individual:
    """Uniform mutation (DEAP ``mutUniform``) of one random tree: a subtree becomes a new tree."""
    i = int(rng.integers(len(a)))
    t = a[i]
    p = int(rng.integers(len(t)))
    new = t[:p] + random_tree(rng, primitives, n_inputs, *init_height) + t[subtree_end(t, p) :]
    if height(new) > max_height:
        new = t
    return (*a[:i], new, *a[i + 1 :])
