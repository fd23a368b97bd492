"""Simulated edge and cloud models on 127.0.0.1: synthetic arithmetic DAG tasks with computable answers.

A task defines a few sub-results (``x1 = 37 * 12``) and asks for a combination of them. A simulated
model answers a sub-problem correctly with probability ``p(d)`` that falls with its difficulty ``d``
(operand sizes) -- steeply for the edge, hardly for the cloud -- and takes ``ttft + tokens / tokens_per_s``
seconds, scaled down by ``time_scale``. Draws are keyed by (seed, model, question, sub-problem), so
two arms that send the same sub-problem to the same model get the same answer (common random numbers).

:func:`sim_app` is an OpenAI-compatible FastAPI app (streaming with usage, fault injection, a token
ledger); :class:`LocalServer` runs any ASGI app with uvicorn on an ephemeral loopback port.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from hybridflow.planners import EXPLAIN_TASK, GENERATE_TASK
from hybridflow.tokens import estimate_chat_tokens, estimate_tokens

_PART = re.compile(r"(x\d+)\s*=\s*(\d+)\s*([+\-*])\s*(\d+)")
_VALUE = re.compile(r"(x\d+)\s*=\s*(-?\d+)\b(?!\s*[+\-*]\s*\d)")
_FINAL = re.compile(r"final answer is\s*(-?\d+)")
_ASK = re.compile(r"What is ([x\d+\-* ]+)\?")


# -- tasks ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Part:
    name: str
    a: int
    op: str
    b: int

    @property
    def value(self) -> int:
        return {"+": self.a + self.b, "-": self.a - self.b, "*": self.a * self.b}[self.op]

    @property
    def difficulty(self) -> int:
        """The TRUE difficulty the models' accuracy falls with: a sum or difference is easy at any
        length (1); a product grows with both operands' digits, give or take one for a hidden,
        per-problem factor (carries, say) that the text does not show."""
        if self.op != "*":
            return 1
        hidden = zlib.crc32(self.text.encode()) % 3 - 1
        return int(min(9, max(2, len(str(self.a)) + len(str(self.b)) + hidden)))

    @property
    def looks_hard(self) -> int:
        """What a small planner's Difficulty goes by: the longest operand, whatever the operation."""
        return max(len(str(self.a)), len(str(self.b)))

    @property
    def text(self) -> str:
        return f"{self.name} = {self.a} {self.op} {self.b}"


@dataclasses.dataclass(frozen=True)
class ArithmeticTask:
    parts: tuple[Part, ...]
    signs: tuple[str, ...]  # how parts combine: "+"/"-" between consecutive parts

    @property
    def expression(self) -> str:
        out = self.parts[0].name
        for sign, part in zip(self.signs, self.parts[1:], strict=False):
            out += f" {sign} {part.name}"
        return out

    @property
    def query(self) -> str:
        defs = "; ".join(p.text for p in self.parts)
        return f"Let {defs}. What is {self.expression}?"

    @property
    def answer(self) -> int:
        return _combine([p.value for p in self.parts], self.signs)


def _combine(values: list[int], signs: tuple[str, ...] | list[str]) -> int:
    total = values[0]
    for sign, v in zip(signs, values[1:], strict=False):
        total = total + v if sign == "+" else total - v
    return total


def make_tasks(n: int, seed: int = 0, *, parts: tuple[int, int] = (3, 5)) -> list[ArithmeticTask]:
    """``n`` tasks of ``parts[0]..parts[1]`` sub-results with difficulties spread over 1..9."""
    rng = np.random.default_rng(seed)
    tasks = []
    for _ in range(n):
        k = int(rng.integers(parts[0], parts[1] + 1))
        items = []
        for i in range(k):
            op = str(rng.choice(["+", "-", "*"]))
            da, db = (
                (int(x) for x in rng.integers(1, 5, 2))
                if op == "*"
                else (int(rng.integers(1, 7)),) * 2
            )
            a = int(rng.integers(10 ** (da - 1), 10**da))
            b = int(rng.integers(10 ** (db - 1), 10**db))
            items.append(Part(f"x{i + 1}", a, op, b))
        signs = tuple(str(s) for s in rng.choice(["+", "-"], k - 1))
        tasks.append(ArithmeticTask(tuple(items), signs))
    return tasks


