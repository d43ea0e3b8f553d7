"""Clinical facts and disease entities: the diseases, drugs, doses and durations of a sample's answers and reference
side by side, what changed between them, and the disease names a watermark introduced that the reference does not
support; clinicians record what each one really is."""
import pandas as pd
import streamlit as st

from fwsapp.ui import render as markup
from fwsapp.results.run_names import run_label
from fwsapp.ui import queries, resources, widgets
from fwsapp.entities.introduced import (
    HALLUCINATION_THRESHOLD,
    VERDICTS,
    entity_sample_label,
    name_verdict,
    names_to_judge,
    rater_verdicts,
    record_verdict,
    reviewed_samples,
    samples_by_hallucination,
    undo_verdict,
    verdict_agreement,
)
from fwsapp.data.tasks import tasks_named
from fwsapp.results.entity_table import entity_summary, shown_summary
from fwsapp.entities.recognizers import KINDS
from fwsapp.entities.recognizers.base import BRANCHES, NON_DISEASE_HEADS, OUTCOMES, STOPLIST
from fwsapp.sample_size import not_enough
from fwsapp.ui.router import through_router

through_router()


CORRUPTION_TAB = "corrupted terms"
VIEWS = ("Clinical facts", "Disease entities (Table 7)")


def render() -> None:
    """The page: the clinical facts of one sample (every kind), or the disease entities of the paper's Table 7. A
    choice, not tabs: only the view shown runs, so the entities view loads no fact recognizer."""
    st.title("Clinical facts and disease entities")
    view = st.radio("View", VIEWS, key="entities-view", horizontal=True, label_visibility="collapsed")
    if view == VIEWS[1]:
        disease_entities()
        return
    with widgets.section("The clinical facts"):
        clinical_facts()


def clinical_facts() -> None:
    """A sample's three texts side by side, a tab per kind of fact, changed facts outlined; verdicts per fact."""
    st.caption(f"Facts: {markup.fact_kinds_named()}, each normalised to its concept (a MeSH heading, a generic name, an "
               "amount or a length in one unit) with its assertion (¬ negated, ? uncertain). A fact is outlined where it changed: one "
               "answer states it and the other text does not, or makes the same statement with the other assertion. "
               "The answers were written independently, so they are compared by concept, not by position.")
    picked = facts_sample_picker()
    if picked is None:
        return
    run_id, sample_idx = picked
    found = queries.sample_facts(resources.revision(), run_id, sample_idx)
    st.markdown(markup.fact_legend(), unsafe_allow_html=True)
    rater = st.text_input("Your name (verdicts are filed under it)", key="fact-rater")
    names = {name: kind.plural for name, kind in KINDS.items()} | {CORRUPTION_TAB: CORRUPTION_TAB}
    for tab, kind in zip(st.tabs([f"{names[kind]} ({changed_count(found, kind)} changed)" for kind in names]), names):
        with tab:
            facts_side_by_side(found, kind)
            facts_changes_table(found, kind)
            if kind in KINDS:
                fact_verdicts(found, kind, rater, run_id, sample_idx)
    fact_agreement()


def fact_agreement() -> None:
    """Clinicians' verdicts on facts against the automatic comparison with the reference, per kind."""
    from fwsapp.entities.fact_review import fact_verdict_agreement

    counts, rates = fact_verdict_agreement(resources.store())
    if counts.empty:
        return
    st.subheader("Clinicians against the comparison with the reference")
    st.caption("Flagged: the reference does not state the fact, or states it with the other assertion. Precision: of "
               "the flagged facts, the share clinicians called wrong; recall: of the facts called wrong, the share "
               "flagged. 'Not a …' is left out of both. Empty: too few verdicts for a rate.")
    st.dataframe(rates, hide_index=True, width="stretch")
    st.dataframe(counts, width="stretch")


