"""``serve()``: HybridFlow behind an OpenAI-compatible ``/v1/chat/completions`` (``model="hybridflow"``).

Any OpenAI client can then talk to HybridFlow as to one model; the answer streams back as SSE chunks
once the DAG has run (with ``usage`` summed over every call HybridFlow made). Scale out with uvicorn
workers: ``uvicorn 'mymodule:app' --workers 4`` where ``app = serve(HybridFlow(...))``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from hybridflow.chat import check_history
from hybridflow.pipeline import HybridFlow

MODEL_NAME = "hybridflow"


def _chunk(
    cid: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_NAME,
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


def split_conversation(messages: Any) -> tuple[str, tuple[dict[str, str], ...]]:
    """The question (the last message, which must be a non-empty user turn) and the turns before it."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of chat messages")
    history = check_history(messages, "messages")
    last = history[-1]
    if last["role"] != "user" or not last["content"].strip():
        raise ValueError(
            f"the last message must be a non-empty user message, got role {last['role']!r}"
        )
    return last["content"], history[:-1]


def serve(flow: HybridFlow, *, chunk_chars: int = 16) -> Any:
    """A FastAPI app running ``flow`` on each request's conversation (needs ``hybridflow[fastapi]``).

    The last message is the question; the turns before it (system, user, assistant) are its
    history and reach every model call of the query.
    """
    try:
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, StreamingResponse
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "serve() needs pip install 'hybridflow[fastapi]'", name=error.name
        ) from error
    app = FastAPI(title="hybridflow")
    app.state.flow = flow

    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "hybridflow"}],
        }

    async def chat(request: Any) -> Any:
        body = await request.json()
        if body.get("model", MODEL_NAME) != MODEL_NAME:
            return JSONResponse(
                {"error": {"message": f"model must be {MODEL_NAME!r}, got {body.get('model')!r}"}},
                status_code=404,
            )
        try:
            query, history = split_conversation(body.get("messages"))
        except (TypeError, ValueError) as error:
            return JSONResponse({"error": {"message": str(error)}}, status_code=400)
        result = await flow.arun(query, history=history)
        totals = result.totals()
        usage = {
            "prompt_tokens": totals["prompt_tokens"],
            "completion_tokens": totals["completion_tokens"],
            "total_tokens": totals["total_tokens"],
        }
        if result.answer is None:
            return JSONResponse(
                {"error": {"message": f"HybridFlow produced no answer (flags: {result.flags})"}},
                status_code=502,
            )
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        if not body.get("stream"):
            message = {"role": "assistant", "content": result.answer}
            return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": MODEL_NAME,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}  # fmt: skip
        answer = result.answer

        async def events() -> Any:
            yield _chunk(cid, {"role": "assistant", "content": ""})
            for i in range(0, len(answer), chunk_chars):
                yield _chunk(cid, {"content": answer[i : i + chunk_chars]})
            yield _chunk(cid, {}, "stop")
            if (body.get("stream_options") or {}).get("include_usage"):
                yield _chunk(cid, None, usage=usage)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    chat.__annotations__ = {"request": Request}
    app.get("/v1/models")(models)
    app.post("/v1/chat/completions")(chat)
    return app
