"""vLLM 0.33's reference detection server, as its example builds it (a FastAPI app whose POST /detect encodes the text
without special tokens and answers vLLM's own GumbelWatermarkDetector), served by uvicorn; the contract is
tests/test_detection_service.py's `reference_server`, over the vllm wheel's detector (tests/vllm_oracle.py).

Run: .venv/bin/python -m bench.reference_detection_server KEY PORT   (the llama-3 tokenizer, converted under cache/)
"""
from __future__ import annotations

import sys

import uvicorn

import bench.common  # noqa: F401  (puts the project on the path)
from fwsapp.models.tokenizers import llama_3_huggingface
from tests.test_detection_service import reference_server


def main(key: int, port: int) -> None:
    uvicorn.run(reference_server(llama_3_huggingface(), key), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
