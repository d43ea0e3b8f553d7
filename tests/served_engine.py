"""A stand-in for `vllm serve MODEL --watermark-config '{"algorithm": "gumbel", "key": K}'`: an OpenAI-compatible
completions server whose sampling step is vLLM 0.33.0's own `GumbelWatermarker` (tests/vllm_oracle.py), over the
session's embedded model.

Each step takes the model's logits, applies the request's temperature and vLLM's own top-k/top-p masks, and picks the
token with the watermarker, or plainly from the request's seed where the request opted out (`"watermarking": false`)
or the context came before (vLLM's single-turn deduplication). It answers /v1/models and /v1/completions with vLLM's
fields (`token_ids` and `prompt_token_ids` on the choice, with `return_token_ids`), records every request body, and can
misbehave on demand: fail, answer late, answer garbage, leave out the token ids, or ignore the opt-out.
"""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from tests.vllm_oracle import vllm_top_k_top_p, vllm_watermarking


class VLLMSamplingStep(LogitsProcessor):
    """vLLM's sampling step, as a processor that leaves only the chosen token (generate then decodes greedily)."""

    def __init__(self, watermarker, prompt_length: int, seed: int, sampling: dict, watermarking: bool):
        self.watermarker, self.prompt_length, self.watermarking = watermarker, prompt_length, watermarking
        self.sampling = sampling
        self.generator = torch.Generator().manual_seed(seed)
        self.seen: set[tuple[int, ...]] = set()

    def __call__(self, input_ids, scores):
        width = self.watermarker.context_width
        generated = input_ids[0, self.prompt_length:].tolist()
        logits = scores.float() / torch.tensor(float(self.sampling.get("temperature", 1.0)))
        top_k, top_p = self.sampling.get("top_k"), self.sampling.get("top_p")
        logits = vllm_top_k_top_p()(logits, torch.tensor([top_k]) if top_k else None,
                                    torch.tensor([top_p]) if top_p and top_p < 1 else None)
        context = tuple(([-1] * width + generated)[-width:])
        if self.watermarking and context not in self.seen:
            token = int(self.watermarker.sample(logits, torch.tensor([context])).token_ids[0])
        else:
            token = int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=self.generator)[0, 0])
        self.seen.add(context)
        chosen = torch.full_like(scores, float("-inf"))
        chosen[0, token] = 0.0
        return chosen


class ServedEngine:
    """The server's state: its model, its watermark, what it was asked, and how it should misbehave."""

    def __init__(self, lm, key: int, name: str, context_width: int = 4):
        self.lm, self.name = lm, name
        self.watermarker = vllm_watermarking().GumbelWatermarker(key, context_width)
        self.requests: list[dict] = []
        self.answered: list[dict] = []  # (request, token ids, prompt token ids) of each completion sent
        self.fail_with: int | None = None  # an HTTP status for every completion request past the first `fail_after`
        self.fail_after = 0
        self.delay = 0.0
        self.garbage = False
        self.without_token_ids = False
        self.ignore_opt_out = False
        self._lock = threading.Lock()

    def complete(self, body: dict) -> dict:
        tokenizer = self.lm.tokenizer
        prompt_ids = tokenizer(body["prompt"])["input_ids"]
        watermarking = body.get("watermarking", True) is not False or self.ignore_opt_out
        step = VLLMSamplingStep(self.watermarker, len(prompt_ids), int(body.get("seed") or 0),
                                {key: body.get(key) for key in ("temperature", "top_k", "top_p")}, watermarking)
        with self._lock, torch.inference_mode():
            output = self.lm.model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids),
                                            dtype=torch.long), max_new_tokens=body["max_tokens"],
                                            min_new_tokens=body.get("min_tokens") or 0, do_sample=False,
                                            logits_processor=LogitsProcessorList([step]),
                                            pad_token_id=tokenizer.pad_token_id)
        token_ids = output[0, len(prompt_ids):].tolist()
        choice = {"index": 0, "text": tokenizer.decode(token_ids, skip_special_tokens=True), "finish_reason": "length"}
        if body.get("return_token_ids") and not self.without_token_ids:
            choice.update(token_ids=token_ids, prompt_token_ids=prompt_ids)
        self.answered.append({"request": body, "token_ids": token_ids, "prompt_token_ids": prompt_ids})
        return {"id": f"cmpl-{len(self.answered)}", "object": "text_completion", "created": int(time.time()),
                "model": self.name, "choices": [choice],
                "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(token_ids),
                          "total_tokens": len(prompt_ids) + len(token_ids)}}


def handler_for(engine: ServedEngine):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/v1/models"):
                self.reply(200, json.dumps({"object": "list", "data": [
                    {"id": engine.name, "object": "model", "owned_by": "vllm"}]}).encode())
            else:
                self.reply(404, b'{"error": {"message": "not found"}}')

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            engine.requests.append(body)
            if engine.delay:
                time.sleep(engine.delay)
            if engine.fail_with and len(engine.answered) >= engine.fail_after:
                self.reply(engine.fail_with, json.dumps({"error": {"message": "the engine is overloaded"}}).encode())
            elif engine.garbage:
                self.reply(200, b"<html>502 Bad Gateway</html>")
            elif body.get("model") != engine.name:
                self.reply(404, json.dumps({"error": {"message": f"The model `{body.get('model')}` does not exist."}}).encode())
            else:
                self.reply(200, json.dumps(engine.complete(body)).encode())

    return Handler


@contextmanager
def served(lm, key: int, name: str, context_width: int = 4):
    """(engine, base URL) of a server on a free local port, for the block."""
    engine = ServedEngine(lm, key, name, context_width)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(engine))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield engine, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
