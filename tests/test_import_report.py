"""Importing the paper's published KGW logs reproduces its tables; malformed imports change nothing."""
import json
import pickle
import re

import pytest

from fwsapp.orchestration.importer import ImportProblem, LogFile, import_logs
from fwsapp.results.report import build_report
from fwsapp.results.tables import render
from tests.conftest import SHARED_DATA

PAPER = SHARED_DATA / "paper"
TASK_FILES = {"completion": "HQA", "qa": "HQA2", "summarization": "MEQS"}
needs_paper_logs = pytest.mark.skipif(not PAPER.exists(), reason="../shared/data/paper is not beside the project")

# The paper's Table 1 AUROC (truncated to 3 decimals), Table 2 ROUGE-2 and Table 4 GPTJ FWS for KGW.
AUROC = {
    "meditron": (0.999, 0.999, 0.962), "biomistral": (1.0, 1.0, 0.914), "jsl": (0.995, 0.990, 0.786),
}
ROUGE2_MEDITRON = (0.030, 0.021, 0.025)
GPTJ_FWS_MEDITRON = (0.540, 0.411, 0.419)


@pytest.fixture(scope="module")
def paper_store(tmp_path_factory):
    from fwsapp.store import Store

    store = Store(tmp_path_factory.mktemp("paper") / "paper.duckdb")
    for model in AUROC:
        for task, code in TASK_FILES.items():
            stem = PAPER / f"KGW-g0.5-d2-{model}-{code}"
            judged = stem.with_name(stem.name + ".judged.json")
            import_logs(
                store, method="KGW", model=model, task_name=task,
                generations=LogFile.from_path(stem.with_name(stem.name + ".generations.json")),
                detection=LogFile.from_path(stem.with_name(stem.name + ".detection.json")),
                judged=LogFile.from_path(judged) if judged.exists() else None,
            )
    return store


def runs_by(report, model):
    return {run["task"]: run for run in report["runs"] if run["model"] == model}


@needs_paper_logs
def test_paper_tables_are_reproduced(paper_store):
    report = build_report(paper_store)
    assert len(report["runs"]) == 9 and all(run["imported"] for run in report["runs"])
    for model, expected in AUROC.items():
        runs = runs_by(report, model)
        for task, value in zip(TASK_FILES, expected):
            assert runs[task]["detection"]["auroc"] == pytest.approx(value, abs=0.0015), (model, task)
    meditron = runs_by(report, "meditron")
    for task, rouge2, fws in zip(TASK_FILES, ROUGE2_MEDITRON, GPTJ_FWS_MEDITRON):
        assert meditron[task]["quality"]["rouge2"]["watermarked"] == pytest.approx(rouge2, abs=0.0005)
        assert meditron[task]["judge"]["fws"]["watermarked"] == pytest.approx(fws, abs=0.0005)


@needs_paper_logs
def test_paper_judge_means_and_drops_for_kgw_qa(paper_store):
    judge = runs_by(build_report(paper_store), "meditron")["qa"]["judge"]
    assert judge["n_judged"] == 200 and judge["n_failed"] == 0
    means = [judge[a]["unwatermarked"] for a in ("coherence", "relevance", "factual_accuracy")]
    assert means == pytest.approx([2.33, 2.075, 2.185])
    means = [judge[a]["watermarked"] for a in ("coherence", "relevance", "factual_accuracy")]
    assert means == pytest.approx([2.17, 1.975, 2.08])
    drops = [judge["drop_pct"][a] for a in ("coherence", "relevance", "factual_accuracy")]
    assert drops == pytest.approx([6.9, 4.8, 4.8], abs=0.05)


