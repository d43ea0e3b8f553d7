"""Robustness: what a watermark buys. Watermarked texts attacked (edits, typos, pasted spans, swapped disease names),
then detected again against the same negatives, beside what the attack did to the text and its disease mentions."""
import plotly.express as px
import streamlit as st

from fwsapp.ui import render as markup
from fwsapp import in_words, share_text
from fwsapp.robustness.attacks import ATTACKS, DEFAULT_SEED, mention_kinds
from fwsapp.watermark.methods import post_hoc_names
from fwsapp.detection.normalizers import NORMALIZERS
from fwsapp.sample_size import MINIMUM
from fwsapp.robustness.attack_sets import (
    CLEAN,
    MEASURES,
    default_measure,
    forged,
    method_by_attack,
    thresholds,
    shown_table,
    strength_curves,
    unresolved_note,
)
from fwsapp.results.robustness_table import baseline_notes, every_set, labelled
from fwsapp.ui import queries, resources, widgets
from fwsapp.ui.router import through_router

through_router()


def launch(runs) -> None:
    """The form that attacks chosen runs in the background."""
    watermarked = runs[~runs.method.isin(post_hoc_names())]
    with widgets.kept_open("Attack runs", "attack-open", expanded=queries.robustness(resources.revision()).empty):
        labels = widgets.job_inputs(watermarked)
        first = widgets.first_detectable(watermarked, list(labels))
        chosen = st.multiselect("Runs", list(labels), default=list(labels)[first:first + 1], format_func=labels.get,
                                key="attack-runs")
        name = st.selectbox("Attack", ATTACKS.available(), key="attack-name",
                            format_func=lambda entry: f"{entry}: {ATTACKS[entry].help}")
        params = widgets.param_inputs(ATTACKS[name], f"attack-{name}")
        tokenizer, problems = widgets.tokenizer_choice(watermarked[watermarked.run_id.isin(chosen)], "attack-tokenizer")
        left, right = st.columns(2)
        seed = int(left.number_input("Seed", 0, 2**31 - 1, DEFAULT_SEED, key="attack-seed",
                                     help="draws the edits; the same seed gives the same attacked texts"))
        normalize = right.selectbox("Normalise before detecting", [None, *NORMALIZERS], key="attack-normalize",
                                    format_func=lambda value: value or "no (as MarkLLM)",
                                    help="homoglyphs: map Unicode look-alikes back to Latin letters (the defence)")
        refused = widgets.attack_refusals(chosen, name, params)  # said before the click, never after it
        for run_id, reason in refused.items():
            st.error(markup.message(f"{labels.get(run_id, run_id)}: {reason}"))
        manager = resources.jobs()
        if st.button("Attack and detect", type="primary",
                     disabled=not chosen or bool(problems) or bool(refused) or bool(manager.active("attack"))):
            try:
                ATTACKS[name].checked_params(params)
            except ValueError as error:
                st.error(markup.message(str(error)))
            else:
                manager.start_attack(chosen, name, params, seed, normalize, tokenizer)
                st.rerun()
        widgets.job_status("attack", "texts")


def overview(frame) -> None:
    """Method × attack: the chosen removal measure per cell, and the texts behind a cell."""
    st.subheader("Method × attack: removal")
    measure = st.radio("Show", list(MEASURES), horizontal=True, key="robustness-measure",
                       index=list(MEASURES).index(default_measure(frame)),
                       help="TPR at 1% FPR needs at least 100 negatives; with fewer it is not shown")
    table = method_by_attack(frame, measure)
    st.dataframe(shown_table(frame, measure).fillna("–"), width="stretch")
    st.caption(f"Each row is a run: its method and settings, task, model and n, its watermarked texts. The first column, "
               f"{CLEAN}, is those texts detected again from text exactly as the attacked ones are, so it is the baseline "
               "each attack is read against. In brackets: the exact 95 % interval of a share over the texts, AUROC's "
               f"interval (from {MINIMUM['auroc_ci']} texts a side), or the mentions counted (each attack's own: "
               f"{in_words(mention_kinds(), 'or')}).")
    if measure in ("AUROC", "Still detected (share)"):
        st.caption("AUROC ranks the attacked texts against the negatives; the share still detected counts those past "
                   f"the method's own threshold ({thresholds(frame)}). A text can rank above every negative and still "
                   "fall short of the threshold, as short texts and weak settings do: read the two together.")
    if note := unresolved_note(frame, measure):
        st.caption(markup.message(note))
    if table.notna().any().any():
        figure = px.imshow(table, text_auto=".2f", aspect="auto", color_continuous_scale="RdYlGn", zmin=0, zmax=1,
                           labels={"color": measure, "x": "attack", "y": ""})
        figure.update_layout(height=220 + 40 * len(table), margin={"l": 10, "r": 10, "t": 10, "b": 10})
        widgets.chart(figure)
    with st.expander("Every removal attack set, with its detection and what it changed"):
        widgets.exported_table(every_set(frame))  # as the report: 0.00015, not 0.0001

    graded = [name for name in frame.attack.dropna().unique() if ATTACKS[name].strength and
              frame[frame.attack == name].params.map(lambda params: params.get(ATTACKS[name].strength)).nunique() > 1]
    if graded:
        st.subheader("Detection against attack strength")
        left, right = st.columns(2)
        attack = left.selectbox("Attack", graded, key="robustness-curve-attack")
        curve_measure = right.selectbox("Measure", list(MEASURES), key="robustness-curve-measure",
                                        index=list(MEASURES).index(default_measure(frame)))
        curves = strength_curves(frame, attack, curve_measure)
        if curves.empty:
            st.caption(f"{curve_measure} is not measured for these runs (see above).")
        else:
            figure = px.line(curves, x="strength", y="value", color="run", markers=True,
                             labels={"strength": ATTACKS[attack].strength, "value": curve_measure})
            widgets.chart(figure)


