import pytest
from duetserve.partition import (
    SMPartitioner,
    granted_sms,
    green_contexts_available,
    sm_constraint,
    split_sms,
)


def test_flashinfer_alignment_rules():
    assert sm_constraint(6, 1) == (1, 1)
    assert sm_constraint(7, 5) == (2, 2)
    assert sm_constraint(8, 0) == (4, 2)
    assert sm_constraint(9, 0) == sm_constraint(10, 0) == (8, 8)
    with pytest.raises(ValueError, match=r"compute capability >= 6\.0"):
        sm_constraint(5, 2)


def test_granted_counts_round_up_and_the_rest_rounds_down():
    assert granted_sms(3, (9, 0), 132) == 8
    assert granted_sms(17, (9, 0), 132) == 24
    assert granted_sms(3, (8, 0), 108) == 4
    assert split_sms(20, (9, 0), 132) == (24, 104)
    assert split_sms(20, (8, 0), 108) == (20, 88)
    with pytest.raises(ValueError, match="round to 136"):
        granted_sms(130, (9, 0), 132)
    with pytest.raises(ValueError, match="below the 8-SM minimum"):
        split_sms(126, (9, 0), 132)
    with pytest.raises(ValueError, match="positive integer"):
        granted_sms(0, (9, 0), 132)


def test_cpu_build_raises_with_the_remedy():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    ok, why = green_contexts_available()
    assert not ok and why
    with pytest.raises(RuntimeError, match=r"green contexts are unavailable.*pip install torch"):
        SMPartitioner()


def test_both_green_context_apis_are_called_with_keywords(monkeypatch):
    """torch 2.10/2.11 take create(num_sms, device_id) and make streams under set_context();
    torch 2.13+ take keywords only and offer ctx.Stream(). Both calls go through keywords."""
    torch = pytest.importorskip("torch")
    calls = []

    class Ctx211:
        def set_context(self):
            calls.append("set")

        def pop_context(self):
            calls.append("pop")

    class Ctx213(Ctx211):
        def Stream(self):
            return "stream-213"

    def create_211(num_sms, device_id=0):
        calls.append(("create", num_sms, device_id))
        return Ctx211()

    def create_213(
        *, num_sms=None, workqueue_scope=None, workqueue_concurrency_limit=None, device_id=None
    ):
        calls.append(("create", num_sms, device_id))
        return Ctx213()

    part = SMPartitioner.__new__(SMPartitioner)
    part.torch, part.device = torch, 0
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: "stream-211", raising=False)
    for create, stream in ((create_211, "stream-211"), (create_213, "stream-213")):
        monkeypatch.setattr(torch.cuda.green_contexts.GreenContext, "create", staticmethod(create))
        ctx = part._context(16)
        assert part._stream(ctx) == stream
    assert calls == [("create", 16, 0), "set", "pop", ("create", 16, 0)]


@pytest.mark.gpu
def test_partitions_on_a_gpu_are_disjoint_and_granted():
    part = SMPartitioner(strict=True)
    p = part.partition(part.total_sms // 4)
    seen_d, seen_p = p.observed
    assert not seen_d & seen_p
    assert len(seen_d) <= p.decode_sms and len(seen_p) <= p.prefill_sms
