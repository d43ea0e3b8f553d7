"""Issue 58, items 8, 10 and 11: one sample-size rule for the Robustness table and its heatmap, the threshold text from
the runs shown, and an import's settings read from the paper's file names."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fwsapp.robustness.attack_sets import CLEAN, method_by_attack, shown_table, thresholds


def frame(texts: int, method: str = "vLLM-Gumbel", params: dict | None = None) -> pd.DataFrame:
    rows = [{"run": "a run", "attack_label": label, "texts": texts, "method": method, "detector_params": params or {},
             "auroc": auroc, "auroc_ci": None, "still_detected": share, "TPR at 1% FPR": share}
            for label, auroc, share in ((CLEAN, 0.88, 0.75), ("typo", 0.7, 0.25))]
    return pd.DataFrame(rows)


def test_the_table_and_the_heatmap_follow_one_sample_size_rule():
    small, large = frame(4), frame(40)
    for measure in ("Still detected (share)", "TPR at 1% FPR"):
        table, heatmap = shown_table(small, measure), method_by_attack(small, measure)
        assert (table == "not enough data (n = 4)").all().all(), table
        assert heatmap.isna().all().all(), heatmap  # no 0.75 under a table that says there is not enough data
        assert method_by_attack(large, measure).notna().all().all()
    assert shown_table(large, "Still detected (share)").loc["a run", CLEAN].startswith("0.75 (")
    # An AUROC is shown at any size, as the Detect page, the report and `attack` show it, its interval only from 10
    # texts a side: the table read "not enough data (n = 8)" where `attack` had just printed "AUROC 0.859".
    table, heatmap = shown_table(small.assign(negative_texts=3), "AUROC"), method_by_attack(small, "AUROC")
    assert table.loc["a run"].tolist() == ["0.880 (no interval: n = 3)",
                                           "0.700 (no interval: n = 3)"]
    assert heatmap.loc["a run"].tolist() == [0.88, 0.7]
    assert shown_table(large, "AUROC").loc["a run", CLEAN] == "0.880"  # enough texts, no interval stored


def test_the_report_and_the_table_of_every_set_follow_the_pages_sample_size_rule():
    """The report's robustness table printed "Still detected 0.125" for 8 texts where the page's table said "not enough
    data (n = 8)", and "–" (the report's "not computed yet") for a TPR at 1 % FPR that 8, or 50, negatives cannot
    resolve, where Table 1 says "not enough data"; an AUROC is shown at any size."""
    from fwsapp.results.robustness_table import every_set
    from fwsapp.results.tables import robustness_table
    from fwsapp.robustness.attack_sets import flattened

    small = {"attack_label": "typo (p=0.05)", "texts": 8, "negative_texts": 8, "auroc": 0.8, "auroc_ci": None,
             "tpr_at_fpr": {"0": 0.0, "0.01": None, "0.05": 0.25}, "still_detected": 0.125, "words_changed": 0.2}
    large = {**small, "texts": 40, "negative_texts": 100, "tpr_at_fpr": {"0": 0.1, "0.01": 0.5, "0.05": 0.6}}
    report = robustness_table({"runs": [{"model": "m", "task": "qa", "method": "KGW", "settings": "",
                                         "robustness": [small, large]}]})
    columns = ["AUROC", "TPR at 1% FPR", "Still detected (share)", "Words changed"]
    shown = report.loc[0, columns].tolist()
    assert shown == [0.8, "not enough data (n = 8)", "not enough data (n = 8)", 0.2]
    assert report.loc[1, columns].tolist() == [0.8, 0.5, 0.125, 0.2]
    unresolved = {**large, "negative_texts": 50, "tpr_at_fpr": {"0": 0.1, "0.01": None, "0.05": 0.6}}
    report = robustness_table({"runs": [{"model": "m", "task": "qa", "method": "KGW", "settings": "",
                                         "robustness": [unresolved]}]})
    assert report.loc[0, columns].tolist() == [0.8, "not enough data (n = 50)", 0.125, 0.2]
    table = shown_table(flattened([unresolved]).assign(run="a run", method="KGW", detector_params=[{}]), "TPR at 1% FPR")
    assert table.loc["a run", "typo (p=0.05)"] == "not enough data (n = 50)"  # the page's cell read None
    listed = every_set(flattened([small, large]).assign(run="KGW · qa"))
    assert listed.loc[0, ["TPR at 5% FPR", "Still detected (share)"]].tolist() == ["not enough data (n = 8)"] * 2
    assert listed.loc[1, ["TPR at 5% FPR", "Still detected (share)"]].tolist() == [0.6, 0.125]


def test_survival_where_there_was_no_mention_to_keep_says_so():
    """A dose change on answers that state no dose: its survival cell was blank, as if it were not measured, and the
    attack's line said only "words changed 0.0%"."""
    from fwsapp.cli.attack import attack_line

    rows = frame(40).assign(attack=["dose-change"] * 2, mentions=[0, 5], mentions_kept=[0, 4],
                            entity_survival=[None, 0.8])
    assert shown_table(rows, "Entity survival").loc["a run"].tolist() == ["no mentions to keep", "0.80 (4 of 5 mentions)"]
    line = attack_line({**rows.iloc[0].to_dict(), "tpr_at_fpr": {"0.01": 0.75}, "negative_texts": 40, "negatives": "unwatermarked",
                        "words_changed": 0.0})
    assert line.endswith("; words changed 0.0%; no dose mention in any text, so it changed nothing"), line
    changed = attack_line({**rows.iloc[1].to_dict(), "tpr_at_fpr": None, "negative_texts": 40, "negatives": "x",
                           "words_changed": 0.0002})
    assert changed.endswith("; words changed under 0.1%; dose mentions kept 4 of 5"), changed


