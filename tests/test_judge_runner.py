"""The judge runner against a real HTTP stub on 127.0.0.1: every fault ends judged or failed, never lost."""
import json
import logging
import re
import time

import pandas as pd
import pytest

from fwsapp.results.export import export_table
from fwsapp.orchestration.importer import LogFile, import_logs
from fwsapp.judge.backends import OpenAIBackend
from fwsapp.judge.runner import JudgeSettings, estimate, plan_pairs, run_judge
from fwsapp.judge.summary import aspect_means, judge_block
from fwsapp.results.report import build_report
from fwsapp.store import Store
from tests.openai_stub import StubServer

FAST = dict(backoff_base=0.01, backoff_cap=0.05, max_attempts=4)


def make_run(store, n=12, task="qa"):
    rows = [
        {"prompt": f"Question number {i} about gout?", "watermarked_text": f"Watermarked answer {i}.",
         "unwatermarked_text": f"Plain answer {i}.", "natural_text": f"Reference {i}."}
        for i in range(n)
    ]
    return import_logs(store, method="KGW", model="m", task_name=task,
                       generations=LogFile("g.json", json.dumps(rows).encode()))


def backend(stub, model="stub-judge", timeout=1.0):
    return OpenAIBackend(model, base_url=stub.base_url, timeout=timeout)


def marker(i):
    return f"Question number {i} about"


def test_every_fault_ends_judged_or_failed_with_no_duplicates_and_resume_does_only_missing(store):
    run_id = make_run(store)
    with StubServer(retry_after=0.05, hang_seconds=3, structured=False) as stub:  # a server that answers in text
        stub.plan = {
            marker(0): ["429", "valid"], marker(1): ["500", "500", "valid"], marker(2): ["hang", "valid"],
            marker(3): ["truncated", "valid"], marker(4): ["noscores", "valid"],
            marker(5): ["noscores", "noscores"], marker(6): ["500"] * 4,
        }
        outcome = run_judge(store, [run_id], backend(stub), JudgeSettings(concurrency=4, **FAST))
        rows = store.judgments([run_id]).set_index("sample_idx")
        assert len(rows) == 12 and rows.index.is_unique
        assert outcome.judged == 10 and outcome.failed == 1 and outcome.unreachable == 1 and outcome.requested == 12
        assert outcome.reasons == {"500 server error": 1} and "1 × 500 server error" in outcome.describe("m")
        assert rows.loc[5, "status"] == "failed" and "unparsable verdict" in rows.loc[5, "reason"]
        assert "after a format reminder" in rows.loc[5, "reason"]
        assert "Both answers are reasonable" in rows.loc[5, "raw_output"]
        assert rows.loc[6, "status"] == "unreachable" and "gave up after 4 attempts" in rows.loc[6, "reason"]
        for sample in (0, 1, 2, 3, 4):
            assert rows.loc[sample, "status"] == "ok", rows.loc[sample, "reason"]
        assert stub.served["hang"] == 1 and stub.served["truncated"] == 1 and stub.served["429"] == 1
        order_w_first = bool(rows.loc[0, "watermarked_first"])
        expected_w = [4, 4, 5] if order_w_first else [3, 2, 2]
        assert list(rows.loc[0, "scores_watermarked"]) == expected_w

        # A re-run asks again only for the pair that never got through; the unparsable one is final…
        again = run_judge(store, [run_id], backend(stub), JudgeSettings(concurrency=4, **FAST))
        assert again.requested == 1 and again.skipped == 11 and again.judged == 1
        served = sum(stub.served.values())
        assert run_judge(store, [run_id], backend(stub), JudgeSettings(concurrency=4, **FAST)).requested == 0
        assert sum(stub.served.values()) == served
        # …until asked for explicitly.
        retried = run_judge(store, [run_id], backend(stub), JudgeSettings(concurrency=4, retry_failed=True, **FAST))
        assert retried.requested == 1 and retried.judged == 1
        assert len(store.judgments([run_id])) == 12  # replaced in place, no duplicates


def test_retry_after_is_honoured(store):
    run_id = make_run(store, n=1)
    with StubServer(retry_after=0.6) as stub:
        stub.plan = {marker(0): ["429"]}
        started = time.perf_counter()
        outcome = run_judge(store, [run_id], backend(stub), JudgeSettings(**FAST))
        assert outcome.judged == 1 and time.perf_counter() - started >= 0.6