def facts_sample_picker() -> tuple[str, int] | None:
    """The run and sample to review, narrowed by a word its texts contain."""
    runs = queries.runs(resources.revision())
    if runs.empty:
        widgets.no_runs_yet()
        return None
    labels = {row.run_id: run_label(row._asdict()) for row in runs.itertuples()}
    pick = st.columns([3, 2, 3])
    run_id = pick[0].selectbox("Run", list(labels), format_func=labels.get, key="fact-run")
    needle = pick[1].text_input("Texts contain", key="fact-filter", help="e.g. a drug's name").strip().lower()
    samples = queries.samples(resources.revision(), run_id)
    if needle:
        texts = samples[["watermarked_text", "unwatermarked_text", "reference"]].fillna("").agg(" ".join, axis=1)
        samples = samples[texts.str.lower().str.contains(needle, regex=False)]
    if samples.empty:
        st.info("No sample of this run has that in its texts.")
        return None
    prompts = {int(row.sample_idx): f"{int(row.sample_idx)}: {str(row.prompt)[:80]}" for row in samples.itertuples()}
    sample_idx = pick[2].selectbox("Sample", list(prompts), format_func=prompts.get, key="fact-sample")
    st.text(f"Prompt: {samples[samples.sample_idx == sample_idx].prompt.iloc[0]}")
    return run_id, int(sample_idx)


def tab_kind(found, change) -> str:
    """The tab a change is shown in: its fact's kind (a negation: the kind of the fact it flipped), or corruption."""
    by_change = {KINDS[kind].change: kind for kind in KINDS}
    if change.kind in by_change:
        return by_change[change.kind]
    if change.kind == "negation":
        return next((fact.kind for facts in found.facts.values() for fact in facts
                     if (fact.start, fact.end) == (change.start, change.end)), CORRUPTION_TAB)
    return CORRUPTION_TAB


def changed_count(found, kind: str) -> int:
    """The facts outlined in `kind`'s tab: a fact changed against the other answer and against the reference is one."""
    return len({(text, change.start, change.end) for (text, _), changes in found.changes.items() for change in changes
                if tab_kind(found, change) == kind})


def changed_in_tab(found, text_kind: str, kind: str) -> dict:
    """The spans of a text with a change shown in `kind`'s tab: span -> [(against, Change)]."""
    return {span: shown for span, marks in found.changed_spans(text_kind).items()
            if (shown := [(against, change) for against, change in marks if tab_kind(found, change) == kind])}


def facts_side_by_side(found, kind: str) -> None:
    columns = st.columns(len(found.texts))
    for column, text_kind in zip(columns, found.texts):
        facts = [fact for fact in found.facts[text_kind] if fact.kind == kind]
        changed = changed_in_tab(found, text_kind, kind)
        column.markdown(f"**{text_kind.capitalize()}**")
        column.markdown(markup.highlight_facts(found.texts[text_kind], facts, changed), unsafe_allow_html=True)


def facts_changes_table(found, kind: str) -> None:
    rows = [{"text": text, "against": against, "change": change.kind, "was": change.was, "now": change.now,
             "characters": f"{change.start}–{change.end}"}
            for (text, against), changes in found.changes.items() for change in changes if tab_kind(found, change) == kind]
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    else:
        st.caption("No change of this kind between these texts.")


def fact_verdicts(found, kind: str, rater: str, run_id: str, sample_idx: int) -> None:
    """A verdict per fact of the two answers, changed facts first: changed as the tab counts them (a fact of its kind
    the other text does not state), or corrupted (its name misspelt, counted in the corrupted terms' tab)."""
    from fwsapp.entities.fact_review import (
        FACT_VERDICTS, flagged, rater_fact_verdicts, record_fact_verdict, undo_fact_verdict, verdict_label)

    if not rater.strip():
        st.info("Enter your name above to record verdicts.")
    recorded = rater_fact_verdicts(resources.store(), rater, run_id, sample_idx)
    labels = {code: verdict_label(code, kind) for code in FACT_VERDICTS}
    for text_kind in ("watermarked", "unwatermarked"):
        changed, corrupted = changed_in_tab(found, text_kind, kind), changed_in_tab(found, text_kind, CORRUPTION_TAB)
        facts = sorted((fact for fact in found.facts.get(text_kind, []) if fact.kind == kind),
                       key=lambda fact: ((fact.start, fact.end) not in changed | corrupted, fact.start))
        for fact in facts:
            key = f"fact-verdict-{rater.strip()}-{run_id}-{sample_idx}-{text_kind}-{kind}-{fact.start}"
            stored = recorded.get((text_kind, kind, fact.start))
            line = st.columns([3, 5, 1])
            marks = "".join(f" · {mark}" for mark, spans in (("changed", changed), ("corrupted", corrupted))
                            if (fact.start, fact.end) in spans)
            line[0].markdown(f"{text_kind}: **{markup.inert(fact.text)}** ({markup.inert(fact.value)}, {fact.assertion})"
                             f"{marks}", unsafe_allow_html=True)
            choice = line[1].radio("Verdict", list(labels), format_func=labels.get, horizontal=True, key=key,
                                   index=list(labels).index(stored) if stored else None, label_visibility="collapsed",
                                   disabled=not rater.strip())
            if choice is not None and choice != stored:
                record_fact_verdict(resources.store(), rater, run_id, sample_idx, text_kind, fact, choice,
                                    flagged(found, text_kind, fact))
                line[0].caption(f"Recorded for {rater.strip()}: {labels[choice]}")
            if stored is not None and line[2].button("Undo", key=f"undo-{key}"):
                undo_fact_verdict(resources.store(), rater, run_id, sample_idx, text_kind, fact)
                del st.session_state[key]
                st.rerun()


