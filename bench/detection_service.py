"""The detection service under load and hostile input, and its speed against the detector and vLLM's reference server
(issue 60, items 6 and 7).

Run: .venv/bin/python -m bench.detection_service [--texts 64] [--requests 256] [--fuzz-examples 300]

Texts: 200-token texts under the llama-3 tokenizer, half vLLM-Gumbel-watermarked under the key (the Gumbel-max choice
among common words, tests/test_detection_service.py) and half human (the paper's references). Both servers run as
processes on loopback, as deployed (`python -m fwsapp serve-detection`, and bench/reference_detection_server.py):
- per text at batch 1: the service's round trip against calling fwsapp's detector in process (target ≤ 1.5×), in
  chunks of a few texts that alternate the detector and each client over the same texts, so a change in the machine's
  speed falls on both sides of a ratio: from curl (a C client, one kept-alive connection, each transfer timed by curl
  itself), from the standard library's kept-alive client and from httpx; beside the round trip of a request that detects nothing
  (GET /health), which is HTTP's own cost, and, from the lean clients, the detection's own time inside the service
  (its Server-Timing header) and the rest of each round trip;
- 32 texts: one /detect/batch of fwsapp's service against 32 concurrent requests to vLLM's reference server, which has
  no batch endpoint (target: faster);
- load: `--requests` requests from 1, 8 and 32 concurrent clients: texts/s, p50 and p99 latency, every answer checked
  against the detector's own (nothing dropped, nothing wrong);
- fuzz: schemathesis draws valid and invalid requests from the served OpenAPI schema, `--fuzz-examples` per operation
  and mode, sent over HTTP; every status is counted, and none may be a 5xx.
Figures go to bench/results/detection_service.json and docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.common import ROOT, median_seconds
from fwsapp.detection.verdicts import TextDetector
from fwsapp.models.tokenizers import load_tokenizer
from tests.conftest import free_port
from tests.test_detection_service import gumbel_watermarked_ids

KEY = 20260227
KEY_VARIABLE = "FWSAPP_BENCH_KEY"
TOKENS = 200
HUMAN = ROOT.parent / "shared" / "data" / "healthqa_qa.json"  # the references of HealthQA


def texts(tokenizer, count: int) -> list[str]:
    """`count` // 2 watermarked texts, each after the first 8 tokens of a human one, then human texts."""
    human = [tokenizer.encode(record["natural"]) for record in json.loads(HUMAN.read_text())]
    human = [ids[:TOKENS] for ids in human if len(ids) >= TOKENS]
    marked = [gumbel_watermarked_ids(tokenizer, KEY, TOKENS - 8, prefix=ids[:8]) for ids in human[-(count // 2):]]
    return [tokenizer.decode(ids) for ids in marked + human[:count - len(marked)]]


def started(command: list[str], url: str, log) -> subprocess.Popen:
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, KEY_VARIABLE: str(KEY), "PYTHONPATH": str(ROOT)},
                               stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            httpx.post(f"{url}/detect", json={"text": "x"}, timeout=2)
            return process
        except httpx.TransportError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"{' '.join(command)} did not answer in 120 s")


def latencies(url: str, bodies: list[dict], clients: int) -> tuple[float, list[float], list[dict]]:
    """Every body posted to /detect by `clients` concurrent clients: seconds in all, each request's, each answer."""
    with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=clients)) as client:
        def one(body):
            began = time.perf_counter()
            response = client.post(f"{url}/detect", json=body)
            return time.perf_counter() - began, response.status_code, response.json()

        began = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(one, bodies))
        return time.perf_counter() - began, [result[0] for result in results], \
            [{"status": result[1], **result[2]} for result in results]


def detection_seconds(server_timing: str) -> float:
    """The detection's own time inside the service, from its answer's `Server-Timing: detect;dur=<ms>`."""
    return float(server_timing.removeprefix("detect;dur=")) / 1000


