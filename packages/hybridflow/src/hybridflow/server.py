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


def _openai_message(message: Any, i: int) -> Any:
    """One OpenAI chat message as ``{"role", "content": str}``: content given as a list of text parts
    is joined, and the ``developer`` role (OpenAI's newer name for system) reads as ``system``."""
    if not isinstance(message, dict):
        return message  # check_history names the type
    content = message.get("content")
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            if kind != "text" or not isinstance(part.get("text"), str):
                raise ValueError(
                    f"messages[{i}].content[{j}] must be a text part "
                    f'({{"type": "text", "text": ...}}), got type {kind!r}'
                )
            texts.append(part["text"])
        content = "".join(texts)
    role = "system" if message.get("role") == "developer" else message.get("role")
    return {**message, "role": role, "content": content}


def split_conversation(messages: Any) -> tuple[str, tuple[dict[str, str], ...]]:
    """The question (the last message, which must be a non-empty user turn) and the turns before it."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of chat messages")
    history = check_history([_openai_message(m, i) for i, m in enumerate(messages)], "messages")
    last = history[-1]
    if last["role"] != "user" or not last["content"].strip():
        raise ValueError(
            f"the last message must be a non-empty user message, got role {last['role']!r}"
        )
    return last["content"], history[:-1]


def check_request(body: Any) -> tuple[str, tuple[dict[str, str], ...]]:
    """Validate a chat-completions body before any model runs; the question and its history."""
    if not isinstance(body, dict):
        raise ValueError(f"the request body must be a JSON object, got {type(body).__name__}")
    if body.get("model", MODEL_NAME) != MODEL_NAME:
        raise LookupError(f"model must be {MODEL_NAME!r}, got {body.get('model')!r}")
    if not isinstance(body.get("stream", False), bool):
        raise ValueError(f"stream must be true or false, got {body['stream']!r}")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"stream_options must be an object, got {type(options).__name__}")
    return split_conversation(body.get("messages"))


def _error(message: str, status: int, kind: str) -> Any:
    """An OpenAI-style error. ``x-should-retry: false`` stops the openai SDK's automatic retries,
    which would otherwise re-run the whole query (every model call billed again) on a 5xx."""
    from fastapi.responses import JSONResponse

    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}},
        status_code=status,
        headers={"x-should-retry": "false"},
    )


def serve(flow: HybridFlow, *, chunk_chars: int = 16) -> Any:
    """A FastAPI app running ``flow`` on each request's conversation (needs ``hybridflow[fastapi]``).

    The last message is the question; the turns before it (system, user, assistant) are its
    history and reach every model call of the query.
    """
    try:
        from fastapi import FastAPI, Request
        from fastapi.responses import StreamingResponse
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
        try:
            body = json.loads(await request.body())
        except (UnicodeDecodeError, ValueError) as error:
            return _error(f"the request body is not JSON: {error}", 400, "invalid_request_error")
        try:
            query, history = check_request(body)
        except LookupError as error:
            return _error(str(error.args[0]), 404, "invalid_request_error")
        except (TypeError, ValueError) as error:
            return _error(str(error), 400, "invalid_request_error")
        try:
            result = await flow.arun(query, history=history)
        except (
            Exception
        ) as error:  # reported to the caller, never retried: a retry re-runs the query
            return _error(
                f"HybridFlow failed: {type(error).__name__}: {error}", 500, "server_error"
            )
        totals = result.totals()
        usage = {
            "prompt_tokens": totals["prompt_tokens"],
            "completion_tokens": totals["completion_tokens"],
            "total_tokens": totals["total_tokens"],
        }
        if result.answer is None:
            failed = "; ".join(f"step {r.id}: {r.error}" for r in result.records if r.error)
            return _error(
                f"HybridFlow produced no answer (flags: {result.flags}; {failed or 'no step error'})",
                502,
                "server_error",
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