def analysed_entities_or_stop():
    """The runs, their entities and analyses; where none is analysed yet, the button that analyses them, and a stop."""
    runs = queries.runs(resources.revision())
    entities, analyses = queries.entity_rows(resources.revision())
    if analyses.empty:
        manager = resources.jobs()
        if runs.empty:
            widgets.no_runs_yet()
            st.stop()
        whose = "the run's" if len(runs) == 1 else f"the {len(runs):,} runs'"
        st.info(f"No entity analysis yet. Analysing finds the disease names in {whose} texts with the trained "
                "recognizer (about a minute for 200 samples here); `python -m fwsapp analyze --all` does the same.")
        if st.button("Analyse every run now", type="primary", disabled=bool(manager.active("analyze"))):
            manager.start_analysis(list(runs.run_id), None)
            st.rerun()
        widgets.job_status("analyze", "samples")
        st.stop()
    if resources.jobs().active("analyze"):  # samples are still arriving: say how far the analysis is
        widgets.job_status("analyze", "samples")
    return runs, entities, analyses


def table7(entities, analyses, runs):
    """The paper's Table 7 per method, over the kind of entity counted; returns the entities counted."""
    counted = st.radio("Count", ["all", *BRANCHES], horizontal=True, key="entity-branch",
                       format_func={"all": "diseases and signs or symptoms", BRANCHES[0]: "diseases only",
                                    BRANCHES[1]: "signs and symptoms only (MeSH C23.888: cough, fever, weight loss…)"}.get)
    if counted != "all":
        entities = entities[entities.branch == counted]

    st.subheader("Per method (the paper's Table 7)")
    summary = entity_summary(entities, analyses, runs)
    # "unsupported by the reference" is said once, in the caption: in every header it pushed the increase off a 1,400 px page.
    short = {column: column.replace("unsupported by the reference", "unsupported")
             for column in summary.columns if "unsupported by the reference" in column}
    widgets.exported_table(tasks_named(shown_summary(summary)), headings=short)
    st.caption("Unsupported: unsupported by the reference. None: not measured (no mentions of that kind). Rates count the "
               "entities selected above.")
    return entities


def browser_filters(entities, analyses, runs):
    """The runs, name and similarity filters of the browser: the entities shown and their samples, most unsupported
    first; a stop where none matches."""
    st.subheader("Browser")
    analysed = runs[runs.run_id.isin(set(analyses.run_id))]
    labels = {row.run_id: run_label(row._asdict()) for row in analysed.itertuples()}
    filters = st.columns(3)
    chosen_runs = filters[0].multiselect("Methods (runs)", list(labels), default=list(labels)[:1],
                                              format_func=labels.get, key="entity-runs")
    needle = filters[1].text_input("Entity contains", key="entity-filter").strip().lower()
    low, high = filters[2].slider("Similarity of introduced entities to the reference", 0.0, 1.0, (0.0, 1.0), 0.05,
                                  key="entity-similarity", help="Shows samples with an introduced entity in this range.")
    view = entities[entities.run_id.isin(chosen_runs)]
    if needle:
        view = view[view.normalized.str.contains(needle, regex=False)]
    in_range = view.introduced & view.similarity.between(low, high)
    if (low, high) != (0.0, 1.0):  # only samples with an introduced entity in range, and only those entities
        keep = set(zip(view.run_id[in_range], view.sample_idx[in_range]))
        in_kept_sample = pd.Series([key in keep for key in zip(view.run_id, view.sample_idx)], index=view.index, dtype=bool)
        view = view[(~view.introduced | in_range) & in_kept_sample]
    ranking = samples_by_hallucination(view, analyses[analyses.run_id.isin(chosen_runs)])
    if ranking.empty:
        st.info("No sample matches these filters.")
        st.stop()
    return view, ranking