@needs_paper_logs
def test_imported_verdicts_are_filed_under_the_judge_that_wrote_them(paper_store, tmp_path, capsys):
    from fwsapp.cli import main
    from fwsapp.store import Store

    assert runs_by(build_report(paper_store), "meditron")["qa"]["judge"]["judge_models"] == ["gpt-4o"]  # the paper's
    stem = PAPER / "KGW-g0.5-d2-meditron-HQA2"
    command = ["import", "--method", "KGW", "--model", "meditron", "--task", "qa", "--db", str(tmp_path / "j.duckdb"),
               "--generations", f"{stem}.generations.json", "--judged", f"{stem}.judged.json"]
    assert main(command + ["--judge-model", "  llama-3.3-70b "]) == 0
    run_id = capsys.readouterr().out.strip()
    assert main(command + ["--judge-model", "llama-3.3-70b"]) == 0  # the same trio again: said, nothing changed
    assert f"Already imported as run {run_id}: nothing changed." in capsys.readouterr().err
    assert main(command + ["--judge-model", "   "]) == 2  # a judge log needs a judge; nothing is written
    store = Store(tmp_path / "j.duckdb")
    assert set(store.judgments().judge_model) == {"llama-3.3-70b"} and len(store.runs()) == 1


@needs_paper_logs
def test_report_alpha_beta_and_imported_prompts_are_stripped(paper_store):
    report = build_report(paper_store, alpha=0.25, beta=0.5)
    meditron_qa = runs_by(report, "meditron")["qa"]
    assert meditron_qa["judge"]["fws"]["watermarked"] == pytest.approx(0.25 * (1.975 + 2.08) / 5 + 0.5 * 2.17 / 5)
    run_id = meditron_qa["run_id"]
    row = paper_store.generations(run_id).iloc[0]
    assert row.prompt == "What is the treatment for cri du chat syndrome ?"
    assert not row.watermarked_text.startswith(row.prompt)


@needs_paper_logs
def test_markdown_and_latex_tables(paper_store):
    report = build_report(paper_store)
    markdown = render(report, "markdown")
    assert "## Table 4: FWS (Auto and judge: gpt-4o)" in markdown and "| meditron | KGW |" in markdown
    title, provenance = markdown.splitlines()[0], markdown.splitlines()[2]
    assert title == "# fwsapp report: watermarking and medical factuality"
    assert re.fullmatch(rf"fwsapp \d+\.\d+\.\d+, \d{{4}}-\d\d-\d\d \d\d:\d\d UTC; database {re.escape(str(paper_store.path))}; "
                        r"9 runs: imp-\w+(, imp-\w+){8}\.", provenance), provenance
    latex = render(report, "latex")
    # runs, tables 1, 2, 4, judge drops, calibration (the paper logs have no scores by length, attack or entities)
    assert latex.count("\\begin{table}") == latex.count("\\end{table}") == 6
    assert latex.count("\\begin{tabular}") == latex.count("\\end{tabular}") == 6
    assert "## Calibration of the theoretical threshold" in markdown and "| meditron | Text completion | KGW |" in markdown
    # headed as the report's other tables (it read "| Settings | tokens scored | negatives | theoretical threshold |")
    assert "| Settings | Tokens scored | Negatives | Theoretical threshold | Nominal FPR | Achieved FPR |" in markdown
    run = report["runs"][0]
    assert set(run["detection"]["mean_score"]) == {"watermarked", "reference"}  # an import's negatives: references
    assert run["status"] == "done" and "Status" in markdown
    assert "## Runs: source, n, intervals, judge and oracle" in markdown and "| imported | 200 |" in markdown
    for block in re.findall(r"\\begin\{tabular\}\{([lrc]+)\}(.*?)\\end\{tabular\}", latex, re.S):
        columns, body = block
        rows = [line for line in body.splitlines() if line.rstrip().endswith("\\\\")]
        assert rows and all(line.count("&") == len(columns) - 1 for line in rows)
    assert "TPR@1\\%" in latex and "0.411" in latex
    assert not re.search(r"(?<!\\)[%#_]", latex.replace("\\%", "").replace("\\_", "").replace("\\#", ""))