def test_swap_judges_both_orders_and_reports_position_consistency(store):
    run_id = make_run(store, n=4)
    with StubServer() as stub:
        outcome = run_judge(store, [run_id], backend(stub), JudgeSettings(swap=True, **FAST))
    assert outcome.requested == 8 and outcome.judged == 8
    judgments = store.judgments([run_id])
    block = judge_block(judgments)
    # The stub always prefers answer A, so the two orders never agree on the winner.
    assert block["position_consistency"] == 0.0
    assert block["coherence"]["watermarked"] == pytest.approx(3.5)  # (4 + 3) / 2 per sample


def test_budget_cap_stops_cleanly_and_the_rest_resumes(store):
    run_id = make_run(store, n=10)
    with StubServer(latency=0.05) as stub:
        judge = backend(stub, model="gpt-4o")  # priced: 500 in + 120 out tokens = $0.00245 a call
        usage, cost = estimate(plan_pairs(store, [run_id], "gpt-4o", JudgeSettings()).pairs, "gpt-4o", "openai")
        assert usage.prompt_tokens > 0 and cost > 0
        outcome = run_judge(store, [run_id], judge, JudgeSettings(concurrency=2, budget_usd=0.006, **FAST))
        assert outcome.stopped == "budget"
        assert 3 <= outcome.judged <= 4 and outcome.usage.cost("gpt-4o") >= 0.006
        rest = run_judge(store, [run_id], judge, JudgeSettings(concurrency=2, **FAST))
        assert rest.requested == 10 - outcome.judged
        assert len(store.judgments([run_id])) == 10


def test_a_budget_no_price_can_count_is_refused_before_any_request(store):
    """A model with no known price counted no spend, so the cap was never reached: every pair was asked for."""
    run_id = make_run(store, n=4)
    with StubServer(latency=0.01) as stub:
        with pytest.raises(ValueError, match=r"A budget of \$1 cannot be kept with stub-judge: no price is known"):
            run_judge(store, [run_id], backend(stub, model="stub-judge"), JudgeSettings(budget_usd=1.0, **FAST))
        assert stub.requests == []
    assert store.judgments([run_id]).empty


def authorizations(stub) -> list[str]:
    return [value for headers in stub.headers_seen for key, value in headers.items() if key.lower() == "authorization"]


def test_api_key_appears_in_no_table_log_or_export(store, monkeypatch, caplog, capsys, tmp_path):
    secret = "sk-test-DO-NOT-STORE-4242"
    run_id = make_run(store, n=3)
    caplog.set_level(logging.DEBUG)
    with StubServer() as stub:
        stub.plan = {marker(0): ["429", "valid"]}
        run_judge(store, [run_id], OpenAIBackend("stub-judge", base_url=stub.base_url, timeout=1.0, api_key=secret),
                  JudgeSettings(**FAST))
        assert any(secret in value for value in authorizations(stub))  # the key given was really used
    for table in ("runs", "generations", "detections", "metrics", "judgments", "meta"):
        dump = store.frame(f"SELECT * FROM {table}").to_csv()
        assert secret not in dump, table
    export_table(store, run_id).to_csv(tmp_path / "export.csv")
    assert secret not in (tmp_path / "export.csv").read_text()
    assert secret not in json.dumps(build_report(store))
    captured = capsys.readouterr()
    assert secret not in caplog.text + captured.out + captured.err


def test_openai_key_goes_only_to_openai_and_a_compatible_server_gets_the_named_one(store, monkeypatch, tmp_path, capsys):
    from fwsapp.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-only-1111")
    monkeypatch.setenv("LOCAL_JUDGE_KEY", "local-key-2222")
    run_id = make_run(store, n=2)
    store.close()
    with StubServer() as stub:
        common = ["judge", "--run", run_id, "--backend", "compatible", "--base-url", stub.base_url,
                  "--judge-model", "stub-judge", "--db", str(store.path)]
        assert main(common) == 0
        assert authorizations(stub) and not any("sk-openai-only" in value for value in authorizations(stub))
        stub.headers_seen.clear()
        assert main(common + ["--retry-failed", "--swap", "--api-key-env", "LOCAL_JUDGE_KEY"]) == 0
        assert authorizations(stub) and all(value == "Bearer local-key-2222" for value in authorizations(stub))
    assert main(common + ["--api-key-env", "NOT_SET_ANYWHERE"]) == 2
    assert "NOT_SET_ANYWHERE: that environment variable is not set" in capsys.readouterr().err