def lean_round_trips(url: str, bodies: list[dict]) -> list[tuple[float, float]]:
    """Each body posted to /detect over one kept-alive connection of the standard library's client, which costs the
    client about a tenth of a millisecond (httpx costs more than the server's own HTTP work): the service's own time
    per text, as a lean client (curl, Go's, vLLM's own) sees it, with the detection's share of it (Server-Timing)."""
    from http.client import HTTPConnection
    from urllib.parse import urlparse

    address = urlparse(url)
    connection = HTTPConnection(address.hostname, address.port, timeout=60)
    seconds = []
    for body in bodies:
        payload = json.dumps(body).encode()
        began = time.perf_counter()
        connection.request("POST", "/detect", payload, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        seconds.append((time.perf_counter() - began, detection_seconds(response.getheader("Server-Timing"))))
        assert response.status == 200, response.status
    connection.close()
    return seconds


def curl_round_trips(url: str, bodies: list[dict]) -> list[tuple[float, float]] | None:
    """Each body posted to /detect by one curl process over one kept-alive connection (`--next`), each transfer's
    time as curl measures it, less the connection's set-up (which only the first pays): the service's round trip with
    the client's own cost near nothing (the standard library's client spends about a tenth of a millisecond a request
    building and parsing), with the detection's share of it (Server-Timing). None without curl."""
    import shutil
    import tempfile

    if shutil.which("curl") is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        command = ["curl", "--silent", "--show-error"]
        for index, body in enumerate(bodies):
            path = Path(folder) / f"{index}.json"
            path.write_text(json.dumps(body))
            command += (["--next"] if index else []) + [
                "--output", "/dev/null", "--write-out",
                "%{time_total} %{time_connect} %{http_code} %{num_connects} %header{server-timing}\\n",
                "--header", "Content-Type: application/json", "--data-binary", f"@{path}", f"{url}/detect"]
        transfers = [line.split() for line in subprocess.run(command, capture_output=True, text=True,
                                                             check=True).stdout.splitlines()]
    assert len(transfers) == len(bodies) and all(status == "200" for _, _, status, _, _ in transfers), transfers[:3]
    assert sum(int(connects) for _, _, _, connects, _ in transfers) == 1, "curl did not keep its connection"
    return [(float(total) - float(connect), detection_seconds(timing)) for total, connect, _, _, timing in transfers]


def batch_one_rounds(detector, corpus: list[str], url: str, rounds: int, chunk: int = 8) -> dict:
    """Per text at batch 1, in `rounds` rounds over the texts, `chunk` texts at a time: the detector in process over
    the chunk, then each client over the same chunk. A ratio is taken per chunk, a few tens of milliseconds of
    measuring on each side, so a change in the machine's speed (a 200-token detection here has taken from 1.9 to 3.7
    ms from one second to the next, the machine otherwise idle) falls on both its sides. Reported: each side's median
    time per text, and each client's median ratio over all chunks with its 90th percentile. For the lean clients, which
    read the answer's Server-Timing, also the detection's own time inside the service, the rest of the round trip (the
    service's and HTTP's share), and the ratio the service would have were its detections as quick as back to back in
    a loop: a virtual machine's idle core wakes cold, so a detection between requests runs slower than in a loop."""
    clients = {"curl": lambda bodies: curl_round_trips(url, bodies), "stdlib": lambda bodies: lean_round_trips(url, bodies),
               "httpx": lambda bodies: [(seconds, None) for seconds in latencies(url, bodies, 1)[1]]}
    direct: list[float] = []
    # Per chunk, for every chunk or none (no curl): the median round trip, detection inside it, and the rest.
    found: dict[str, list[tuple[float, float | None, float | None]]] = {name: [] for name in clients}
    for _ in range(rounds):
        for start in range(0, len(corpus), chunk):
            texts_of_chunk = corpus[start:start + chunk]
            each = []
            for text in texts_of_chunk:
                began = time.perf_counter()
                detector.verdict_of_text(text)
                each.append(time.perf_counter() - began)
            direct.append(statistics.median(each))
            for name, client in clients.items():
                timings = client([{"text": text} for text in texts_of_chunk])
                if timings is not None:
                    inside = None if timings[0][1] is None else statistics.median(detect for _, detect in timings)
                    rest = None if inside is None else statistics.median(trip - detect for trip, detect in timings)
                    found[name].append((statistics.median(trip for trip, _ in timings), inside, rest))
    record = {"rounds": rounds, "chunks": len(direct), "texts_per_chunk": chunk,
              "direct_seconds_per_text": statistics.median(direct)}
    for name in clients:
        if found[name]:
            ratios = [trip / detector for (trip, _, _), detector in zip(found[name], direct)]
            record[name] = {"seconds_per_text": statistics.median(trip for trip, _, _ in found[name]),
                            "over_direct": statistics.median(ratios), "over_direct_p90": percentile(ratios, 0.9)}
            if found[name][0][1] is not None:
                record[name] |= {
                    "detection_in_service_seconds_per_text": statistics.median(inside for _, inside, _ in found[name]),
                    "rest_of_round_trip_seconds_per_text": statistics.median(rest for _, _, rest in found[name]),
                    "over_direct_detecting_as_in_a_loop": statistics.median(
                        (detector + rest) / detector for (_, _, rest), detector in zip(found[name], direct))}
    return record


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fuzz(url: str, examples: int) -> dict:
    import schemathesis
    from hypothesis import HealthCheck, given, settings

    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    statuses: dict[int, int] = {}
    for operation in schema.get_all_operations():
        operation = operation.ok()
        modes = list(schemathesis.GenerationMode) if operation.method.upper() == "POST" else \
            [schemathesis.GenerationMode.POSITIVE]
        for mode in modes:
            @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(operation.as_strategy(mode))
            def send(case):
                status = case.call(base_url=url, timeout=60).status_code
                statuses[status] = statuses.get(status, 0) + 1

            send()
    return {"requests": sum(statuses.values()), "statuses": dict(sorted(statuses.items())),
            "server_errors": sum(count for status, count in statuses.items() if status >= 500)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--fuzz-examples", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the batch-1 comparison")
    args = parser.parse_args(argv)
    tokenizer = load_tokenizer("llama-3")
    corpus = texts(tokenizer, args.texts)
    os.environ[KEY_VARIABLE] = str(KEY)
    detector = TextDetector("vLLM-Gumbel", {"key": f"${KEY_VARIABLE}"}, tokenizer)
    expected = {text: detector.verdict_of_text(text) for text in corpus}

    ours_port, theirs_port = free_port(), free_port()
    ours_url, theirs_url = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{theirs_port}"
    log = open(ROOT / "cache" / "bench_detection_service.log", "w")
    ours = started([sys.executable, "-m", "fwsapp", "serve-detection", "--method", "vLLM-Gumbel", "--param",
                    f"key=${KEY_VARIABLE}", "--tokenizer", "llama-3", "--port", str(ours_port),
                    "--rate-limit", "1000000/second"], ours_url, log)
    theirs = started([sys.executable, "-m", "bench.reference_detection_server", str(KEY), str(theirs_port)],
                     theirs_url, log)
    record: dict = {"texts": len(corpus), "tokens_per_text": TOKENS}
    try:
        bodies = [{"text": corpus[index % len(corpus)]} for index in range(args.requests)]
        for clients in (1, 8, 32):
            seconds, each, answers = latencies(ours_url, bodies, clients)
            wrong = sum(answer["status"] != 200 or answer["score"] != expected[body["text"]].score
                        or answer["p_value"] != expected[body["text"]].p_value for body, answer in zip(bodies, answers))
            record[f"clients_{clients}"] = {"texts_per_second": len(bodies) / seconds, "p50_ms": 1000 * statistics.median(each),
                                            "p99_ms": 1000 * percentile(each, 0.99), "requests": len(bodies),
                                            "answered": len(answers), "wrong_or_refused": wrong}
        record["batch_1"] = batch_one_rounds(detector, corpus, ours_url, args.rounds)
        with httpx.Client(timeout=60) as client:  # the round trip of a request that detects nothing: HTTP's own cost
            record["http_round_trip_seconds"] = median_seconds(lambda: client.get(f"{ours_url}/health"), 200)
        batch = {"items": [{"text": text} for text in corpus[:32]]}
        with httpx.Client(timeout=60) as client:
            record["fwsapp_batch_32_seconds"] = median_seconds(
                lambda: client.post(f"{ours_url}/detect/batch", json=batch).raise_for_status(), 5)
        record["reference_32_concurrent_seconds"] = median_seconds(
            lambda: latencies(theirs_url, [{"text": text} for text in corpus[:32]], 32), 5)
        theirs_answers = latencies(theirs_url, [{"text": text} for text in corpus], 8)[2]
        record["reference_agrees"] = all(
            answer["score"] == expected[text].score and answer["p_value"] == expected[text].p_value
            and answer["is_watermarked"] == expected[text].is_watermarked for text, answer in zip(corpus, theirs_answers))
        record["fuzz"] = fuzz(ours_url, args.fuzz_examples)
    finally:
        ours.terminate()
        theirs.terminate()
    record["key_in_log"] = str(KEY) in (ROOT / "cache" / "bench_detection_service.log").read_text()
    print(json.dumps(record, indent=1))
    (ROOT / "bench" / "results" / "detection_service.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
