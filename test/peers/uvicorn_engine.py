"""A small OpenAI-compatible engine on uvicorn + FastAPI, as vLLM and SGLang serve theirs.

Run by the differential tests (test/helpers/uvicorn-engine.ts) with Debian's python3-uvicorn,
python3-fastapi and python3-httptools: it routes exactly as such an engine does (uvicorn
decodes the path, drops a fragment; Starlette matches the routes), and its answers say which
route served them (`x-served`), with token counts in the engines' own shapes. It binds
127.0.0.1 on a free port and prints `PORT <n>` once it listens.

Modes (argv[1]): `routes` (the default) or `strict`: in strict mode the request body is read
with Python's json (escapes decoded, the last duplicate key wins) and a field it does not know
is refused as vLLM refuses it (400, pydantic's "Extra inputs are not permitted"), the refusal
echoing the client's input as pydantic does.
"""
import asyncio
import json
import socket
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

MODE = sys.argv[1] if len(sys.argv) > 1 else "routes"
TOKENS = 7
CHAT_FIELDS = {"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "n", "temperature", "user"}
COMPLETION_FIELDS = {"model", "prompt", "stream", "stream_options", "max_tokens", "n", "temperature", "user"}

app = FastAPI()


class Flags(BaseModel):
    """`stream` as vLLM's request model reads it: pydantic's bool (1, "yes", "on" ... are true)."""
    stream: bool = False


async def read_body(request: Request):
    raw = await request.body()
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return None


def refuse_extra(body, allowed):
    """vLLM's 400 for a field its pydantic model forbids; the message echoes the input."""
    extra = [k for k in body if k not in allowed]
    if not extra:
        return None
    k = extra[0]
    msg = f"[{{'type': 'extra_forbidden', 'loc': ('body', '{k}'), 'msg': 'Extra inputs are not permitted', 'input': {body[k]!r}}}]"
    return JSONResponse({"object": "error", "message": msg, "type": "BadRequestError", "param": None, "code": 400}, status_code=400, headers={"x-served": "refused"})


def stream_value_error(body, stream):
    """vLLM refuses stream_options on a request that does not stream; its message echoes the input."""
    if body.get("stream_options") is not None and not stream:
        return JSONResponse(
            {"object": "error", "message": f"Stream options can only be defined when `stream=True`. (request: {json.dumps(body)[:200]})", "type": "BadRequestError", "param": None, "code": 400},
            status_code=400,
            headers={"x-served": "refused"},
        )
    return None


def usage():
    return {"prompt_tokens": 3, "completion_tokens": TOKENS, "total_tokens": 3 + TOKENS}


async def sse(kind, model, include_usage):
    for i in range(TOKENS):
        if kind == "chat":
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [{"index": 0, "delta": {"content": f"t{i}"}, "finish_reason": None}]}
        else:
            chunk = {"id": "c", "object": "text_completion", "created": 0, "model": model, "choices": [{"index": 0, "text": f"t{i}", "finish_reason": None}]}
        yield f"data: {json.dumps(chunk)}\n\n"
        await asyncio.sleep(0)
    last = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    yield f"data: {json.dumps(last)}\n\n"
    if include_usage:
        yield f"data: {json.dumps({'id': 'c', 'object': 'chat.completion.chunk', 'created': 0, 'model': model, 'choices': [], 'usage': usage()})}\n\n"
    yield "data: [DONE]\n\n"


async def generate(request: Request, kind: str, allowed):
    body = await read_body(request)
    if not isinstance(body, dict):
        return JSONResponse({"error": {"message": "invalid JSON"}}, status_code=400, headers={"x-served": kind})
    try:
        stream = Flags(stream=body.get("stream", False)).stream
    except ValidationError as e:
        return JSONResponse({"object": "error", "message": str(e), "type": "BadRequestError", "param": None, "code": 400}, status_code=400, headers={"x-served": "refused"})
    if MODE == "strict":
        refused = refuse_extra(body, allowed) or stream_value_error(body, stream)
        if refused is not None:
            return refused
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
    else:
        include_usage = True
    model = str(body.get("model", "m"))
    headers = {"x-served": kind, "x-model": model, "x-stream": str(stream).lower()}
    if stream:
        return StreamingResponse(sse(kind, model, include_usage), media_type="text/event-stream", headers=headers)
    text = "".join(f"t{i}" for i in range(TOKENS))
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"} if kind == "chat" else {"index": 0, "text": text, "finish_reason": "stop"}
    return JSONResponse({"id": "c", "object": "chat.completion", "created": 0, "model": model, "choices": [choice], "usage": usage()}, headers=headers)


@app.post("/v1/chat/completions")
async def chat(request: Request):
    return await generate(request, "chat", CHAT_FIELDS)


@app.post("/v1/completions")
async def completions(request: Request):
    return await generate(request, "completions", COMPLETION_FIELDS)


@app.post("/invocations")
async def invocations(request: Request):
    """vLLM's SageMaker route: a chat body served as chat completions."""
    return await generate(request, "chat", CHAT_FIELDS)


@app.post("/generate")
async def sglang_generate(request: Request):
    """SGLang's own route (answered here in OpenAI's shape: the routing is what is tested)."""
    return await generate(request, "completions", COMPLETION_FIELDS)


@app.post("/v1/embeddings")
async def embeddings(request: Request):
    body = await read_body(request) or {}
    return JSONResponse({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.0]}], "model": str(body.get("model", "m")), "usage": {"prompt_tokens": 3, "total_tokens": 3}}, headers={"x-served": "embeddings"})


@app.post("/v1/responses")
async def responses(request: Request):
    body = await read_body(request) or {}
    return JSONResponse({"id": "r", "object": "response", "status": "completed", "model": str(body.get("model", "m")), "output": [], "usage": {"input_tokens": 3, "output_tokens": TOKENS, "total_tokens": 3 + TOKENS}}, headers={"x-served": "responses"})


@app.post("/v1/messages")
async def messages(request: Request):
    body = await read_body(request) or {}
    return JSONResponse({"id": "m", "type": "message", "role": "assistant", "model": str(body.get("model", "m")), "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": TOKENS}}, headers={"x-served": "messages"})


@app.get("/v1/models")
async def models():
    return {"object": "list", "data": [{"id": "m", "object": "model"}]}


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, http="httptools", log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    async def serve():
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