def test_an_unreachable_judge_exits_non_zero_with_grouped_reasons_and_is_retried(store, capsys):
    from fwsapp.cli import main

    run_id = make_run(store, n=3)
    store.close()
    args = ["judge", "--run", run_id, "--backend", "compatible", "--base-url", "http://127.0.0.1:9/v1",
            "--judge-model", "m", "--timeout", "0.5", "--max-attempts", "1", "--db", str(store.path)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "could not be reached for any of the 3 pairs" in err and "3 × connection failed" in err
    assert main(args) == 1  # nothing was recorded as final: all 3 are asked for again
    assert "any of the 3 pairs" in capsys.readouterr().err
    reasons = Store(store.path, read_only=True).judgments([run_id]).reason
    assert reasons.str.startswith("gave up after 1 attempt; last: ").all(), reasons  # the page read "1 attempts"


def test_a_judge_that_is_never_reached_stops_the_run_after_a_few_pairs_in_a_row(store, capsys):
    """Each pair waits out its retries: at a refused address the run stops sending once UNREACHABLE_IN_A_ROW pairs in
    a row got nowhere, says how many were not sent, and a bad address is refused before any is sent."""
    from fwsapp.cli import main
    from fwsapp.judge.runner import UNREACHABLE_IN_A_ROW

    run_id = make_run(store, n=30)
    store.close()
    args = ["judge", "--run", run_id, "--backend", "compatible", "--judge-model", "m", "--timeout", "0.5",
            "--max-attempts", "1", "--concurrency", "2", "--db", str(store.path)]
    assert main(args + ["--base-url", "http://127.0.0.1:9/v1"]) == 1
    printed = capsys.readouterr()
    sent = int(re.search(r"could not be reached for the first (\d+) of the 30 pairs", printed.err).group(1))
    assert UNREACHABLE_IN_A_ROW <= sent < UNREACHABLE_IN_A_ROW + 2 and f"the other {30 - sent} were not sent" in printed.err
    assert f"Stopped after {UNREACHABLE_IN_A_ROW} pairs in a row could not reach the judge" in printed.out
    assert main(args + ["--base-url", "ftp://127.0.0.1/v1"]) == 2
    assert "The judge's base URL 'ftp://127.0.0.1/v1' is not a server's address" in capsys.readouterr().err


def test_a_judge_lost_mid_run_fails_the_run_and_keeps_the_verdicts_read(store, capsys):
    """A judge that answers three pairs and then fails: the run stops sending, stores the three verdicts, and exits 1,
    so a script does not go on to report three pairs of thirty as the run's verdicts; the next run judges the rest."""
    from fwsapp.cli import main
    from fwsapp.judge.runner import UNREACHABLE_IN_A_ROW

    run_id = make_run(store, n=30)
    store.close()
    with StubServer() as stub:
        stub.plan = {marker(i): ["500"] for i in range(3, 30)}
        args = ["judge", "--run", run_id, "--backend", "compatible", "--base-url", stub.base_url, "--judge-model", "m",
                "--max-attempts", "1", "--concurrency", "1", "--db", str(store.path)]
        assert main(args) == 1
        printed = capsys.readouterr()
        assert (f"the judge stopped answering after 3 verdicts: {UNREACHABLE_IN_A_ROW} pairs in a row could not reach "
                f"it ({UNREACHABLE_IN_A_ROW} × 500 server error), so {27 - UNREACHABLE_IN_A_ROW} of the 30 pairs were "
                "not sent") in printed.err
        stub.plan = {}
        assert main(args) == 0
    reopened = Store(store.path)
    rows = reopened.judgments([run_id])
    reopened.close()
    assert len(rows) == 30 and (rows.status == "ok").all()


def test_mean_scores_keep_generators_and_judges_apart():
    def verdict(run_id, model, judge, sample, watermarked, unwatermarked):
        return {"run_id": run_id, "model": model, "method": "KGW", "task": "qa", "judge_model": judge,
                "sample_idx": sample, "status": "ok", "scores_watermarked": watermarked,
                "scores_unwatermarked": unwatermarked}

    judgments = pd.DataFrame([
        verdict("small", "smollm2", "gpt-4o", 0, [2, 2, 2], [4, 4, 4]),
        verdict("large", "meditron", "gpt-4o", 0, [4, 4, 4], [4, 4, 4]),
        verdict("large", "meditron", "llama-judge", 0, [1, 1, 1], [2, 2, 2]),
    ])
    settings = pd.Series({"small": "defaults", "large": "imported"})
    means = aspect_means(judgments, settings)
    coherence = means[(means.aspect == "coherence") & (means.kind == "watermarked")].set_index("label")["mean"]
    assert coherence.to_dict() == {"smollm2 · KGW · defaults · judge gpt-4o": 2.0,
                                   "meditron · KGW · imported · judge gpt-4o": 4.0,
                                   "meditron · KGW · imported · judge llama-judge": 1.0}
    one_judge = aspect_means(judgments[judgments.judge_model == "gpt-4o"], settings)
    assert set(one_judge.label) == {"smollm2 · KGW · defaults", "meditron · KGW · imported"}
    drops = one_judge[(one_judge.kind == "watermarked") & (one_judge.aspect == "coherence")].set_index("label")
    assert drops.drop_pct.to_dict() == {"smollm2 · KGW · defaults": 50.0, "meditron · KGW · imported": 0.0}


def test_two_runs_of_one_method_are_two_judge_means_never_one():
    def verdict(run_id, score):
        return {"run_id": run_id, "model": "smollm2", "method": "KGW", "task": "qa", "judge_model": "gpt-4o",
                "sample_idx": 0, "status": "ok", "scores_watermarked": [score] * 3, "scores_unwatermarked": [5, 5, 5]}

    judgments = pd.DataFrame([verdict("weak", 5), verdict("strong", 3)])
    means = aspect_means(judgments, pd.Series({"weak": "delta=1", "strong": "defaults"}))
    coherence = means[(means.aspect == "coherence") & (means.kind == "watermarked")].set_index("label")["mean"]
    assert coherence.to_dict() == {"smollm2 · KGW · delta=1": 5.0, "smollm2 · KGW · defaults": 3.0}


def test_the_local_judge_is_decoded_into_the_verdict_format_so_every_verdict_parses(lm, qa_run, tmp_path):
    import shutil

    from fwsapp.orchestration import pipeline
    from fwsapp.judge.parser import parse_verdict
    from fwsapp.judge.runner import JudgeSettings

    store, config, run_id = qa_run
    store.row("CHECKPOINT")
    shutil.copy(store.path, tmp_path / "copy.duckdb")
    copy = Store(tmp_path / "copy.duckdb")
    backend = pipeline.judge_backend(lambda name: lm, "local")
    planned, _ = estimate(plan_pairs(copy, [run_id], backend.model, JudgeSettings()).pairs, backend.model, "local")
    outcome = pipeline.judge(copy, [run_id], None, backend=backend, settings=JudgeSettings(concurrency=1))
    verdicts = copy.judgments([run_id])
    copy.close()
    assert outcome.judged == 4 and len(verdicts) == 4 and (verdicts.status == "ok").all()
    assert all(parse_verdict(output).ok for output in verdicts.raw_output)
    # The verdict alone, not a justification first; and as many tokens as the plan said before the run (it said 350 a
    # pair, an API judge's explanation and verdict, so the Judge page offered a local run "69,650 completion tokens").
    assert verdicts.completion_tokens.sum() == planned.completion_tokens == 4 * 25


def test_the_local_judge_pads_on_the_left_without_touching_the_shared_tokenizer(lm, monkeypatch):
    """The model's tokenizer is shared with the app's other jobs, in other threads: the judge asks for left padding per
    call rather than setting the tokenizer's own padding side for the while (another thread's call in that window
    was padded on the wrong side). Its replies are those of a left-padded batch whatever the tokenizer says."""
    from fwsapp.judge.backends import LocalBackend

    backend = LocalBackend(loaded=lm)
    conversations = [[{"role": "user", "content": "Name one symptom of diabetes."}],
                     [{"role": "user", "content": "What is the usual first treatment of type 2 diabetes in adults?"}]]

    def replies():
        return [reply.text for reply in backend.rewrite_many(conversations, 0.0, 6, [1, 2])]

    left = replies()
    seen = []
    tokenizer_call = type(lm.tokenizer).__call__

    def watched(tokenizer, *args, **kwargs):
        seen.append(tokenizer.padding_side)
        return tokenizer_call(tokenizer, *args, **kwargs)

    monkeypatch.setattr(lm.tokenizer, "padding_side", "right")
    monkeypatch.setattr(type(lm.tokenizer), "__call__", watched)
    assert replies() == left
    assert seen == ["right"] and lm.tokenizer.padding_side == "right"


def judged_by(store, judge_model: str, same: bool, statuses=("ok",) * 4):
    """A run of 4 samples judged by `judge_model`: the same scores for A and B where `same`."""
    from fwsapp.orchestration.importer import LogFile, import_logs

    rows = [{"prompt": f"Q{i}?", "natural_text": f"r{i}", "unwatermarked_text": f"u{i}", "watermarked_text": f"w{i}"}
            for i in range(4)]
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile("g.json", json.dumps(rows).encode()))
    with store.transaction() as cursor:
        from fwsapp.store import insert_rows

        insert_rows(cursor, "judgments", run_id, [
            {"sample_idx": i, "judge_model": judge_model, "prompt_version": "v", "watermarked_first": True,
             "texts_hash": str(i), "status": status, "raw_output": "", "reason": None if status == "ok" else "why",
             "scores_watermarked": [4, 4, 4] if status == "ok" else None,
             "scores_unwatermarked": ([4, 4, 4] if same else [5, 5, 5]) if status == "ok" else None}
            for i, status in enumerate(statuses)])
    return run_id