def test_a_markdown_reports_names_are_literal(store):
    """A model and a judge named with markup (typed on import, or read from a spec file) stayed live in the Markdown
    report: GitHub's renderer makes `<a href>` a link there, and `**b**` bold."""
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import render
    from tests.conftest import import_example_summaries

    model, judge = "m<a href='http://evil.example/'>x</a> **b** a|b", "j_[l](http://evil.example/j)_"
    import_example_summaries(store, model=model, judge_model=judge)
    markdown = render(build_report(store), "markdown")
    assert "| m\\<a href='http://evil.example/'\\>x\\</a\\> \\*\\*b\\*\\* a\\|b | Summarization |" in markdown
    assert "## Table 4: FWS (Auto and judge: j\\_\\[l\\](http://evil.example/j)\\_), α = 0.4, β = 0.2" in markdown
    unescaped = re.sub(r"\\.", "", markdown)  # what a renderer reads as markup: no backslash before it
    assert "<a" not in unescaped and "**" not in unescaped and "](" not in unescaped


def test_the_robustness_tables_mention_counts_are_whole_numbers():
    """The clean row has no mentions to count, so the column was float and the report printed "101.000" mentions."""
    from fwsapp.results.tables import robustness_table, to_latex, to_markdown

    clean = {"attack_label": "clean (no attack)", "texts": 200, "auroc": 1.0, "auroc_ci": [0.99, 1.0],
             "tpr_at_fpr": {"0": 1.0, "0.01": 1.0, "0.05": 1.0},
             "still_detected": 1.0, "entity_survival": None, "disease_fact_survival": None}
    attacked = {**clean, "attack_label": "dose-change (k=1)", "still_detected": 0.995, "entity_survival": 0.644,
                "mentions": 101, "dose_fact_survival": 0.644}
    report = {"runs": [{"model": "biomistral", "task": "qa", "method": "KGW", "settings": "delta=2",
                        "robustness": [clean, attacked]}]}
    table = robustness_table(report)
    markdown = to_markdown(table)
    assert "| 0.644 | 101 | – |" in markdown and "101.000" not in markdown
    assert " & 101 & " in to_latex(table, "Robustness")


GOOD_GENERATIONS = [
    {"prompt": "Q?", "watermarked_text": "Q? A w.", "unwatermarked_text": "Q? A u.", "natural_text": "A."},
    {"prompt": "R?", "watermarked_text": "B w.", "unwatermarked_text": "B u.", "natural_text": "B."},
]


@pytest.mark.parametrize(
    "kind, name, content, message",
    [
        ("generations", "g.json", json.dumps([{"watermarked_text": "x", "natural_text": "y"}]), "row 1: missing unwatermarked_text"),
        ("generations", "g.json", json.dumps({"watermarked_text": ["a", "b"], "unwatermarked_text": ["c"], "natural_text": ["d", "e"]}),
         "the lists have unequal lengths"),
        ("detection", "d.json", json.dumps({"watermarked_scores": [1.0, 2.0, 3.0], "unwatermarked_scores": [0.1, 0.2]}),
         "has 3 scores but g.json has 2 generations"),
        ("detection", "d.json", json.dumps({"watermarked_scores": ["4.2", "5.0"], "unwatermarked_scores": [0.1, 0.2]}),
         "item 1 is '4.2', not a finite number"),
        ("detection", "d.json", "", "the file is empty"),
        ("judged", "j.json", json.dumps([{"sample_id": "0", "w_output": "a", "uw_output": "b"}]), "row 1: missing judge_output"),
        ("detection", "d.pkl", pickle.dumps({"watermarked_scores": [1.0]}), "is a pickle"),
        ("generations", "g.json", pickle.dumps(GOOD_GENERATIONS), "unpickling runs code"),
    ],
)
def test_malformed_imports_fail_clearly_and_change_nothing(store, kind, name, content, message):
    good = LogFile("g.json", json.dumps(GOOD_GENERATIONS).encode())
    import_logs(store, method="kgw", model="m", task_name="qa", generations=good)
    before = store.revision()
    files = {"generations": good}
    files[kind] = LogFile(name, content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ImportProblem) as error:
        import_logs(store, method="EXPEdit", model="m2", task_name="qa", **files)
    assert message in str(error.value)
    assert store.revision() == before