def forgery(frame) -> None:
    """Forged answers beside the removal table: how often the detector attributes them to the watermark."""
    st.subheader("Forgery: answers written to pass for watermarked")
    level = default_measure(frame)
    left, right = st.columns(2)
    left.markdown("**Called watermarked at the method's threshold**")
    left.dataframe(shown_table(frame, "Still detected (share)").drop(columns=[CLEAN], errors="ignore").fillna("–"),
                   width="stretch")
    right.markdown(f"**{level.replace('TPR', 'Forgery success')}** (against the run's negatives)")
    right.dataframe(shown_table(frame, level).drop(columns=[CLEAN], errors="ignore").fillna("–"), width="stretch")
    st.caption(markup.message(
        "Each column is a forger: it learned the watermark from the run's watermarked answers it observed, against the "
        "unwatermarked answers to the same prompts, then wrote its own answers to prompts it never saw. A high share "
        "means the watermark can be forged: it no longer proves that the model wrote a text. Similarity to the model's "
        "own answer to the same prompt says whether the forgeries still read as answers: "
        + ", ".join(f"{row.attack_label}: {row.similarity:.2f}" for row in frame.itertuples()
                    if isinstance(row.attack, str) and row.similarity == row.similarity) + "."))
    for attack in frame.attack.dropna().unique():
        curves = strength_curves(frame, attack, level)
        if curves.strength.nunique() > 1:  # forgery success as the forger reads more answers
            figure = px.line(curves, x="strength", y="value", color="run", markers=True, log_x=True,
                             labels={"strength": f"{ATTACKS[attack].strength}: watermarked answers read",
                                     "value": level.replace("TPR", "Forgery success")})
            widgets.chart(figure)


def per_text(frame) -> None:
    """An attack set's texts beside their clean ones, with what the attack changed."""
    st.subheader("Clean and attacked, text by text")
    sets = frame[frame.attack_set_id.notna()].drop_duplicates("attack_set_id")
    labels = {row.attack_set_id: f"{row.run} · {row.attack_label} · seed {int(row.seed)}" for row in sets.itertuples()}
    chosen = st.selectbox("Attack set", list(labels), format_func=labels.get, key="robustness-set")
    samples = queries.attacked_samples(resources.revision(), chosen)
    index = st.selectbox("Sample", list(samples.sample_idx), key="robustness-sample")
    row = samples.set_index("sample_idx").loc[index]
    clean_text = " ".join(row.watermarked_text.split())
    chosen_set = sets.set_index("attack_set_id").loc[chosen]
    entry = ATTACKS[chosen_set.attack]
    clean_mentions, attacked_mentions = queries.mention_spans(entry.recognizer(chosen_set.params), (clean_text, row.text))
    clean, attacked = markup.attack_changes(clean_text, row.text,
                                            [tuple(span) for span in row.spans] if row.spans is not None else [],
                                            clean_mentions, attacked_mentions, entry.spans_are)
    st.markdown(markup.change_legend(entry.spans_are, entry.fact), unsafe_allow_html=True)
    left, right = st.columns(2)
    left.markdown("**The model's own watermarked answer**" if entry.forges else "**Clean (watermarked)**")
    left.markdown(clean, unsafe_allow_html=True)
    right.markdown("**Forged answer to the same prompt**" if entry.forges else "**Attacked**")
    right.markdown(attacked, unsafe_allow_html=True)
    introduced = ", ".join(row.mentions_introduced) if row.mentions_introduced is not None and len(
        row.mentions_introduced) else "none"
    st.caption(markup.message(
        f"Words changed {share_text(row.words_changed)} · ROUGE-L to the clean text {row.rouge_l:.3f} · {entry.fact} mentions kept "
        f"{row.mentions_kept} of {row.mentions_clean} · introduced: {introduced}" + (f" · {row.note}" if row.note else "")))


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Robustness")
    st.caption("What the watermark buys: its texts edited as they will be in use (a clinician's corrections, typos, "
               "a paraphrase, a sentence pasted into a note), then detected again with the run's method and tokenizer. "
               "The negatives are the run's own unwatermarked texts, so AUROC and TPR compare with the clean run's. "
               "keep_entities leaves every disease mention verbatim: the facts stay, the wording changes. entity-swap "
               "changes the facts: does the watermark still vouch for the text? spoofing turns the question round: "
               "can someone who has read the watermarked answers make the detector vouch for a text the model never "
               "wrote?")
    runs = widgets.runs_or_stop()
    launch(runs)
    frame = queries.robustness(resources.revision())
    if frame.empty:
        st.info("No attack yet: choose runs and an attack above, or run `python -m fwsapp attack --run ID --attack "
                "word-deletion`.")
        return
    frame = labelled(frame, runs)
    for run, note in baseline_notes(frame).items():  # before the figures they qualify
        st.warning(markup.message(f"{run}: {note}."))
    forgeries = forged(frame)
    if (~forgeries & frame.attack.notna()).any():
        overview(frame[~forgeries])
    if forgeries.any():
        forgery(frame[forgeries | (frame.attack_label == CLEAN)])
    per_text(frame)


render()
