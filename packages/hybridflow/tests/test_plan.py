import itertools
import random

import networkx as nx
import pytest
from hybridflow import PlanError, Subtask, TaskDAG
from hybridflow.plan import ready_steps
from hypothesis import given, settings
from hypothesis import strategies as st

PLAN = """<think>the planner thinks first</think>
<Plan>
<Step ID="1" Task="Explain the question?" Difficulty="4" Token="50" Rely=""/>
<Step ID="2" Task="Is a > b? (check 'x')" Difficulty="3" Token="30" Rely="1"/>
<Step ID="3" Task="What is c/>d?" Difficulty="7" Token="30" Rely="1"/>
<Step ID="4" Task="Final answer?" Difficulty="2" Token="20" Rely="2,3"/>
</Plan>"""

EXPECTED = [
    Subtask(1, "Explain the question?", (), 4, 50),
    Subtask(2, "Is a > b? (check 'x')", (1,), 3, 30),
    Subtask(3, "What is c/>d?", (1,), 7, 30),
    Subtask(4, "Final answer?", (2, 3), 2, 20),
]


def test_parser_equals_the_hand_written_plan():
    dag = TaskDAG.from_plan_xml(PLAN)
    assert dag.steps == EXPECTED
    assert dag.last_id == 4 and dag.repairs == []


def test_xml_round_trip():
    dag = TaskDAG.from_plan_xml(PLAN)
    assert TaskDAG.from_plan_xml(dag.to_xml()).steps == dag.steps


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(PLAN)), max_size=12))
def test_any_chunk_split_gives_the_same_steps(cuts):
    dag = TaskDAG()
    bounds = [0, *sorted(cuts), len(PLAN)]
    seen = []
    for a, b in itertools.pairwise(bounds):
        seen += dag.feed(PLAN[a:b])
    dag.close()
    assert seen == EXPECTED and dag.steps == EXPECTED


def test_steps_become_available_as_their_tag_completes():
    dag = TaskDAG()
    first_end = PLAN.index("/>") + 2
    assert dag.feed(PLAN[: first_end - 1]) == []
    assert [s.id for s in dag.feed(PLAN[first_end - 1 : first_end])] == [1]


def test_repair_rules_are_exact():
    xml = (
        '<Step ID="1" Task="a" Rely="3"/>'  # step 1 relies on nothing
        '<Step ID="2" Task="b" Rely="1"/>'  # no Difficulty -> 5
        '<Step ID="3" Task="c" Difficulty="12" Rely="1,3"/>'  # self reference -> all previous; clip 9
        '<Step ID="4" Task="d" Difficulty="0" Rely="5"/>'  # forward reference -> all previous; clip 1
        '<Step ID="6" Task="e" Difficulty="x" Rely="5,2"/>'  # 5 never appears -> dropped at close
    )
    dag = TaskDAG.from_plan_xml(xml)
    assert [(s.id, s.deps, s.difficulty) for s in dag.steps] == [
        (1, (), 5),
        (2, (1,), 5),
        (3, (1, 2), 9),
        (4, (1, 2, 3), 1),
        (6, (2,), 5),
    ]
    assert dag.repairs == [
        "step 3: Difficulty 12 clipped to 9",
        "step 4: Difficulty 0 clipped to 1",
        "step 6: Difficulty 'x' is not an integer, read as 5",
        "step 6: dropped unknown Rely [5]",
    ]


def test_switches():
    xml = '<Step ID="1" Task="a" Difficulty="8"/><Step ID="2" Task="b" Difficulty="8"/><Step ID="3" Task="c" Difficulty="8" Rely="1"/>'
    seq = TaskDAG.from_plan_xml(xml, sequential=True)
    assert [s.deps for s in seq.steps] == [(), (1,), (1, 2)]
    single = TaskDAG.from_plan_xml(xml, sequential=True, single_rely=True)
    assert [s.deps for s in single.steps] == [(), (1,), (2,)]
    assert {s.difficulty for s in TaskDAG.from_plan_xml(xml, use_difficulty=False).steps} == {5}
    rnd = TaskDAG.from_plan_xml(xml, random_threshold=5, rng=0)
    assert {s.difficulty for s in rnd.steps} <= {4, 6}