def parse_task(query: str) -> ArithmeticTask | None:
    """The task a query states (None if it is not one of ours)."""
    parts = tuple(Part(n, int(a), op, int(b)) for n, a, op, b in _PART.findall(query))
    ask = _ASK.search(query)
    if not parts or ask is None:
        return None
    signs = tuple(re.findall(r"[+\-]", ask.group(1)))
    return ArithmeticTask(parts, signs)


def answer_of(text: str | None) -> int | None:
    """The integer a final answer states ("... final answer is 42" or a bare number)."""
    if not text:
        return None
    m = _FINAL.search(text)
    if m:
        return int(m.group(1))
    nums = re.findall(r"-?\d+", text)
    return int(nums[-1]) if nums else None


# -- the simulated model -------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SimModel:
    """Accuracy ``p(d) = clip(p0 - slope d, floor, 1)``; timing ``ttft + tokens / tokens_per_s``."""

    name: str
    p0: float
    slope: float
    ttft_s: float
    tokens_per_s: float
    words_per_difficulty: int = 6
    floor: float = 0.02

    def p_correct(self, difficulty: int) -> float:
        return float(min(1.0, max(self.floor, self.p0 - self.slope * difficulty)))


EDGE = SimModel(
    "edge-3b", p0=1.1, slope=0.13, ttft_s=0.15, tokens_per_s=90.0, words_per_difficulty=5
)
CLOUD = SimModel(
    "cloud-large", p0=0.985, slope=0.006, ttft_s=0.6, tokens_per_s=45.0, words_per_difficulty=7
)
PLANNER = SimModel("planner-1.7b", p0=1.0, slope=0.0, ttft_s=0.1, tokens_per_s=400.0)


def _draw(seed: int, *keys: str) -> float:
    return float(np.random.default_rng([seed, *(zlib.crc32(k.encode()) for k in keys)]).random())


def _wrong(value: int, u: float) -> int:
    return value + (1 + int(u * 97)) * (1 if u < 0.5 else -1)


def _filler(n_words: int) -> str:
    return " ".join(["step"] * n_words)


def solve_part(model: SimModel, part: Part, seed: int, query: str) -> tuple[int, bool]:
    u = _draw(seed, model.name, query, part.text)
    right = u < model.p_correct(part.difficulty)
    return (
        part.value if right else _wrong(part.value, _draw(seed, "wrong", model.name, part.text))
    ), right


def respond(
    model: SimModel, messages: list[dict[str, str]], seed: int, plan_noise: float = 1.5
) -> str:
    """The simulated reply to a chat request (plan, step, aggregation or direct answer)."""
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    user = messages[-1]["content"]
    if "Explain-Analyze-Generate" in system:
        return plan_text(parse_task(user), seed, plan_noise)
    if user.startswith("Based on the results of all steps"):
        values = _FINAL.findall(user)
        return values[-1] if values else "unknown"
    task = parse_task(system) or parse_task(user)
    if task is None:
        return "I cannot solve this."
    if "The sub-problem to solve now is:" in user:
        sub = user.split("The sub-problem to solve now is:", 1)[1].split("\n", 1)[0]
        return _step_reply(model, task, sub, user, seed)
    # A direct (chain-of-thought) answer: every part, then the combination.
    values = [solve_part(model, p, seed, task.query)[0] for p in task.parts]
    work = " ".join(
        f"{p.name} = {v}. {_filler(model.words_per_difficulty * p.difficulty)}"
        for p, v in zip(task.parts, values, strict=False)
    )
    return f"{work} The final answer is {_combine(values, task.signs)}."