def test_the_judge_figures_count_one_judge_never_several_pooled(store, capsys):
    """A run judged by two judges: the report's judge figures were the mean of both judges' scores, over whichever
    samples each judged; now one judge's, the one with the most parsed verdicts or the one named."""
    from fwsapp.cli import main
    from fwsapp.results.report import build_report
    from fwsapp.store import Store
    from tests.conftest import add_verdicts

    run_id = judged_by(store, "gpt-4o", same=False)  # four verdicts: A 4, B 5 on every aspect
    path = store.path
    store.close()
    add_verdicts(path, run_id, "strict-judge", range(2), (1, 1, 1), (2, 2, 2))
    store = Store(path)
    report = build_report(store)
    assert report["judge_model"] == "gpt-4o" and report["judge_choices"] == ["gpt-4o", "strict-judge"]
    block = report["runs"][0]["judge"]
    assert block["n_judged"] == 4 and block["coherence"] == {"watermarked": 4.0, "unwatermarked": 5.0}
    assert report["judges"] == "gpt-4o"
    strict = build_report(store, judge="strict-judge")
    assert strict["judges"] == "strict-judge" and strict["runs"][0]["judge"]["n_judged"] == 2
    assert strict["runs"][0]["judge"]["coherence"] == {"watermarked": 1.0, "unwatermarked": 2.0}
    with pytest.raises(ValueError, match="No verdicts by the judge 'nobody'; the judges are gpt-4o, strict-judge."):
        build_report(store, judge="nobody")
    store.close()
    capsys.readouterr()
    assert main(["report", "--judge", "strict-judge", "--db", str(path)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["runs"][0]["judge"]["n_judged"] == 2
    assert "The judge figures are strict-judge's; gpt-4o also judged (--judge MODEL counts another's)." in err
    assert main(["report", "--judge", "nobody", "--db", str(path)]) == 2
    assert "No verdicts by the judge 'nobody'" in capsys.readouterr().err


def test_an_export_holds_one_judges_verdicts_the_runs_default_or_the_one_named(store, tmp_path, capsys):
    """A run judged by two judges: each exported row's judge scores were the mean of both judges' verdicts on that
    sample (4.0 and 1.0 read 2.5), a score neither judge gave."""
    import pandas as pd

    from fwsapp.cli import main
    from fwsapp.results.export import export_table
    from fwsapp.store import Store
    from tests.conftest import add_verdicts

    run_id = judged_by(store, "gpt-4o", same=False)  # four verdicts: A 4, B 5 on every aspect
    path = store.path
    store.close()
    add_verdicts(path, run_id, "strict-judge", range(2), (1, 1, 1), (2, 2, 2))
    store = Store(path)
    default = export_table(store, run_id).dropna(subset=["judge_model"])
    assert set(default.judge_model) == {"gpt-4o"} and set(default.judge_coherence_watermarked) == {4.0}
    strict = export_table(store, run_id, "strict-judge").dropna(subset=["judge_model"])
    assert len(strict) == 2 and set(strict.judge_factual_accuracy_watermarked) == {1.0} \
        and set(strict.judge_relevance_unwatermarked) == {2.0}
    with pytest.raises(ValueError, match=f"Run {run_id}: No verdicts by the judge 'nobody'; the judges are "
                                         "gpt-4o, strict-judge."):
        export_table(store, run_id, "nobody")
    store.close()
    out = tmp_path / "strict.parquet"
    assert main(["export", "--run", run_id, "--judge", "strict-judge", "--out", str(out), "--db", str(path)]) == 0
    assert set(pd.read_parquet(out).judge_coherence_unwatermarked.dropna()) == {2.0}
    assert main(["export", "--run", run_id, "--judge", "nobody", "--out", str(tmp_path / "no.csv"),
                 "--db", str(path)]) == 2
    assert "No verdicts by the judge 'nobody'" in capsys.readouterr().err and not (tmp_path / "no.csv").exists()


def test_a_smoke_test_judge_is_named_and_left_out_of_the_report_unless_asked(store):
    from fwsapp.judge.summary import indiscriminate_judges
    from fwsapp.models import EMBEDDED_MODEL
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import report_tables

    run_id = judged_by(store, EMBEDDED_MODEL, same=True)
    report = build_report(store)
    assert report["runs"][0]["judge"] is None and report["smoke_tests_left_out"] == [EMBEDDED_MODEL]
    assert report["judges"] == "no verdicts yet"
    counted = build_report(store, include_smoke_tests=True)
    assert counted["runs"][0]["judge"]["n_judged"] == 4 and counted["smoke_tests_left_out"] == []
    titles = [title for title, _ in report_tables(counted)]
    assert f"Table 4: FWS (Auto and judge: {EMBEDDED_MODEL} (smoke test)), α = 0.4, β = 0.2" in titles
    [warning] = indiscriminate_judges(store.judgments([run_id]))
    assert warning.startswith(f"{EMBEDDED_MODEL} (smoke test) gave both texts the same scores on 100.0% of its 4 verdicts")


def test_a_judge_that_tells_the_texts_apart_draws_no_warning_and_counts(store):
    from fwsapp.judge.summary import indiscriminate_judges
    from fwsapp.results.report import build_report

    run_id = judged_by(store, "gpt-4o", same=False)
    assert indiscriminate_judges(store.judgments([run_id])) == []
    assert build_report(store)["runs"][0]["judge"]["n_judged"] == 4


def test_the_report_counts_unreachable_pairs_apart_from_failed_ones(store):
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import runs_table

    judged_by(store, "gpt-4o", same=False, statuses=("ok", "failed", "unreachable", "unreachable"))
    report = build_report(store)
    judge = report["runs"][0]["judge"]
    assert (judge["n_judged"], judge["n_failed"], judge["n_unreachable"]) == (1, 1, 2)
    row = runs_table(report).iloc[0]
    assert (row["Judge failed"], row["Judge unreachable"]) == (1, 2)


def test_a_judge_that_gave_no_verdict_is_not_named_as_a_source_of_the_figures(store):
    """A judge that was never reached (a mistyped model, a server down) was named in Table 4's and the FWS page's
    title ("judge: far-judge, gpt-4o") beside the judge whose verdicts the figures are. The figures count one judge's
    verdicts, so the runs table names that judge; the other may be chosen, and its figures are its failures."""
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import report_tables, runs_table

    judged_by(store, "gpt-4o", same=False)
    judged_by(store, "far-judge", same=False, statuses=("unreachable", "failed", "unreachable", "unreachable"))
    report = build_report(store)
    assert report["judges"] == "gpt-4o"
    assert "Table 4: FWS (Auto and judge: gpt-4o), α = 0.4, β = 0.2" in [title for title, _ in report_tables(report)]
    assert runs_table(report).Judge.tolist() == ["gpt-4o"] and report["judge_choices"] == ["gpt-4o", "far-judge"]
    far = build_report(store, judge="far-judge")
    assert far["judges"] == "no verdicts yet" and runs_table(far)[["Judge failed", "Judge unreachable"]].iloc[0].tolist() == [1, 3]


def test_a_run_whose_judge_gave_no_verdict_has_no_row_of_dashes_in_the_drop_table(store):
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import judge_drop_table

    judged_by(store, "far-judge", same=False, statuses=("unreachable", "failed", "unreachable", "unreachable"))
    assert judge_drop_table(build_report(store)).empty


def test_when_no_verdict_parses_the_cli_and_the_apps_job_fail_alike(store, capsys):
    from fwsapp.cli import main
    from fwsapp.orchestration.jobs import JobManager
    from fwsapp.judge.runner import JudgeSettings

    run_id = make_run(store, n=2)
    with StubServer(default="noscores", structured=False) as stub:
        manager = JobManager(store, model_loader=lambda name: pytest.fail("a compatible judge loads no model"))
        job = manager.start_judge([run_id], "compatible", "stub-judge", stub.base_url, JudgeSettings())
        while not job.finished:
            time.sleep(0.1)
        assert job.status == "failed" and "no verdict of the 2 pairs could be read (2 unparsable" in job.message
        store.close()
        args = ["judge", "--run", run_id, "--backend", "compatible", "--base-url", stub.base_url,
                "--judge-model", "stub-judge", "--retry-failed", "--db", str(store.path)]
        assert main(args) == 1
        assert "error: no verdict of the 2 pairs could be read (2 unparsable" in capsys.readouterr().err


def test_ctrl_c_keeps_every_answer_in_flight_sends_nothing_new_and_says_so_in_one_line(store, tmp_path):
    """SIGINT while two slow requests are in flight: both answers are stored, no further request is sent, and the
    command ends with one line, no traceback."""
    import signal
    import subprocess
    import sys

    from tests.conftest import PROJECT

    run_id = make_run(store, n=6)
    store.close()
    with StubServer(latency=4.0) as stub:
        process = subprocess.Popen(
            [sys.executable, "-m", "fwsapp", "judge", "--run", run_id, "--backend", "compatible", "--base-url",
             stub.base_url, "--judge-model", "stub-judge", "--concurrency", "2", "--db", str(store.path)],
            cwd=PROJECT, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while len(stub.requests) < 2:
            assert time.time() < deadline and process.poll() is None, "no request reached the stub"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        requested = len(stub.requests)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "Stopping: no new requests" in err and "Judged 2," in out
    assert requested == 2  # nothing sent after the signal
    stored = Store(store.path).judgments([run_id])
    assert len(stored) == 2 and set(stored.status) == {"ok"}


def test_a_compatible_server_is_asked_for_a_structured_verdict_and_one_without_it_in_text(store):
    """A weak model behind a constraining server still gives verdicts that parse; a server that refuses
    response_format is asked in text from then on; each verdict records which way it came."""
    run_id = make_run(store, n=3)
    with StubServer(default="noscores") as stub:  # the model never writes the format by itself
        outcome = run_judge(store, [run_id], backend(stub), JudgeSettings(concurrency=1, **FAST))
        assert outcome.judged == 3
        assert all(request["response_format"]["json_schema"]["schema"]["required"] == ["explanation", "A", "B"]
                   for request in stub.requests)
    rows = store.judgments([run_id])
    assert set(rows.backend) == {"compatible:json_schema"} and set(rows.status) == {"ok"}
    assert {tuple(scores) for scores in rows.scores_watermarked} <= {(4, 4, 5), (3, 2, 2)}

    other = make_run(store, n=3, task="summarization")
    with StubServer(structured=False) as stub:
        outcome = run_judge(store, [other], backend(stub), JudgeSettings(concurrency=1, **FAST))
        assert outcome.judged == 3 and stub.served["400"] == 1  # refused once, then plain text
        assert sum("response_format" in request for request in stub.requests) == 1
    assert set(store.judgments([other]).backend) == {"compatible:text"}


@pytest.mark.parametrize("output, scores", [
    ('{"explanation": "fine", "A": [4, 4, 5], "B": [3, 2, 2]}', ((4, 4, 5), (3, 2, 2))),
    ('```json\n{"explanation": "x", "A": [1, 2, 3], "B": [5, 5, 5]}\n```', ((1, 2, 3), (5, 5, 5))),
    ('{"explanation": "x", "A": [4, 4], "B": [3, 2, 2]}', "A is not a list of 3 scores"),
    ('{"explanation": "x", "A": [4, 9, 4], "B": [3, 2, 2]}', "A score 9 is outside 1-5"),
    ('{"explanation": "x", "A": [true, 2, 3], "B": [3, 2, 2]}', "A is not a list of 3 scores"),
])
def test_a_structured_verdict_is_read_and_checked_like_a_text_one(output, scores):
    from fwsapp.judge.parser import parse_verdict

    verdict = parse_verdict(output)
    if isinstance(scores, str):
        assert not verdict.ok and verdict.reason == scores
    else:
        assert verdict.ok and (verdict.a, verdict.b) == scores


@pytest.mark.parametrize("mode", ["trickle", "endless", "huge", "retry-inf", "retry-big", "retry-e300", "object",
                                  "number", "hang"])
def test_a_hostile_server_ends_each_pair_within_its_deadline_with_a_reason(store, mode, monkeypatch):
    """Every request has a total deadline (not a per-read one), a Retry-After is obeyed up to a cap (a minute; 1 s
    here), a reply is at most 4 MB and its content must be text: each pair ends unreachable or failed, in seconds,
    with a reason."""
    monkeypatch.setattr("fwsapp.models.server.MAX_RETRY_AFTER", 1.0)
    run_id = make_run(store, n=1)
    with StubServer(default=mode, hang_seconds=30) as stub:
        started = time.monotonic()
        outcome = run_judge(store, [run_id], backend(stub, timeout=1.0),
                            JudgeSettings(backoff_base=0.01, backoff_cap=0.05, max_attempts=2))
        elapsed = time.monotonic() - started
    assert outcome.judged == 0 and outcome.unreachable + outcome.failed == 1
    assert elapsed < 8, elapsed  # two attempts within the deadline, and a capped Retry-After between
    row = store.judgments([run_id]).iloc[0]
    assert row.reason and "Traceback" not in row.reason


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_signal_ends_a_judge_stuck_on_an_endless_reply_within_ten_seconds(store, signal_name):
    import signal
    import subprocess
    import sys

    from tests.conftest import PROJECT

    run_id = make_run(store, n=4)
    store.close()
    with StubServer(default="endless") as stub:
        process = subprocess.Popen(
            [sys.executable, "-m", "fwsapp", "judge", "--run", run_id, "--backend", "compatible", "--base-url",
             stub.base_url, "--judge-model", "stub-judge", "--concurrency", "2", "--timeout", "600",
             "--db", str(store.path)], cwd=PROJECT, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while len(stub.requests) < 2:
            assert time.time() < deadline and process.poll() is None, "no request reached the stub"
            time.sleep(0.1)
        time.sleep(1)
        sent = time.monotonic()
        process.send_signal(getattr(signal, signal_name))
        if signal_name == "SIGINT":  # the first asks to stop gently; a second leaves now
            time.sleep(0.5)
            process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        ended = time.monotonic() - sent
    assert ended < 10, (ended, err)
    assert process.returncode == 130 and "Traceback" not in err


def test_a_sample_with_an_empty_answer_is_said_to_be_left_out_of_the_judging(store, capsys):
    """The paper's logs have empty answers; their samples were left out without a word, so "196 pairs to judge" for a
    run of 200 said nothing of the other 4."""
    from fwsapp.cli import main

    rows = [{"prompt": f"Question number {i} about gout?", "watermarked_text": "" if i == 1 else f"Watermarked {i}.",
             "unwatermarked_text": f"Plain answer {i}.", "natural_text": f"Reference {i}."} for i in range(3)]
    run_id = import_logs(store, method="KGW", model="m", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()))
    plan = plan_pairs(store, [run_id], "stub-judge", JudgeSettings())
    assert [pair.sample_idx for pair in plan.pairs] == [0, 2]
    assert plan.described() == "2 pairs to judge (0 already judged; 1 sample with an empty answer is not judged)"
    store.close()
    with StubServer() as stub:
        assert main(["judge", "--run", run_id, "--backend", "compatible", "--base-url", stub.base_url, "--judge-model",
                     "stub-judge", "--db", str(store.path)]) == 0
    printed = capsys.readouterr()
    assert "2 pairs to judge (0 already judged; 1 sample with an empty answer is not judged), with stub-judge" in printed.err
    assert "Judged 2, failed 0 (unparsable verdicts), skipped 0 already judged, 1 not judged (an empty answer)" in printed.out


def test_a_verdict_without_scores_says_why_as_its_status_does():
    """The Judge page called a pair the judge never answered "none (failed)", the word for an answer that did not
    parse."""
    from fwsapp.judge.verdicts import scores_text

    assert scores_text(None, "unreachable") == "none (unreachable)" and scores_text(None, "failed") == "none (failed)"
    assert scores_text([4, 5, 3], "ok") == "4 / 5 / 3 (coherence / relevance / factual accuracy)"


def test_a_judge_that_told_one_pair_in_250_apart_is_not_said_to_have_scored_all_alike():
    """249 pairs scored alike of 250 read "the same scores on 100% of its 250 verdicts" (a whole-percent format)."""
    from fwsapp.judge.summary import indiscriminate_judges

    alike = [[3, 4, 4]] * 250
    judgments = pd.DataFrame({"status": "ok", "judge_model": "gpt-4o", "scores_unwatermarked": alike,
                              "scores_watermarked": [[2, 4, 4]] + alike[1:]})
    [warning] = indiscriminate_judges(judgments)
    assert warning.startswith("gpt-4o gave both texts the same scores on 99.6% of its 250 verdicts"), warning
    judgments.loc[1:5, "scores_watermarked"] = pd.Series([[2, 4, 4]] * 5, index=range(1, 6))
    assert "the same scores on 97.6% of" in indiscriminate_judges(judgments)[0]


@pytest.mark.parametrize("pairs, prompt_tokens, measured_seconds", [(8, 6038, 26.8), (48, 19955, 111.3)])
def test_the_embedded_judges_time_is_estimated_from_its_prompts(pairs, prompt_tokens, measured_seconds):
    """The estimate the Judge and FWS pages and `judge` print before the embedded model judges here: a flat 7 s a
    pair said 56 s for 8 paper QA pairs judged in 26.8 s, and 5 min 36 s for 48 short ones judged in 111.3 s
    (docs/benchmarks.md, "The embedded judge"; the plans' estimated prompt tokens)."""
    from fwsapp.judge.backends import local_duration

    minutes, _, seconds = local_duration(pairs, prompt_tokens).removesuffix(" s").rpartition(" min ")
    estimated = 60 * int(minutes or 0) + int(seconds)
    assert abs(estimated - measured_seconds) <= 0.15 * measured_seconds
