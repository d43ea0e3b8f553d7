"""Detect: how detectable each watermark is (RQ1): method comparison, ROC curves, sweeps, score
distributions, a token-level view, and a detector for any pasted text."""
import json

import plotly.express as px
import streamlit as st

from fwsapp import counted, percent, units
from fwsapp.detection import roc
from fwsapp.detection.deduplication import deduplication_problem
from fwsapp.detection.key_audit import audit_problem
from fwsapp.detection.redetect import reproduction
from fwsapp.detection.verdicts import MinimumLength
from fwsapp.entities.recognizers.base import parse_records_jsonl
from fwsapp.orchestration import pipeline
from fwsapp.ui import render as markup
from fwsapp.results.run_names import run_label
from fwsapp.ui import queries, resources, widgets
from fwsapp.data.tasks import TASKS, tasks_named
from fwsapp.generation.run_config import RunConfig
from fwsapp.models import EMBEDDED_MODEL
from fwsapp.watermark.methods import METHODS, p_resolution, post_hoc_names, score_label, sweep_grids, watermark_names
from fwsapp.models.tokenizers import TOKENIZERS, run_tokenizer
from fwsapp.detection.length import LENGTH_GRID, winmax
from fwsapp.sample_size import MINIMUM
from fwsapp.results.report import rates_shown
from fwsapp.results.run_names import ready
from fwsapp.ui.router import through_router

through_router()


def token_view(method: str, tokens: list[str], found, window: tuple[int, int] | None = None) -> None:
    """The tokens coloured by how each counts, with WinMax's best window underlined; methods that score the whole sequence
    say so instead."""
    if not found.token_flags:
        st.info(f"{method} scores the text as a whole ({METHODS[method].score_label}), not token by token, so "
                "there is no per-token colouring.")
        return
    st.markdown(markup.detection_tokens(tokens, found, window), unsafe_allow_html=True)
    st.caption(markup.detection_legend(method, found, window))


def length_view(chosen: list[str], labels: dict[str, str]) -> None:
    """How long a text must be: TPR after T tokens and tokens to detect, per run."""
    st.subheader("Detection by length: how many tokens each watermark needs")
    fpr = st.radio("False-positive rate of the verdicts", (0.01, 0.05), format_func=percent, horizontal=True,
                   key="length-fpr")
    frames = queries.lengths(resources.revision(), tuple(chosen), fpr)
    runs = queries.runs(resources.revision())
    frames["missing"] = [run for run in frames["missing"] if run in set(ready(runs).run_id)]
    if frames["missing"]:
        manager = resources.jobs()
        st.info(markup.message(f"{counted(len(frames['missing']), 'run has', 'runs have')} no scores by length yet "
                               "(imported, stored before they were kept, or a method that must detect each prefix "
                               "again): " + ", ".join(labels[run] for run in frames["missing"])))
        missing = runs[runs.run_id.isin(frames["missing"])]
        tokenizer, problems = widgets.tokenizer_choice(missing, "length-tokenizer", leaves_out=True)
        scorable = [run for run in frames["missing"] if run not in problems]
        if st.button(f"Score {len(scorable)} of them by length" if problems else "Score them by length",
                     disabled=not scorable or bool(manager.active("lengths"))):
            manager.start_lengths(scorable, tokenizer)
            st.rerun()
        widgets.job_status("lengths", "texts")
    if frames["summary"].empty:
        return
    widgets.table(widgets.uniform(frames["summary"]))
    rates = frames["rates"].dropna(subset=["tokens", "TPR"])
    if not rates.empty:
        figure = px.line(rates, x="tokens", y="TPR", color="run", markers=True, log_x=True, hover_data=["texts", "FPR"],
                         labels={"tokens": "T: tokens read", "TPR": f"TPR (verdict at {percent(fpr)} FPR)"})
        figure.update_yaxes(range=[-0.02, 1.02])
        figure.update_xaxes(tickvals=list(LENGTH_GRID))  # the lengths tabulated, not the log axis' minor ticks
        figure.update_layout(legend=widgets.LEGEND_BELOW)
        widgets.chart(figure)
    if not frames["detected_by"].empty:
        steps = px.line(frames["detected_by"], x="T", y="share detected", color="run", line_shape="hv", markers=True,
                        hover_data=["detected"], labels={"T": "T: tokens read", "share detected":
                                                         "share of the watermarked texts detected by T"})
        steps.add_hline(y=0.5, line_dash="dot", annotation_text="median", annotation_position="top left")
        steps.update_yaxes(range=[-0.02, 1.02])
        widgets.chart(steps.update_layout(legend=widgets.LEGEND_BELOW))
    widgets.table(widgets.uniform(rates_shown(frames["rates"])))
    st.caption("T counts the text's tokens from its start; after T tokens a text is scored on those alone (the score "
               "its detector gives that prefix). Tokens to detect is the T from which a text stays detected; a text "
               "not detected at its full length is never detected, counted apart, not left out: a run's steps cross "
               "the dotted line at its median and end short of 1 by the share never detected. TPR after T counts "
               "texts at least T tokens long, and FPR the negatives that long under the same threshold: nominal for "
               "z and p (SynthID's and DiPmark's scores standardised to z). A rate needs "
               f"{MINIMUM['rate']} texts or more.")
    predicted_view(chosen, fpr)