def test_scores_direction_comes_from_the_method_and_can_be_overridden(store):
    detection = LogFile("d.json", json.dumps({"watermarked_scores": [0.01, 0.02], "unwatermarked_scores": [0.5, 0.9]}).encode())
    exp_edit = import_logs(store, method="expedit", model="m", task_name="qa", detection=detection)
    flipped = import_logs(store, method="EXPEdit", model="m", task_name="qa", detection=detection, score_direction="higher")
    runs = {run["run_id"]: run for run in build_report(store)["runs"]}
    assert runs[exp_edit]["method"] == "EXP-edit" and runs[exp_edit]["detection"]["auroc"] == 1.0
    assert runs[flipped]["detection"]["auroc"] == 0.0


def test_prompts_align_from_a_dataset_and_reimport_is_idempotent(store, tmp_path):
    dataset = tmp_path / "qa.json"
    dataset.write_text(json.dumps([{"prompt": "Q?", "reference": "A."}, {"prompt": "R?", "reference": "B."}]))
    records = [{key: value for key, value in row.items() if key != "prompt"} for row in GOOD_GENERATIONS]
    log = LogFile("g.json", json.dumps(records).encode())
    first = import_logs(store, method="DIP", model="m", task_name="qa", generations=log, dataset=dataset)
    second = import_logs(store, method="dipmark", model="m", task_name="qa", generations=log, dataset=dataset)
    assert first == second and store.count("generations", first) == 2
    rows = store.generations(first)
    assert rows.prompt.tolist() == ["Q?", "R?"] and rows.watermarked_text[0] == "A w."


def test_reimporting_the_same_files_keeps_verdicts_and_analyses(store):
    from fwsapp.models.encoder import load_encoder
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.entities.recognizers import load_recognizer

    rows = [{"prompt": "What is gout?", "watermarked_text": "Gout is arthritis with diabetes mellitus.",
             "unwatermarked_text": "Gout is a kind of arthritis.", "natural_text": "Gout is arthritis."}]
    log = LogFile("g.json", json.dumps(rows).encode())
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=log)
    analyze_run(store, run_id, load_recognizer(), load_encoder())
    store.write_rows("judgments", run_id, [{
        "sample_idx": 0, "judge_model": "gpt-4o", "prompt_version": "v1", "watermarked_first": True,
        "texts_hash": "h", "status": "ok", "scores_watermarked": [3.0, 3.0, 3.0], "scores_unwatermarked": [4.0, 4.0, 4.0]}])
    counts = {table: store.count(table, run_id) for table in ("judgments", "entities", "entity_analyses", "metrics")}
    assert counts["judgments"] == 1 and counts["entities"] >= 1
    assert import_logs(store, method="KGW", model="m", task_name="qa", generations=log) == run_id
    assert {table: store.count(table, run_id) for table in counts} == counts
    # Other content under the same method, model and task is another run: the first keeps everything.
    changed = LogFile("g.json", json.dumps([{**rows[0], "watermarked_text": "Gout."}]).encode())
    assert import_logs(store, method="KGW", model="m", task_name="qa", generations=changed) != run_id
    assert {table: store.count(table, run_id) for table in counts} == counts