def _step_reply(model: SimModel, task: ArithmeticTask, sub: str, user: str, seed: int) -> str:
    match = _PART.search(sub)
    if match is not None:
        part = Part(match.group(1), int(match.group(2)), match.group(3), int(match.group(4)))
        value, _ = solve_part(model, part, seed, task.query)
        return f"{_filler(model.words_per_difficulty * part.difficulty)} So {part.name} = {value}."
    if EXPLAIN_TASK[:40] in sub:
        return f"The question defines {len(task.parts)} quantities and asks for {task.expression}."
    if GENERATE_TASK[:40] in sub:
        found = dict(_VALUE.findall(user.split("CONTEXT", 1)[-1]))
        values = [
            int(found[p.name]) if p.name in found else solve_part(model, p, seed, task.query)[0]
            for p in task.parts
        ]
        return f"The final answer is {_combine(values, task.signs)}."
    return "Noted."


def plan_text(task: ArithmeticTask | None, seed: int, noise: float) -> str:
    if task is None:
        return "<Plan>\n</Plan>"
    rng = np.random.default_rng([seed, zlib.crc32(task.query.encode())])
    lines = ["<Plan>", f'<Step ID="1" Task="{EXPLAIN_TASK}" Difficulty="3" Token="40" Rely=""/>']
    for i, part in enumerate(task.parts, start=2):
        # A small planner's Difficulty: half the true difficulty, half how long the operands look,
        # plus noise. Long sums look hard and are easy; short products look easy and are not.
        mix = 0.5 * part.difficulty + 0.5 * part.looks_hard
        guess = int(np.clip(round(mix + noise * rng.standard_normal()), 1, 9))
        lines.append(
            f'<Step ID="{i}" Task="What is {part.text}?" Difficulty="{guess}" Token="30" Rely="1"/>'
        )
    last = len(task.parts) + 2
    rely = ",".join(str(i) for i in range(2, last))
    lines.append(
        f'<Step ID="{last}" Task="{GENERATE_TASK}" Difficulty="2" Token="20" Rely="{rely}"/>'
    )
    lines.append("</Plan>")
    return "\n".join(lines)


def reply_seconds(model: SimModel, completion_tokens: int) -> float:
    """Unscaled seconds a reply takes: the official latency model."""
    return model.ttft_s + completion_tokens / model.tokens_per_s


# -- the server ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Faults:
    """Per-request fault probabilities (drawn in arrival order from ``seed``)."""

    p_500: float = 0.0
    p_429: float = 0.0
    retry_after_s: float = 0.05
    p_stall: float = 0.0
    stall_s: float = 2.0
    p_cut: float = 0.0
    seed: int = 0


@dataclasses.dataclass
class Ledger:
    """What the server billed: per model, prompt and completion tokens, and every request's outcome."""

    prompt_tokens: dict[str, int] = dataclasses.field(default_factory=dict)
    completion_tokens: dict[str, int] = dataclasses.field(default_factory=dict)
    outcomes: list[str] = dataclasses.field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def bill(self, model: str, prompt: int, completion: int, outcome: str) -> None:
        self.prompt_tokens[model] = self.prompt_tokens.get(model, 0) + prompt
        self.completion_tokens[model] = self.completion_tokens.get(model, 0) + completion
        self.outcomes.append(outcome)

    def total(self, model: str | None = None) -> int:
        keys = [model] if model else set(self.prompt_tokens) | set(self.completion_tokens)
        return sum(self.prompt_tokens.get(k, 0) + self.completion_tokens.get(k, 0) for k in keys)


def _chunks(text: str, size: int = 64) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]