@pytest.mark.parametrize(
    ("xml", "needle"),
    [
        ('<Step Task="a" Rely=""/></Plan>', "integer ID"),
        ('<Step ID="one" Task="a"/>', "integer ID"),
        ('<Step ID="1" Task="a"/><Step ID="1" Task="b"/>', "duplicate step ID 1"),
        ('<Step ID="1" Task="a"/><Step ID="2" Task="b" Rely="1,x"/>', "'x' is not an integer"),
        ('<Step ID="1" Task=""/>', "no Task"),
        ('<Step ID=1 Task="a"/><Step ID="2" Task="b"/>', "malformed <Step> tag"),
        ('<Step ID="1" Task="a"', "unterminated"),
    ],
)
def test_malformed_plans_raise_plan_error_naming_the_tag(xml, needle):
    with pytest.raises(PlanError, match=needle) as info:
        TaskDAG.from_plan_xml(xml)
    assert "Step" in str(info.value) or needle == "unterminated"


def test_no_step_tags_is_an_empty_plan_and_a_runaway_plan_stops():
    assert len(TaskDAG.from_plan_xml("<Plan>I cannot plan this.</Plan>")) == 0
    runaway = "".join(f'<Step ID="{i}" Task="t" Rely=""/>' for i in range(1, 50))
    with pytest.raises(PlanError, match="max_steps=32"):
        TaskDAG.from_plan_xml(runaway)


def _random_dag(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    steps = [
        Subtask(i, f"t{i}", tuple(sorted(rng.sample(range(1, i), rng.randint(0, i - 1)))))
        for i in range(1, n + 1)
    ]
    return TaskDAG.from_steps(steps)


@pytest.mark.parametrize("seed", range(25))
def test_reduction_depth_and_critical_path_equal_networkx(seed):
    dag = _random_dag(seed)
    g = nx.DiGraph()
    g.add_nodes_from(dag.ids)
    g.add_edges_from(dag.edges())
    reduced = nx.transitive_reduction(g)
    ours = {(d, s) for s, deps in dag.transitive_reduction().items() for d in deps}
    assert ours == set(reduced.edges())
    assert dag.depth() == nx.dag_longest_path_length(g) + 1
    rng = random.Random(seed)
    w = {i: rng.uniform(0.1, 2.0) for i in dag.ids}
    # Enumeration: the heaviest of all source-to-sink paths (single nodes included).
    sources = [n for n in g if g.in_degree(n) == 0]
    sinks = [n for n in g if g.out_degree(n) == 0]
    paths = [[n] for n in g] + [
        p for s in sources for t in sinks for p in nx.all_simple_paths(g, s, t)
    ]
    best = max(sum(w[i] for i in p) for p in paths)
    path = dag.critical_path(w)
    assert sum(w[i] for i in path) == pytest.approx(best)
    assert all((a, b) in g.edges for a, b in itertools.pairwise(path))
    assert dag.compression_ratio() == dag.depth() / len(dag)


def test_weighted_critical_path_by_enumeration():
    dag = TaskDAG.from_steps(
        [Subtask(1, "a"), Subtask(2, "b", (1,)), Subtask(3, "c", (1,)), Subtask(4, "d", (2, 3))]
    )
    w = {1: 1.0, 2: 5.0, 3: 2.0, 4: 1.0}
    assert dag.critical_path(w) == [1, 2, 4]
    assert dag.critical_path() in ([1, 2, 4], [1, 3, 4])
    assert dag.compression_ratio() == 3 / 4


def test_dispatch_order_is_deps_then_id():
    dag = TaskDAG.from_steps(
        [
            Subtask(1, "a"),
            Subtask(2, "b"),
            Subtask(3, "c", (1, 2)),
            Subtask(4, "d", (1,)),
            Subtask(5, "e"),
        ]
    )
    assert [s.id for s in ready_steps(dag, set(), set())] == [1, 2, 5]
    assert [s.id for s in ready_steps(dag, {1, 2, 5}, {1, 2})] == [4, 3]


def test_an_unreadable_or_out_of_range_difficulty_is_a_recorded_repair():
    dag = TaskDAG.from_plan_xml(
        '<Plan><Step ID="1" Task="a" Difficulty="hard"/><Step ID="2" Task="b" Difficulty="42" Rely="1"/>'
        '<Step ID="3" Task="c" Difficulty="4" Rely="2"/></Plan>'
    )
    assert [s.difficulty for s in dag.steps] == [5, 9, 4]
    assert dag.repairs == [
        "step 1: Difficulty 'hard' is not an integer, read as 5",
        "step 2: Difficulty 42 clipped to 9",
    ]