def test_the_runs_table_counts_in_whole_numbers_and_marks_what_is_missing(tmp_path):
    import pandas as pd

    from fwsapp.store import Store
    from fwsapp.results.tables import runs_table
    from tests.conftest import imported_qa_db, judged_rating_db

    db = tmp_path / "mixed.duckdb"
    judged_rating_db(db, n=3)
    imported_qa_db(db, n=2)  # no judge verdicts
    store = Store(db)
    report = build_report(store)
    table = runs_table(report).set_index("n")
    assert table.loc[3, "Judged"] == 3 and table.loc[3, "Judge failed"] == 0
    assert table.loc[2, "Judged"] is pd.NA
    markdown = render(report, "markdown")
    runs_section = markdown.split("## Table 1")[0]
    assert "<NA>" not in runs_section and "200.000" not in runs_section and "| 3.000 |" not in runs_section
    unjudged = next(line for line in runs_section.splitlines() if "| 2 |" in line)
    assert unjudged.count("| – | – | – | – |") == 1  # judged, failed, unreachable and judge of the unjudged run
    assert "| 3 | 0 | 0 | gpt-4o |" in runs_section  # the judged one: 3 judged, none failed or unreachable


def test_the_paper_file_names_say_the_model():
    from fwsapp.orchestration.importer import model_from_file_name

    assert model_from_file_name("KGW-g0.5-d2-biomistral-MEQS.detection.json") == "biomistral"
    assert model_from_file_name("KGW-g0.5-d2-jsl-HQA.judged.json") == "jsl"
    assert model_from_file_name("my-run.json") is None and model_from_file_name("jsl-vs-meditron.json") is None


def test_no_best_value_among_equal_ones():
    """ROUGE-2 0.000 in every summarization row was bolded as best: equal values have no best."""
    import pandas as pd

    from fwsapp.results.tables import best_cells

    frame = pd.DataFrame({"Model": "m", "Method": ["Unwatermarked", "KGW", "SWEET"], "Settings": "",
                          "ROUGE-2": [0.0, 0.0, 0.0], "PPL": [3.0, 4.0, 3.0]})
    best = best_cells(frame)
    assert not best["ROUGE-2"].any()
    assert best["PPL"].tolist() == [True, False, True]  # a tie for the best still shows both


def test_a_runs_difference_from_unwatermarked_is_against_its_own_texts_and_the_reference_row_has_the_most_values():
    """Two runs of one model and task on other prompts: the second run's ROUGE-2 difference was taken against the
    first run's unwatermarked texts (0.27 − 0.20, a watermark that seemed to help), and the reference row, the first
    run's, showed no factuality where the second run had one."""
    import pandas as pd

    from fwsapp.results.tables import difference_from_unwatermarked, quality_table, table2

    def run(run_id, rouge2, factuality=(None, None)):
        return {"run_id": run_id, "model": "m", "task": "qa", "method": "KGW", "settings": f"seed={run_id}", "n": 4,
                "imported": True, "source": "imported", "quality": {"rouge2": dict(zip(("unwatermarked", "watermarked"), rouge2)),
                                              "factuality": dict(zip(("unwatermarked", "watermarked"), factuality))}}

    report = {"runs": [run("1", (0.20, 0.18)), run("2", (0.30, 0.27), factuality=(0.6, 0.5))]}
    difference = difference_from_unwatermarked(report, "qa").set_index("Settings")
    assert difference.loc["seed=2", "ROUGE-2"] == pytest.approx(-0.03)
    assert difference.loc["seed=1", "ROUGE-2"] == pytest.approx(-0.02)
    assert difference.loc["seed=2", "Factuality"] == pytest.approx(-0.1) and pd.isna(difference.loc["seed=1", "Factuality"])
    for table in (quality_table(report, "qa"), table2(report)):
        reference = table[table.Method == "Unwatermarked"]
        assert len(reference) == 1 and reference.Settings.iloc[0] == "texts of run 2"
        assert reference.Factuality.iloc[0] == 0.6 and reference["ROUGE-2"].iloc[0] == 0.30