def predicted_view(chosen: list[str], fpr: float) -> None:
    """Tokens to detect predicted from the model's entropy, against the measured ones."""
    st.markdown("**Predicted from entropy**: how long an answer must be, from the model's next-token distributions")
    table = queries.length_predictions(resources.revision(), tuple(chosen), fpr)
    predictable = queries.unpredicted_runs(resources.revision(), tuple(chosen))
    manager = resources.jobs()
    if predictable and st.button(f"Predict {counted(len(predictable), 'run', 'runs')} from entropy", key="predict-start",
                                 disabled=bool(manager.active("predict"))):
        manager.start_length_predictions(predictable)
        st.rerun()
    widgets.job_status("predict", "answers")
    if table.empty:
        st.caption("No selected run has predictions yet. The run's model reads each watermarked answer and gives, per "
                   "token, the spike entropy (green lists) or the chosen token's probability (Gumbel sampling).")
        return
    shown = widgets.uniform(tasks_named(table))
    widgets.table(shown)
    st.caption("Predicted: the first T from which the statistic the answer's entropy leads one to expect passes the "
               "same threshold as the measured curves (green lists: Kirchenbauer et al.'s spike-entropy bound, so an "
               "upper bound on the length; Gumbel: ψ(1 + 1/p) + γ per token). Spearman ρ ranks answers both ways. "
               "Detectable: the share of answers under 200 tokens (the EU Code of Practice's line for marking) "
               "detected by their end, predicted and measured.")


def calibration_view(tab, chosen: list[str]) -> None:
    """What each run's threshold costs on its own negatives."""
    tab.subheader("Calibration: what the threshold costs on the run's own negatives")
    calibration = queries.calibration(resources.revision(), tuple(chosen))
    widgets.exported_table(calibration, where=tab)  # as the Report page: 3.2e-05, not 0.00003
    tab.caption("Nominal FPR: what the theoretical threshold promises if every token were green by chance (z) or "
                "the p-value uniform. Achieved FPR: the share of the run's negatives it calls watermarked, with "
                "its exact 95 % interval. The thresholds that hold 1 % and 5 % on those negatives (bootstrap 95 % "
                "interval) need 100 and 20 negatives in their row; tokens scored splits the negatives by length. "
                "Repeated pairs: whether a (context, token) pair that came before in a text was scored again "
                "(each scored) or once, in a detection set made with Re-detect's deduplication "
                "(`detect --deduplicate`); repetitive text breaks the nominal rate unless it is scored once.")