def sim_app(
    models: dict[str, SimModel],
    *,
    seed: int = 0,
    time_scale: float = 0.01,
    faults: Faults | None = None,
    plan_noise: float = 1.5,
) -> Any:
    """An OpenAI-compatible app serving simulated ``models`` (``app.state.ledger`` keeps the bill)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI()
    ledger = Ledger()
    app.state.ledger = ledger
    faults = faults or Faults()
    fault_rng = np.random.default_rng(faults.seed)

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": k, "object": "model", "owned_by": "sim"} for k in models],
        }

    async def chat(request: Any) -> Any:
        body = await request.json()
        model = models.get(body.get("model", ""))
        if model is None:
            return JSONResponse(
                {"error": {"message": f"model {body.get('model')!r} not found"}}, status_code=404
            )
        messages = body["messages"]
        u = fault_rng.random(4)
        if u[0] < faults.p_500:
            ledger.outcomes.append("http_500")
            return JSONResponse({"error": {"message": "injected 500"}}, status_code=500)
        if u[1] < faults.p_429:
            ledger.outcomes.append("http_429")
            return JSONResponse(
                {"error": {"message": "injected 429"}},
                status_code=429,
                headers={"Retry-After": str(faults.retry_after_s)},
            )
        text = respond(model, messages, seed, plan_noise)
        cap = int(body.get("max_tokens") or body.get("max_completion_tokens") or 10**9)
        prompt = estimate_chat_tokens(messages)
        while estimate_tokens(text) > cap:  # the server truncates at max_tokens, as a real one does
            text = text[: max(0, len(text) - 4)]
        completion = estimate_tokens(text)
        stall, cut = u[2] < faults.p_stall, u[3] < faults.p_cut
        if not body.get("stream"):
            await asyncio.sleep(reply_seconds(model, completion) * time_scale)
            ledger.bill(model.name, prompt, completion, "ok")
            return _completion_json(model.name, text, prompt, completion)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(
            _stream(
                model,
                text,
                prompt,
                completion,
                include_usage,
                time_scale,
                ledger,
                stall,
                cut,
                faults.stall_s,
            ),
            media_type="text/event-stream",
        )

    # Real annotation objects: FastAPI cannot resolve the string annotations of a local import.
    chat.__annotations__ = {"request": Request}
    app.post("/v1/chat/completions")(chat)
    return app


def _completion_json(model: str, text: str, prompt: int, completion: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-sim",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _sse(
    model: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    chunk = {
        "id": "chatcmpl-sim",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    return f"data: {json.dumps(chunk)}\n\n"


async def _stream(
    model: SimModel, text: str, prompt: int, completion: int, include_usage: bool,
    scale: float, ledger: Ledger, stall: bool, cut: bool, stall_s: float,
) -> Any:  # fmt: skip
    ledger.in_flight += 1
    ledger.max_in_flight = max(ledger.max_in_flight, ledger.in_flight)
    try:
        if stall:
            ledger.outcomes.append("stall")
            await asyncio.sleep(stall_s)
            return
        await asyncio.sleep(model.ttft_s * scale)
        pieces = list(_chunks(text)) or [""]
        per_piece = (completion / model.tokens_per_s) * scale / len(pieces)
        sent = ""
        try:
            for i, piece in enumerate(pieces):
                if cut and i >= len(pieces) // 2 and i > 0:
                    ledger.bill(model.name, prompt, estimate_tokens(sent), "cut")
                    raise ConnectionAbortedError("injected stream cut")
                if i == 0:
                    yield _sse(model.name, {"role": "assistant", "content": ""})
                yield _sse(model.name, {"content": piece})
                sent += piece
                await asyncio.sleep(per_piece)
        except (GeneratorExit, asyncio.CancelledError):
            # The client went away mid-stream: bill what was streamed, as a real server does (and by
            # the client's own rule: nothing before the first content, else the prompt and the text).
            if sent:
                ledger.bill(model.name, prompt, estimate_tokens(sent), "disconnect")
            raise
        ledger.bill(model.name, prompt, completion, "ok")
        yield _sse(model.name, {}, "stop")
        if include_usage:
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            yield _sse(model.name, None, usage=usage)
        yield "data: [DONE]\n\n"
    finally:
        ledger.in_flight -= 1


class LocalServer:
    """Run an ASGI app with uvicorn on ``127.0.0.1:<free port>`` in a thread: ``with LocalServer(app) as s``."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        import uvicorn

        self.app = app
        self.host = host
        with socket.socket() as probe:
            probe.bind((host, 0))
            self.port = probe.getsockname()[1]
        config = uvicorn.Config(
            app,
            host=host,
            port=self.port,
            log_level="critical",
            lifespan="off",
            timeout_keep_alive=30,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> LocalServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the local server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sim_endpoints(server: LocalServer, *, edge: SimModel = EDGE, cloud: SimModel = CLOUD, planner: SimModel = PLANNER,
                  cloud_price: tuple[float, float] = (2.0, 8.0), **kw: Any) -> dict[str, Any]:  # fmt: skip
    """ModelEndpoints for the three simulated models of one server (GPT-4.1-like cloud prices)."""
    from hybridflow.endpoints import ModelEndpoint

    def ep(m: SimModel, price: tuple[float, float] = (0.0, 0.0)) -> ModelEndpoint:
        return ModelEndpoint(m.name, server.base_url, price_in_per_mtok=price[0], price_out_per_mtok=price[1],
                             ttft_s=m.ttft_s, tokens_per_s=m.tokens_per_s, **kw)  # fmt: skip

    return {"edge": ep(edge), "cloud": ep(cloud, cloud_price), "planner": ep(planner)}


class SimClient:
    """An in-process stand-in for :class:`~hybridflow.client.ChatClient`: the same replies, usage and
    (scaled) timing as :func:`sim_app`, without HTTP -- for sweeps where only routing matters."""

    def __init__(
        self, endpoint: Any, models: dict[str, SimModel], *, time_scale: float, seed: int = 0
    ) -> None:
        if endpoint.name not in models:
            raise ValueError(f"no simulated model named {endpoint.name!r}; have {sorted(models)}")
        self.endpoint, self.model, self.scale, self.seed = (
            endpoint,
            models[endpoint.name],
            time_scale,
            seed,
        )

    async def complete(self, messages: Any, *, max_tokens: int | None = None, deadline: float | None = None,
                       on_text: Any = None, retry_after_text: bool = True, on_attempt: Any = None,
                       may_retry: Any = None) -> Any:  # fmt: skip
        from hybridflow.client import Attempt, Completion, clock

        msgs = [dict(m) for m in messages]
        text = respond(self.model, msgs, self.seed)
        cap = max_tokens or self.endpoint.max_tokens
        while estimate_tokens(text) > cap:
            text = text[: max(0, len(text) - 4)]
        prompt, completion = estimate_chat_tokens(msgs), estimate_tokens(text)
        start = clock()
        await asyncio.sleep(self.model.ttft_s * self.scale)
        ttft = clock() - start
        pieces = list(_chunks(text, 64)) if on_text is not None else [text]
        for piece in pieces:
            await asyncio.sleep(completion / self.model.tokens_per_s * self.scale / len(pieces))
            if on_text is not None:
                on_text(piece)
        seconds = clock() - start
        attempt = Attempt(
            "ok", prompt, completion, False, seconds, self.endpoint.cost(prompt, completion)
        )
        if on_attempt is not None:
            on_attempt(attempt)
        return Completion(text, prompt, completion, False, ttft, seconds, 0.0, (attempt,))

    async def aclose(self) -> None:
        return None


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on the simulated servers' clock: when no callback is ready it jumps to the next
    timer instead of sleeping, so ``asyncio.sleep`` costs no wall time and ``loop.time()`` (which
    HybridFlow reads for r_L, records and deadlines) advances by model time only, however loaded the
    CPU. For in-process :class:`SimClient` runs; real sockets need the wall clock.
    :func:`run_virtual` runs a coroutine on it.
    """

    simulated_clock = True  # ChatClient refuses to open real sockets on it

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0

    def time(self) -> float:
        return self._virtual_now

    def _run_once(self) -> None:
        # asyncio's private scheduler state (stable since 3.4): ready callbacks, then a timer heap.
        ready, timers = self._ready, self._scheduled  # type: ignore[attr-defined]
        if not ready and timers:
            self._virtual_now = max(self._virtual_now, timers[0].when())
        super()._run_once()  # type: ignore[misc]


def run_virtual(coro: Any) -> Any:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop` (``asyncio.run`` on the simulated
    clock; ``asyncio.Runner(loop_factory=...)`` needs Python 3.11)."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        # as asyncio.run does: tasks left running are cancelled and awaited before the loop closes
        leftover = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in leftover:
            task.cancel()
        if leftover:  # gather() of nothing would make its future on another loop
            loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def sim_client_factory(models: dict[str, SimModel], *, time_scale: float, seed: int = 0) -> Any:
    """``client_factory`` for :class:`~hybridflow.HybridFlow` that uses :class:`SimClient`."""
    return lambda endpoint, retry: SimClient(endpoint, models, time_scale=time_scale, seed=seed)