def test_table_4s_unwatermarked_row_is_the_mean_of_the_runs_as_the_fws_pages_is():
    """Two runs of one model and task whose unwatermarked texts score 0.24 and 0.36 (Auto FWS): the FWS page's row
    averages them (0.30, 'mean of the model's runs'); the report's Table 4 showed one run's 0.24 with no Settings."""
    from fwsapp.results.fws import POOLED_REFERENCE
    from fwsapp.results.tables import table4

    def run(run_id, auto, judge):
        return {"run_id": run_id, "model": "m", "task": "qa", "method": "KGW", "settings": f"delta={run_id}",
                "quality": {"fws_auto": {"unwatermarked": auto[0], "watermarked": auto[1]}},
                "judge": {"fws": {"unwatermarked": judge[0], "watermarked": judge[1]}}}

    table = table4({"runs": [run("2", (0.24, 0.33), (None, None)), run("4", (0.36, 0.37), (0.5, 0.4))]})
    reference = table[table.Method == "Unwatermarked"].iloc[0]
    assert reference.Settings == POOLED_REFERENCE
    assert reference["Question answering Auto"] == pytest.approx(0.30)
    assert reference["Question answering Judge"] == pytest.approx(0.5)  # the one run judged
    assert list(table[table.Method == "KGW"]["Question answering Auto"]) == [0.33, 0.37]


def test_a_small_number_in_a_report_table_is_not_written_as_zero():
    """z > 4's nominal FPR (3.2e-05) read "0.000" in the report's Markdown and LaTeX calibration tables."""
    import pandas as pd

    from fwsapp.results.tables import to_latex, to_markdown

    frame = pd.DataFrame({"nominal FPR": [3.167e-05, 0.0, 0.0123]})
    assert to_markdown(frame).splitlines()[2:] == ["| 3.2e-05 |", "| 0.000 |", "| 0.012 |"]
    assert "3.2e-05" in to_latex(frame, "Calibration") and "0.012" in to_latex(frame, "Calibration")
    # Nor with one digit left: Unbiased's p < 0.0005 read a nominal FPR of 0.001, twice its own; k-SemStamp's z > 3
    # (0.00135) 0.001. Two significant digits at least, as three decimals give from 0.01 on.
    frame = pd.DataFrame({"nominal FPR": [0.0005, 0.0013499, 0.0099, 0.01, 0.125]})
    assert to_markdown(frame).splitlines()[2:] == ["| 0.0005 |", "| 0.0013 |", "| 0.0099 |", "| 0.010 |", "| 0.125 |"]


def test_a_reports_percentages_are_written_to_a_tenth_and_its_shares_to_three_decimals():
    """A judge's drop read 6.867 % in the report beside 6.9 on the FWS page, 36.364 % of 11 mentions unsupported: a
    precision no such table has. A percentage (" %" in its heading) is written to a tenth, as a share's text is; a
    rate whose heading names its FPR ("TPR at FPR 1%") is a share, to three decimals; a small percentage keeps two
    significant digits."""
    import pandas as pd

    from fwsapp.results.tables import to_latex, to_markdown

    frame = pd.DataFrame({"Coherence drop %": [6.8666, 0.04, None],
                          "Unsupported % (watermarked)": [36.3636, "not enough data (n = 4)", None],
                          "TPR at FPR 1%": [0.8125, 0.5, 1.0]})
    assert to_markdown(frame).splitlines()[2:] == ["| 6.9 | 36.4 | 0.812 |", "| 0.04 | not enough data (n = 4) | 0.500 |",
                                                   "| – | – | 1.000 |"]
    latex = to_latex(frame, "Drops")
    assert "6.9 & 36.4 & 0.812" in latex and "0.04 & not enough data (n = 4) & 0.500" in latex
    assert "\\begin{tabular}{rlr}" in latex  # numbers right-aligned, as pandas set them