def sample_navigation(ranking, view):
    """The rater's name and the sample shown, with previous and next; returns (rater, the sample's ranking row)."""
    # Options are the samples themselves, not positions: with other runs chosen, a position would keep the last list's label.
    samples = {f"{row.run_id}:{int(row.sample_idx)}": entity_sample_label(row) for row in ranking.itertuples()}
    order = list(samples)

    def step(by: int) -> None:
        current = st.session_state.get("entity-sample")
        position = order.index(current) if current in samples else 0
        st.session_state["entity-sample"] = order[min(max(position + by, 0), len(order) - 1)]

    rater = st.text_input("Your name (verdicts are filed under it)", key="entity-rater")
    navigation = st.columns([6, 1, 1])
    picked = order.index(navigation[0].selectbox("Sample (most unsupported entities first)", order, key="entity-sample",
                                                 format_func=samples.get))
    navigation[1].button("Previous", on_click=step, args=(-1,), disabled=picked == 0, width="stretch")
    navigation[2].button("Next sample", on_click=step, args=(1,), disabled=picked == len(ranking) - 1, width="stretch")
    if rater.strip():
        reviewed, to_review = reviewed_samples(resources.store(), rater, view)
        st.caption(markup.message(f"Reviewed by {rater.strip()}: {reviewed} of the {to_review} samples listed that "
                                  "have an introduced entity (every name in them has your verdict)."))
    return rater, ranking.iloc[picked]


def sample_texts(current, view):
    """The sample's prompt and its three texts with their entities highlighted; returns its entities and texts."""
    sample = queries.sample_row(resources.revision(), current.run_id, int(current.sample_idx))
    mine = view[(view.run_id == current.run_id) & (view.sample_idx == current.sample_idx)]
    st.markdown(f"**Prompt:** {markup.inert(sample['prompt'])}", unsafe_allow_html=True)
    st.markdown(markup.entity_legend(), unsafe_allow_html=True)
    texts = {"reference": sample["reference"], "unwatermarked": sample.get("unwatermarked_text"),
             "watermarked": sample.get("watermarked_text")}
    # Long texts scroll in a frame of their own, so the verdicts stay in view below them; short ones need no frame.
    longest = max(len(text) for text in texts.values() if isinstance(text, str))
    with st.container(height=420 if longest > 700 else "content"):
        for column, kind in zip(st.columns(3), texts):
            column.markdown(f"**{kind.capitalize()}**")
            column.markdown(markup.highlight_entities(texts[kind], mine[mine.text_kind == kind]), unsafe_allow_html=True)
    return mine, texts