def score_views(chosen: list[str], scores, steps: dict) -> None:
    """ROC curves, score distributions and every text's scores, for the chosen runs (`steps`: each run's p-value step,
    `p_resolution`)."""
    st.subheader("ROC curves")
    curves = queries.roc_curves(resources.revision(), tuple(chosen))
    figure = px.line(curves, x="fpr", y="tpr", color="label", labels={"fpr": "false positive rate",
                     "tpr": "true positive rate", "label": "run"}, range_x=[0, 1], range_y=[0, 1.02])
    figure.add_shape(type="line", x0=0, y0=0, x1=1, y1=1, line={"dash": "dot", "color": "grey"})
    figure.update_layout(legend=widgets.LEGEND_BELOW)
    widgets.chart(figure)
    st.subheader("Score distributions")
    st.caption("One panel per run, each on its own score axis: z-scores, mean g and p-values do not share a scale.")
    shown = scores.assign(run=scores.method + " (" + scores.method.map(score_label) + ") · " + scores.run_id)
    panels = shown.run.nunique()
    figure = px.histogram(
        shown, x="score", color="text_kind", facet_col="run", facet_col_wrap=2, barmode="overlay", nbins=30,
        opacity=0.65, labels={"score": "score", "text_kind": "text"}, height=max(320, 280 * -(-panels // 2)),
        facet_row_spacing=min(0.12, 0.9 / max(1, -(-panels // 2))), facet_col_spacing=0.08,
        color_discrete_map=widgets.BASELINE_COLOURS,
    )
    # Bins per panel: Plotly Express puts every facet's traces in one bin group, so a p-value's panel got the bins of
    # the z-scores' range beside it (two bins, 0-0.5 and 0.5-1). Each panel's texts are counted on its own axis.
    figure.for_each_trace(lambda trace: trace.update(bingroup=trace.xaxis))
    figure.update_xaxes(matches=None, showticklabels=True)
    figure.update_yaxes(matches=None, showticklabels=True, title_text="texts")
    figure.for_each_annotation(lambda note: note.update(text=note.text.removeprefix("run=")))
    widgets.chart(figure)
    st.subheader("Scores per text")
    per_text = scores.sort_values(["run_id", "sample_idx", "text_kind"], ascending=[True, True, False])
    score_is = per_text.method.map(score_label)
    # A method whose score is its z (or its p) has it once, under score; beside a method with both, its z (or p) cell
    # says so, where it read "None" as if the p were missing.
    per_text = per_text.assign(score_is=score_is, z=per_text.z.where(score_is != "z"), p=per_text.p.where(score_is != "p"))
    per_text = markup.scores_written(
        per_text[["run_id", "method", "sample_idx", "text_kind", "score_is", "score", "z", "p", "num_tokens_scored"]],
        {"score": score_is, "z": "z", "p": "p"}, per_text.run_id.map(steps)).dropna(axis=1, how="all")  # 1e-30 not "0"
    per_text = per_text.assign(**{column: per_text[column].mask(score_is == column, "= score")
                                  for column in ("z", "p") if column in per_text})
    st.dataframe(per_text.rename(columns=PER_TEXT_HEADINGS), hide_index=True, width="stretch")


PER_TEXT_HEADINGS = {"run_id": "run", "sample_idx": "sample", "text_kind": "text", "score_is": "score is",
                     "num_tokens_scored": "tokens scored"}


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Detect")
    st.caption(
        "Positives are watermarked texts. Negatives are the run's unwatermarked texts, or the human reference where a "
        "run has none (imported logs, and the post-hoc detectors "
        f"({', '.join(post_hoc_names())}), whose positives are model text): the negatives column says which, per run. "
        f"Scores that are p-values ({', '.join(entry.name for entry in METHODS if entry.score_direction == 'lower')}) "
        "are lower for watermarked text; every metric below respects each run's direction. "
        "TPR thresholds are set on the negatives; ties at the threshold are not flagged, so the FPR never exceeds "
        "its target."
    )
    runs = queries.runs(resources.revision())
    if runs.empty:
        widgets.no_runs_yet()  # the detector for pasted text below needs no run
    else:
        labels = {row.run_id: run_label(row._asdict()) for row in runs.itertuples()}
        default = resources.latest_sweep() or list(labels)[: min(4, len(labels))]
        chosen = st.multiselect("Runs", list(labels), default=[run for run in default if run in labels],
                                format_func=labels.get, key="detect-runs")
        selected = runs[runs.run_id.isin(chosen)]
        # Where a method's p-value counts null keys, its 0 is one below the step: 0 of 500 reads "< 0.002".
        steps = {row.run_id: p_resolution(row.method, row.params) for row in selected.itertuples()}
        scores = queries.detections(resources.revision(), tuple(chosen))
        comparison = queries.detection_comparison(resources.revision(), tuple(chosen))
        if not comparison.empty:
            method_comparison(comparison, steps)
            redetected, unreproduced = queries.redetection_comparison(resources.revision(), tuple(chosen))
            for run_id, agreement in unreproduced.items():
                st.warning(markup.message(
                    f"{labels.get(run_id, run_id)}: detected again under its own settings, "
                    f"{reproduction(agreement)}. The log was scored under other settings (another generator, key or "
                    "tokenizer; the paper's jsl summarization log needs 492 CUDA blocks): find them with Re-detect "
                    "below, then import the log again with them (the Import page's settings), so that attacks and "
                    "every later stage read them."))
            if not redetected.empty:
                st.caption("Detection sets: the runs' texts scored again (Re-detect, below), beside their own scores. "
                           "max |Δ| compares with the imported scores of the same texts.")
                sets = widgets.uniform(tasks_named(redetected).round(6))  # "not enough data" beside 0.917
                rates = {column: st.column_config.NumberColumn(format="%.3f") for column in sets.columns
                         if column.startswith(("AUROC", "TPR")) and sets[column].dtype.kind == "f"}
                st.dataframe(widgets.rounded_as_written(sets, 3, rates), hide_index=True, width="stretch",
                             column_config=rates)  # max |Δ| keeps its digits
            coverage = queries.watermark_coverage(resources.revision(), tuple(chosen))
            for flagged in coverage[coverage["flags"] != ""].itertuples() if not coverage.empty else ():
                st.warning(markup.message(f"{flagged.method} run {flagged.run} carries no watermark as asked: "
                                          f"{flagged.flags}. A detector can only find what the watermark put there "
                                          "(Coverage tab)."))
            length_tab, calibration_tab, coverage_tab, audit_tab = st.tabs(
                ["Length", "Calibration", "Coverage", "Key audit"])
            with length_tab:
                length_view(chosen, labels)
            coverage_view(coverage_tab, coverage)
            with audit_tab, widgets.section("The key audit"):
                key_audit_view(selected, labels)
            calibration_view(calibration_tab, chosen)
            score_views(chosen, scores, steps)

            st.subheader("Token-level view")
            with widgets.section("The token-level view"):
                token_level_view(selected, labels)

    with widgets.kept_open("Re-detect a run: its texts scored under any method, parameters and tokenizer",
                           "redetect-open"):
        with widgets.section("Re-detect"):
            redetect_form()

    with widgets.kept_open("Run a hyperparameter sweep (the paper's Figure 5)", "sweep-open"):
        sweep_form()

    st.subheader("Detect a watermark in any text")
    with widgets.section("The detector for any text"):
        detector_for_any_text()


def method_comparison(comparison, steps: dict) -> None:
    """Each chosen run's detection at a glance: AUROC, TPR at fixed FPRs, its verdicts and typical score."""
    st.subheader("Method comparison")
    # A typical p in significant digits: a strong watermark's median p of 1e-20 read 0.000. Only where there is a p:
    # a column of z-scores alone stays numbers, sorted as numbers.
    statistics = [score_label(method) for method in comparison.method]
    typical = (markup.scores_written(comparison, {"positives' typical score": statistics}, comparison.run.map(steps))
               if "p" in statistics else comparison)
    shown = widgets.uniform(tasks_named(typical).round(3))
    # Column settings from the table shown: the comparison's float column of typical scores would write the text
    # "2.06e-90" back as a number to three decimals, 0.000, in the browser.
    widgets.table(shown)
    if warning := roc.unresolved_fpr_warning(dict(zip(comparison.run, comparison["n negatives"]))):
        st.warning(markup.message(warning))


def coverage_view(tab, coverage) -> None:
    tab.subheader("Coverage: how much of the output carries the watermark")
    if coverage.empty:
        tab.info("No run generated here is selected: imported runs keep no decoding to replay.")
        return
    tab.dataframe(tasks_named(coverage), hide_index=True, width="stretch",
                  column_config={"watermarked share": st.column_config.NumberColumn(format="%.3f")})
    tab.caption("Each generated token is watermarked, or left alone for the reason its method's processor has: greedy "
                "decoding (vLLM's Gumbel samples it plainly), a repeated context, a context reaching into the prompt. "
                "Same without the watermark: answers identical to the run's unwatermarked ones.")


def key_audit_view(selected, labels: dict[str, str]) -> None:
    """False positives under the deployer's key: a run's method and key over human text, against drawn keys."""
    st.subheader("Key audit: false positives under your key")
    auditable = [row.run_id for row in selected.itertuples() if audit_problem(row.method) is None]
    if not auditable:
        st.info("No selected run has a keyed watermark to audit: choose a run of "
                f"{', '.join(name for name in watermark_names() if audit_problem(name) is None)}.")
        return
    columns = st.columns([3, 1, 1])
    run_id = columns[0].selectbox("Run", auditable, format_func=labels.get, key="audit-run",
                                  index=widgets.first_detectable(selected, auditable))
    keys = columns[1].number_input("Keys", min_value=2, max_value=50, value=10, key="audit-keys",
                                   help="the run's key and this many − 1 drawn ones")
    seed = columns[2].number_input("Seed", min_value=0, value=0, key="audit-seed", help="seeds the drawn keys")
    upload = st.file_uploader('Human texts (JSONL of {"text": ...}, e.g. your own notes); default: the run\'s '
                              "references", type=["jsonl"], key="audit-corpus")
    tokenizer, problems = widgets.tokenizer_choice(selected[selected.run_id == run_id], "audit-tokenizer")
    if st.button("Audit", key="audit-start", disabled=bool(problems)):
        with st.spinner("Detecting the human texts under every key"):
            try:
                corpus = None if upload is None else [
                    record["text"] for record in parse_records_jsonl(upload.getvalue(), upload.name)]
                st.session_state["audit-result"] = (run_id, None if upload is None else upload.name, pipeline.audit_keys(
                    resources.store(), run_id, resources.model, int(keys), int(seed), corpus=corpus,
                    tokenizer=tokenizer))
            except ValueError as error:
                st.error(markup.message(str(error)))
    shown = st.session_state.get("audit-result")
    if shown is None or shown[0] != run_id:
        st.caption("The run's method detects human text under the run's key and drawn ones, with and without "
                   "deduplication; nothing is stored.")
        return
    _, corpus_name, found = shown
    st.caption(markup.message(f"{found.method}: {found.texts} human texts ({corpus_name or 'the run’s references'}, "
                              f"{found.tokenizer}) under {len(found.table) // max(1, found.table.deduplication.nunique())}"
                              " keys. Each FPR with its exact 95 % interval; KS p tests the p-values for uniformity (a count's "
                              "randomized at its ties: its plain p-values fall on steps)."))
    st.dataframe(found.written(), hide_index=True, width="stretch")
    for line in found.summary():
        st.markdown(markup.message(line))


def token_level_view(selected, labels: dict[str, str]) -> None:
    """A stored text's tokens coloured by how each counts, under its run's method."""
    # A run still generating its first batch has nothing to show yet.
    generated = selected[~selected.imported & (selected.samples_done > 0)]
    if generated.empty:
        st.info("The token view needs a generated run with stored samples: imported runs have no token ids or "
                "model, and a run that is still starting has no samples yet.")
    else:
        columns = st.columns(3)
        run_id = columns[0].selectbox("Run", list(generated.run_id), format_func=labels.get, key="token-run")
        table = queries.samples(resources.revision(), run_id)
        sample_idx = columns[1].selectbox("Sample", list(table.sample_idx), key="token-sample")
        kind = columns[2].radio("Text", ["watermarked", "unwatermarked"], horizontal=True, key="token-kind")
        run = generated[generated.run_id == run_id].iloc[0]
        overrides = ()
        if "rng" in METHODS[run.method].params:
            own = json.loads(run.params).get("rng", "cpu")
            rng = st.radio("Green lists from", ["cuda", "cpu"], index=["cuda", "cpu"].index(own), horizontal=True,
                           key="token-rng", help="The generator that draws the green lists: cuda = MarkLLM on a "
                           f"GPU (the paper), cpu = MarkLLM on a CPU. This run was generated with {own}.")
            overrides = (("rng", rng),)
        try:
            found, tokens = queries.token_flags(resources.revision(), run_id, int(sample_idx), kind, overrides)
        except ValueError as error:
            st.info(markup.message(str(error)))
        else:
            token_view(run.method, tokens, found)
            unit = METHODS[run.method].unit
            st.caption(f"Score {markup.score_text(found.score, score_label(run.method), p_resolution(run.method, run.params))}"
                       f" over {units(found.num_tokens_scored, unit)}.")


def redetect_form() -> None:
    """Any stored run's texts scored again under any method, parameters and tokenizer, kept as a detection set."""
    st.caption("Checks texts watermarked elsewhere, such as the paper's logs or MarkLLM output from a GPU: every "
               "stored text (watermarked, unwatermarked, reference) is scored alone, as MarkLLM scores it. The "
               "scores are kept as a detection set beside the run's own; nothing is overwritten.")
    all_runs = queries.runs(resources.revision())
    if all_runs.empty:
        st.info("No runs to re-detect yet.")
    else:
        run_labels = {row.run_id: run_label(row._asdict()) for row in all_runs.itertuples()}
        columns = st.columns(3)
        target = columns[0].selectbox("Run", list(run_labels), format_func=run_labels.get, key="redetect-run",
                                      index=widgets.first_detectable(all_runs, list(run_labels)))
        target_run = all_runs[all_runs.run_id == target].iloc[0]
        watermarks = watermark_names()
        own_method = target_run.method if target_run.method in watermarks else watermarks[0]
        redetect_method = columns[1].selectbox("Method", watermarks, index=watermarks.index(own_method),
                                               key=f"redetect-method-{target}")
        suggested = run_tokenizer(target_run.model, target_run.tokenizer) or EMBEDDED_MODEL
        tokenizer_name = columns[2].text_input(
            "Tokenizer", value=suggested, key=f"redetect-tokenizer-{target}",
            help=f"{', '.join(f'{name}: {text}' for name, text in TOKENIZERS.items())}; or a Hugging Face id or folder.")
        if problem := queries.tokenizer_problem(tokenizer_name.strip() or None):  # said before the click, as every form
            st.error(markup.message(f"{target}: {problem}."))
        own_params = json.loads(target_run.params) if redetect_method == target_run.method else {}
        redetect_params = widgets.param_inputs(METHODS[redetect_method], f"redetect-{target}-{redetect_method}", own_params)
        unavailable = deduplication_problem(redetect_method)
        deduplicate = st.checkbox("Score each repeated (context, token) pair once", disabled=bool(unavailable),
                                  key=f"redetect-deduplicate-{redetect_method}",
                                  help=unavailable or "lm-watermarking's ignore_repeated_ngrams: a text that repeats "
                                       "itself (a template, a list) keeps to the nominal false-positive rate.")
        manager = resources.jobs()
        if st.button("Re-detect", disabled=bool(problem) or bool(manager.active("redetect"))):
            try:
                METHODS[redetect_method].checked_params(redetect_params)
            except ValueError as error:
                st.error(markup.message(str(error)))
            else:
                manager.start_redetect(target, redetect_method, redetect_params, tokenizer_name.strip(), deduplicate)
                st.rerun()
    widgets.job_status("redetect", "texts")


def sweep_form() -> None:
    """The paper's Figure 5: one run per setting of a method's sweep grid."""
    grids = sweep_grids()
    sweep_method = st.selectbox("Method", list(grids), key="sweep-method")
    grid = {key: st.multiselect(key, values, default=values, key=f"sweep-{sweep_method}-{key}")
            for key, values in grids[sweep_method].items()}
    columns = st.columns(4)
    task = columns[0].selectbox("Task", list(TASKS), index=1, key="sweep-task")
    count = columns[1].number_input("Samples", 2, 200, 8, key="sweep-n")
    tokens = columns[2].number_input("New tokens", 8, 512, 48, step=8, key="sweep-tokens")
    seed = columns[3].number_input("Seed", 0, 2**31 - 1, 42, key="sweep-seed")
    manager = resources.jobs()
    if st.button("Run sweep", disabled=not all(grid.values()) or bool(manager.active("sweep"))):
        base = RunConfig(task=task, method=sweep_method, n=int(count), max_new_tokens=int(tokens), batch_size=4, seed=int(seed))
        manager.start_sweep(base, grid)
        st.rerun()

    def select_sweep_runs(job) -> None:
        if job.finished and st.session_state.get("sweep_selected") != job.key:
            st.session_state["sweep_selected"] = job.key
            st.session_state.pop("detect-runs", None)  # the page reselects: the sweep's runs

    widgets.job_status("sweep", "runs", body=select_sweep_runs)


def detector_for_any_text() -> None:
    """A pasted text detected under any method, with its token view and WinMax."""
    method = st.selectbox("Method", METHODS.names(), key="paste-method",
                          help="; ".join(f"{entry.name}: {entry.help}" for entry in METHODS))
    params = widgets.param_inputs(METHODS[method], f"paste-{method}")
    text = st.text_area("Text", height=150, placeholder="Paste a generated text; it is tokenised with the embedded model's tokenizer.")
    window = st.number_input("WinMax window (tokens; 0 = off)", 0, 4096, 0, step=8, key="paste-window",
                             help="Also score the best window of this many tokens, against a threshold calibrated for a "
                                  "text of this length: finds a watermarked span pasted into a longer human text.")
    if st.button("Detect"):
        from fwsapp.watermark.factory import detect_text  # torch: imported when a text is detected, not at first paint

        try:
            found, tokens = detect_text(method, params, resources.model(EMBEDDED_MODEL), text)
        except ValueError as error:
            st.error(markup.message(str(error)))
        else:
            info = METHODS[method]
            flagged = info.is_watermarked(found.score, params)
            scored = units(found.num_tokens_scored, info.unit)
            st.metric(info.score_label, markup.score_text(found.score, info.score_label, info.p_resolution(params)),
                      help=f"{scored} scored")
            st.write(f"Verdict at {info.verdict_rule(params)}: "
                     f"**{'watermarked' if flagged else 'not watermarked'}** ({scored} scored)")
            needed = MinimumLength.uncalibrated(info, params).tokens
            if found.num_tokens_scored < needed:
                st.warning(f"Only {counted(found.num_tokens_scored, f'{info.unit} was', f'{info.unit}s were')} scored. "
                           f"A verdict needs about {needed} or more: on a text this short, read the score as no "
                           "evidence either way. Paste a longer text.")
            token_view(method, tokens, found, windowed(method, params, found, int(window)) if window else None)


def windowed(method: str, params: dict, found, window: int) -> tuple[int, int] | None:
    """WinMax's verdict, and the best window's tokens (first, end) for the token view."""
    try:
        best = winmax(method, params, found, window)
    except ValueError as error:
        st.error(markup.message(str(error)))
        return None
    label = METHODS[method].score_label
    span = (best.start, best.start + min(window, len(found.token_flags)))
    st.write(f"WinMax over {window}-token windows: {label} {markup.score_text(best.score, label)} at tokens "
             f"{span[0] + 1}–{span[1]} (underlined below); threshold for this length at "
             f"{percent(best.fpr)} FPR: {markup.score_text(best.threshold, label)} (unwatermarked texts simulated), "
             f"p = {markup.score_text(best.p, 'p')}: "
             f"**{'a watermarked span' if best.detected else 'no watermarked span'}**")
    return span


render()