def test_a_latex_tables_signs_are_escaped_as_its_caption_is():
    """pandas' escaping left '>' in "z > 4", which LaTeX's default font encoding prints as '¿'."""
    import pandas as pd

    from fwsapp.results.tables import to_latex

    latex = to_latex(pd.DataFrame({"theoretical threshold": ["z > 4"], "p < 1%": ["a_b & c"]}), "p < 0.01")
    assert "z \\textgreater{} 4" in latex and "p \\textless{} 1\\%" in latex and "a\\_b \\& c" in latex
    assert "\\caption{p \\textless{} 0.01}" in latex and not re.search(r"[<>]", latex)


def test_the_report_names_the_values_it_reads_under_earlier_settings(tmp_path):
    """A run whose factual consistency was computed before its recognizer's upgrade, and not since: the report read
    those values as today's with no word. The runs table says which metrics are read under other settings than `score`
    uses now, until `score` computes them again."""
    from fwsapp.quality.base import metric_row
    from fwsapp.quality.scoring import QualityResources, stored_as
    from fwsapp.results.tables import runs_table
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    run_id = imported_qa_db(tmp_path / "r.duckdb", n=2)
    store = Store(tmp_path / "r.duckdb")
    name, config, kinds = stored_as("factuality", store.run(run_id), QualityResources(model_loader=None))

    def stored(written_config: str, value: float) -> None:
        store.write_rows("metrics", run_id, [metric_row(sample, kind, name, written_config, value)
                                             for sample in range(2) for kind in kinds])

    def read_under_other_settings():
        return runs_table(build_report(store)).set_index("Run").at[run_id, "Read under other settings"]

    assert read_under_other_settings() is None  # ROUGE and F1, brought by the import, are today's
    stored(config.replace(" v", " v0."), 0.25)
    assert read_under_other_settings() == "Factuality"
    stored(config, 0.75)
    assert read_under_other_settings() is None
    store.close()


def test_settings_given_at_import_are_the_runs_and_one_log_has_one_run_however_imported(store, monkeypatch):
    """A log made on a smaller GPU (the paper's jsl summarization: 492 CUDA blocks) is read under its own green lists
    only when the run says so; the files' names carry γ and δ alone."""
    log = LogFile("KGW-g0.25-d2-jsl-MEQS.generations.json", json.dumps(GOOD_GENERATIONS).encode())
    plain = import_logs(store, method="KGW", model="jsl", task_name="summarization", generations=log)
    given = import_logs(store, method="KGW", model="jsl", task_name="summarization", generations=log,
                        params=["cuda_blocks=492"])
    assert given != plain
    assert store.run(given)["params"] == {"gamma": 0.25, "delta": 2.0, "cuda_blocks": 492}
    # A setting at its default, or the one the names say, is no setting given: the same run, nothing changed.
    before = store.revision()
    assert import_logs(store, method="KGW", model="jsl", task_name="summarization", generations=log,
                       params={"cuda_blocks": 0, "gamma": 0.25, "delta": 2.0, "rng": "cuda"}) == plain
    assert store.revision() == before
    for params, message in [(["gamma=0.5"], "The files' names say gamma=0.25, but the settings given say gamma=0.5"),
                            (["blocks=1"], "KGW has no parameter 'blocks'"),
                            (["cuda_blocks=-1"], "cuda_blocks=-1 is out of range")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            import_logs(store, method="KGW", model="jsl", task_name="summarization", generations=log, params=params)
    assert store.revision() == before
    # A key is recorded as the generated runs record theirs: the variable's name and the key's fingerprint.
    monkeypatch.setenv("LOG_KEY", "20260801")
    keyed = import_logs(store, method="KGW", model="jsl", task_name="summarization", generations=log,
                        params=["hash_key=$LOG_KEY"])
    recorded = store.run(keyed)["params"]["hash_key"]
    assert recorded.startswith("$LOG_KEY scrypt:") and "20260801" not in str(store.run(keyed))
