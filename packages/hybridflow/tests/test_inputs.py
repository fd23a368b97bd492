import pytest
from hybridflow import Budget, HybridFlow, ModelEndpoint, RetryPolicy


def test_remote_endpoint_without_key_fails_at_construction(monkeypatch):
    monkeypatch.delenv("HF_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="remote and has no api_key or set \\$HF_TEST_KEY"):
        ModelEndpoint("gpt-4.1", "https://api.example.com/v1", api_key_env="HF_TEST_KEY")
    monkeypatch.setenv("HF_TEST_KEY", "sk-test")
    assert (
        ModelEndpoint("gpt-4.1", "https://api.example.com/v1", api_key_env="HF_TEST_KEY").api_key
        == "sk-test"
    )
    assert ModelEndpoint("llama", "http://127.0.0.1:8000/v1").api_key == "EMPTY"


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"base_url": "127.0.0.1:8000"}, "base_url"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"read_timeout_s": 0}, "read_timeout_s"),
        ({"price_out_per_mtok": -1.0}, "price_out_per_mtok"),
        ({"tokens_per_s": float("nan")}, "tokens_per_s"),
    ],
)
def test_endpoint_settings_are_checked(kw, needle):
    with pytest.raises(ValueError, match=needle):
        ModelEndpoint(**({"name": "m", "base_url": "http://127.0.0.1:1/v1"} | kw))


@pytest.mark.parametrize(
    "kw", [{"max_tokens": 0}, {"max_cloud_tokens": -5}, {"max_cost_usd": float("inf")}]
)
def test_budget_must_be_positive(kw):
    with pytest.raises(ValueError, match="Budget"):
        Budget(**kw)


def test_retry_policy_and_query_checks():
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
    assert RetryPolicy(base_delay_s=1.0, max_delay_s=3.0, jitter=False).backoff(5, 0.3) == 3.0
    ep = ModelEndpoint("m", "http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="query must be a non-empty string"):
        HybridFlow(ep, ep, "edge").run("  ")
    with pytest.raises(TypeError, match="edge must be a ModelEndpoint"):
        HybridFlow("http://x", ep)


def test_unfitted_routers_are_refused_at_construction():
    from hybridflow import HashingEmbedder, QueryRouter, UtilityRouter

    ep = ModelEndpoint("m", "http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="UtilityRouter is not fitted"):
        HybridFlow(ep, ep, UtilityRouter(HashingEmbedder(8)))
    with pytest.raises(ValueError, match="QueryRouter is not fitted"):
        HybridFlow(ep, ep, QueryRouter(HashingEmbedder(8)))
