import asyncio
import re

import pytest

try:
    import torch
except ModuleNotFoundError:  # a numpy-only package: nothing to pin
    torch = None

from hybridflow.client import Attempt, Completion
from hybridflow.tokens import estimate_chat_tokens, estimate_tokens


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny models run faster on one thread than on two busy cores.
    if torch is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


class FakeClient:
    """An in-process model: sleeps ``seconds(task)`` and answers ``"done <task>"``, billing estimates."""

    def __init__(self, endpoint, retry, seconds=lambda task: 0.0, fail=()):
        self.endpoint = endpoint
        self.seconds = seconds
        self.fail = set(fail)
        self.calls = []

    async def complete(
        self,
        messages,
        *,
        max_tokens=None,
        deadline=None,
        on_text=None,
        retry_after_text=True,
        on_attempt=None,
        may_retry=None,
    ):
        user = messages[-1]["content"]
        m = re.search(r"sub-problem to solve now is: (.*)", user)
        task = m.group(1).split("\n")[0] if m else "aggregate"
        self.calls.append(task)
        await asyncio.sleep(self.seconds(task))
        if task in self.fail:
            from hybridflow.client import CallFailed

            attempt = Attempt("http_500", 0, 0, False, 0.0, 0.0)
            if on_attempt is not None:
                on_attempt(attempt)
            raise CallFailed(f"{task} failed", [attempt])
        text = f"done {task}"
        p, c = estimate_chat_tokens(messages), estimate_tokens(text)
        cost = self.endpoint.cost(p, c)
        attempt = Attempt("ok", p, c, False, 0.0, cost)
        if on_attempt is not None:
            on_attempt(attempt)
        return Completion(text, p, c, False, 0.0, 0.0, 0.0, (attempt,))

    async def aclose(self):
        pass


@pytest.fixture
def fake_client():
    """The :class:`FakeClient` class (a fixture: test modules cannot import conftest)."""
    return FakeClient


@pytest.fixture(scope="session")
def sim_server():
    """One simulated edge/cloud/planner server for the session (time scaled by 0.02)."""
    from hybridflow.sim import CLOUD, EDGE, PLANNER, LocalServer, sim_app

    app = sim_app({m.name: m for m in (EDGE, CLOUD, PLANNER)}, seed=0, time_scale=0.02)
    with LocalServer(app) as server:
        yield server