def verdict_form(rater: str, current, mine, texts: dict) -> None:
    """The rater's verdict on each introduced name of the sample, filed and undone as it changes."""
    st.subheader("Your verdicts")
    st.caption("One verdict per name: it is filed for every mention of that name (its MeSH heading) in the text.")
    recorded = rater_verdicts(resources.store(), rater, current.run_id, int(current.sample_idx))

    def save(name, key: str) -> None:
        label = st.session_state[key]
        verdict = next(code for code, text in VERDICTS.items() if text == label)
        record_verdict(resources.store(), rater, current.run_id, int(current.sample_idx), name, verdict)

    def undo(name, key: str) -> None:
        undo_verdict(resources.store(), rater, current.run_id, int(current.sample_idx), name)
        st.session_state[key] = None

    if not rater.strip():
        st.info("Enter your name above to record verdicts.")
    for kind in ("watermarked", "unwatermarked"):
        names = names_to_judge(mine, kind)
        mentions = sum(len(name.starts) for name in names)
        st.markdown(f"**{kind.capitalize()} text:** {len(names)} introduced {'name' if len(names) == 1 else 'names'}"
                    f" ({mentions} {'mention' if mentions == 1 else 'mentions'})")
        text = texts[kind] if isinstance(texts[kind], str) else ""
        for name in names:
            key = f"verdict-{rater.strip()}-{current.run_id}-{current.sample_idx}-{kind}-{name.heading}"
            stored = name_verdict(recorded, name)
            if key not in st.session_state:
                st.session_state[key] = VERDICTS.get(stored)
            start, end = name.starts[0], name.ends[0]
            where = (f"character {start}" if len(name.starts) == 1 else
                     f"{len(name.starts)} mentions, characters {', '.join(map(str, name.starts))}")
            line = st.columns([3, 4, 1])
            line[0].markdown(f"{markup.inert(name.shown)} · {where} · rule: {name.rule()}"
                             f"  \n…{markup.inert(text[max(0, start - 40):end + 40])}…", unsafe_allow_html=True)
            line[1].radio("Verdict", list(VERDICTS.values()), key=key, horizontal=True, label_visibility="collapsed",
                          disabled=not rater.strip(), on_change=save, args=(name, key))
            if stored is not None:
                line[2].button("Undo", key=f"undo-{key}", on_click=undo, args=(name, key),
                               help=f"Remove your verdict: {VERDICTS[stored]}")
                line[0].caption(f"Recorded for {rater.strip()}: {VERDICTS[stored]}")


def agreement_section() -> None:
    """Clinicians' verdicts against the automatic unsupported rule."""
    counts, stats = verdict_agreement(resources.store())
    if not stats:
        return
    st.subheader("Clinicians against the automatic rule")
    precision = f"{stats['precision']:.2f}" if stats["precision"] is not None else not_enough(stats["flagged"])
    recall = f"{stats['recall']:.2f}" if stats["recall"] is not None else not_enough(stats["clinician_wrong"])
    st.write(f"{stats['verdicts']} verdicts, one per name. Of the names the {HALLUCINATION_THRESHOLD} rule calls "
             "unsupported (any of its mentions), "
             f"the share clinicians called wrong (precision): {precision}; of those clinicians called wrong, the share "
             f"the rule caught (recall): {recall}. 'Not a disease' is left out of both.")
    st.dataframe(counts, width="stretch")


def disease_entities() -> None:
    """The disease entities a watermark introduced (the paper's Table 7), and the clinicians' verdicts on them."""
    st.caption(
        "Introduced: a disease in a generated text that its reference does not name (synonyms count as named: names "
        "are compared by their MeSH heading). Unsupported by the reference (the paper's \"hallucinated\"): an introduced "
        f"entity whose contextual embedding is less than {HALLUCINATION_THRESHOLD} cosine-similar to every reference "
        "entity. It is far from everything the reference says, which is not the same as wrong: your verdicts below "
        "tell the two apart. Hover over a highlight for the closest reference entity."
    )
    with st.expander("Recognizers, and the MeSH matcher's stoplist"):
        st.write("Entities are found by the recognizer named in the table's recognizer column: the trained tagger "
                 "(BIO tagging fine-tuned on the BC5CDR and NCBI Disease corpora) unless a run was analysed only with "
                 "another. No recognizer counts an outcome (" + ", ".join(sorted(OUTCOMES)) + "), nor a disease word that "
                 "names part of a drug or a signalling molecule, within two words before " + ", ".join(sorted(NON_DISEASE_HEADS))
                 + " ('tumour necrosis factor', 'TNF inhibitors'). The MeSH matcher (recognizer 'mesh') never counts these "
                 "generic words either: " + ", ".join(sorted(STOPLIST)) + ".")

    runs, entities, analyses = analysed_entities_or_stop()
    entities = table7(entities, analyses, runs)
    view, ranking = browser_filters(entities, analyses, runs)
    rater, current = sample_navigation(ranking, view)
    mine, texts = sample_texts(current, view)
    verdict_form(rater, current, mine, texts)
    agreement_section()

render()