def test_the_threshold_text_comes_from_the_runs_shown():
    assert thresholds(frame(40)) == "p ≤ 0.01 for vLLM-Gumbel"
    both = pd.concat([frame(40), frame(40, "KGW", {"z_threshold": 4.0})])
    assert thresholds(both) == "p ≤ 0.01 for vLLM-Gumbel; z > 4 for KGW"
    assert thresholds(frame(40).assign(detector_params=[np.nan, np.nan])) == "each method's own"


def test_an_import_records_the_settings_its_file_names_carry(tmp_path):
    from fwsapp.cli import main
    from fwsapp.results.run_names import settings
    from fwsapp.store import Store
    from tests.test_malformed_inputs import GOOD

    path = tmp_path / "KGW-g0.5-d2-biomistral-HQA.generations.json"
    path.write_text(json.dumps(GOOD))
    db = tmp_path / "names.duckdb"
    assert main(["import", "--method", "KGW", "--model", "biomistral", "--task", "qa", "--generations", str(path),
                 "--db", str(db)]) == 0
    run = Store(db, read_only=True).runs().iloc[0]
    assert json.loads(run.params) == {"gamma": 0.5, "delta": 2.0}
    assert settings(run.method, run.params, True) == "imported, delta=2, gamma=0.5"
    plain = tmp_path / "logs.json"
    plain.write_text(json.dumps(GOOD))
    assert main(["import", "--method", "KGW", "--model", "m", "--task", "qa", "--generations", str(plain), "--db",
                 str(tmp_path / "plain.duckdb")]) == 0
    assert json.loads(Store(tmp_path / "plain.duckdb", read_only=True).runs().params.iloc[0]) == {}


def test_each_kind_of_fact_has_a_survival_measure_named_as_its_captions_name_it():
    """The Robustness page offered "Fact survival (chemical)" beside captions and tabs that call the kind "drugs"; the
    report's table had the same label. Each kind is one measure, its label the kind's own plural."""
    from fwsapp.entities.recognizers import KINDS
    from fwsapp.results.tables import robustness_table
    from fwsapp.robustness.attack_sets import MEASURES, survival_column

    survival = {label: column for label, column in MEASURES.items() if label.startswith("Fact survival")}
    assert survival == {f"Fact survival ({kind.plural})": survival_column(name) for name, kind in KINDS.items()}
    assert "Fact survival (drugs)" in survival
    row = {"attack_label": "typo", "texts": 40, "auroc": 0.7, "auroc_ci": None, "tpr_at_fpr": None,
           "still_detected": 0.25, "entity_survival": 0.5,
           **{column: 0.5 for column in survival.values()}}
    table = robustness_table({"runs": [{"model": "m", "task": "qa", "method": "KGW", "settings": "", "robustness": [row]}]})
    assert set(survival) <= set(table.columns)


def test_every_attack_set_is_read_under_the_headings_the_report_uses_counts_whole():
    """The Robustness page's table of every set showed the summary's raw columns (run_id, words_changed, 101.0
    mentions); the report's robustness table left out what each attack did to the text. Both head the same columns
    alike now, and the report carries the words changed and the similarity beside the detection."""
    from fwsapp.results.robustness_table import every_set
    from fwsapp.results.tables import robustness_table
    from fwsapp.robustness.attack_sets import HEADINGS, flattened

    clean = {"attack_label": "clean (no attack)", "seed": None, "texts": 200, "auroc": 1.0, "auroc_ci": [0.99, 1.0],
             "tpr_at_fpr": {"0": 0.9, "0.01": 1.0, "0.05": 1.0}, "still_detected": 1.0, "words_changed": 0.0,
             "similarity": 1.0, "mentions": None, "entity_survival": None, "run_id": "r1", "set_id": "s1"}
    attacked = {**clean, "attack_label": "dose-change (k=1)", "seed": 0, "words_changed": 0.00015, "similarity": 0.97,
                "mentions": 101, "entity_survival": 0.644, "tpr_at_fpr": {"0": 0.5, "0.01": 0.8, "0.05": 0.9}}
    table = every_set(flattened([clean, attacked]).assign(run="KGW · qa"))
    assert list(table.columns) == ["Run", *[HEADINGS[column] for column in HEADINGS if column in (
        *clean, "TPR at 0% FPR", "TPR at 1% FPR", "TPR at 5% FPR", "AUROC 95% CI")]]
    assert table["Mentions"].tolist()[1] == 101 and str(table["Mentions"].dtype) == "Int64"
    assert table["TPR at 1% FPR"].tolist() == [1.0, 0.8] and table["AUROC 95% CI"][0] == "0.990–1.000"
    report = robustness_table({"runs": [{"model": "m", "task": "qa", "method": "KGW", "settings": "",
                                         "robustness": [clean, attacked]}]})
    assert report.loc[1, ["Attack", "TPR at 1% FPR", "Words changed", "Similarity to the clean text"]].tolist() == [
        "dose-change (k=1)", 0.8, 0.00015, 0.97]
    assert "Baseline note" not in report.columns


def test_a_measured_share_is_written_to_a_tenth_of_a_percent_and_never_rounded_to_none_or_all():
    from fwsapp import share_text

    assert [share_text(share) for share in (0, 0.0002, 0.0005, 0.01, 0.375, 0.996, 0.9996, 1)] == [
        "0.0%", "under 0.1%", "0.1%", "1.0%", "37.5%", "99.6%", "over 99.9%", "100.0%"]
