import itertools
import json

import numpy as np
import pytest
from duetserve import bursty_trace, load_trace, poisson_trace, scale_rate, shifting_trace
from duetserve.workloads import MIXES


def test_generated_traces_have_the_stated_rate_and_means():
    tr = poisson_trace(5.0, 4000, "conversation", seed=0)
    gaps = np.diff([r.arrival for r in tr])
    assert np.mean(gaps) == pytest.approx(0.2, rel=0.05)
    assert np.mean([r.prompt_len for r in tr]) == pytest.approx(
        MIXES["conversation"].prompt_mean, rel=0.06
    )
    assert scale_rate(tr, 2.0)[10].arrival == pytest.approx(tr[10].arrival / 2)


def test_bursts_and_phases():
    tr = bursty_trace(1.0, 200, burst_every_s=20, burst_size=5, seed=0)
    assert len(tr) > 200 and [r.id for r in tr] == list(range(len(tr)))
    assert all(b.arrival >= a.arrival for a, b in itertools.pairwise(tr))
    sh = shifting_trace(1.0, 400, seed=0)
    first = np.mean([r.prompt_len for r in sh[:200]])
    second = np.mean([r.prompt_len for r in sh[200:]])
    assert second > 10 * first


def test_load_trace_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n10.5,100,20\n11.0,50,5\n")
    tr = load_trace(csv_path)
    assert [(r.arrival, r.prompt_len, r.output_len) for r in tr] == [(0.0, 100, 20), (0.5, 50, 5)]
    jl = tmp_path / "t.jsonl"
    jl.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {"arrival_s": "2023-11-16T18:15:46", "prompt_tokens": 3, "output_tokens": 1},
                {"arrival_s": "2023-11-16T18:15:48", "prompt_tokens": 4, "output_tokens": 2},
            ]
        )
    )
    assert load_trace(jl)[1].arrival == 2.0


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("arrival_s,prompt_tokens,output_tokens\n0,0,5\n", "prompt_len=0"),
        ("arrival_s,prompt_tokens,output_tokens\n0,5,-1\n", "output_len=-1"),
        ("arrival_s,prompt_tokens,output_tokens\n2,5,1\n1,5,1\n", "non-decreasing"),
        ("when,prompt_tokens,output_tokens\n2,5,1\n", "no arrival column"),
    ],
)
def test_bad_trace_files(tmp_path, body, match):
    p = tmp_path / "bad.csv"
    p.write_text(body)
    with pytest.raises(ValueError, match=match):
        load_trace(p)


def test_bad_generator_arguments():
    with pytest.raises(ValueError, match="rate > 0"):
        poisson_trace(0.0, 10)
    with pytest.raises(ValueError, match="unknown length mix"):
        poisson_trace(1.0, 10, "chat")


def test_load_trace_names_the_files_own_timestamps(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n100,10,5\n102,3,4\n101,3,4\n")
    with pytest.raises(
        ValueError, match=r"row 3 has arrival_s='101', before the previous row's '102'"
    ):
        load_trace(p)
    p.write_text("arrival_s,prompt_tokens,output_tokens\n100,10,5\ninf,3,4\n")
    with pytest.raises(ValueError, match="row 2 has arrival_s='inf'"):
        load_trace(p)
