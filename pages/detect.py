"""Detect: score distributions and detection metrics per run, and a detector for any pasted text."""
import pandas as pd
import plotly.express as px
import streamlit as st

from fwsapp import ui
from fwsapp.detection import FPR_LEVELS
from fwsapp.models import EMBEDDED_MODEL
from fwsapp.watermark import METHODS, detect_text

st.title("Detect")
runs = ui.runs(ui.revision())
if runs.empty:
    st.info("No runs yet. Generate one on the Generate page, or with `python -m fwsapp generate`.")
else:
    labels = {row.run_id: ui.run_label(row._asdict()) for row in runs.itertuples()}
    chosen = st.multiselect("Runs", list(labels), default=list(labels)[:1], format_func=labels.get)
    scores = ui.detections(ui.revision(), tuple(chosen))
    summary_rows = []
    for run_id in chosen:
        run = runs[runs.run_id == run_id].iloc[0]
        own = scores[(scores.run_id == run_id) & (scores.detector == run.method)]
        summary = ui.detection_summary(own, run.score_direction, run.method)
        if summary is None:
            continue
        summary_rows.append({
            "run": run_id, "method": run.method, "task": run.task, "model": run.model,
            "AUROC": summary["auroc"],
            **{f"TPR@FPR={level:g}": summary["tpr_at_fpr"]["0" if level == 0 else f"{level:g}"] for level in FPR_LEVELS},
            "mean score (watermarked)": summary["mean_score"]["watermarked"],
            "mean score (unwatermarked)": summary["mean_score"]["unwatermarked"],
            "tokens scored (mean)": own.num_tokens_scored.mean(),
        })
    if summary_rows:
        st.subheader("Detection metrics")
        st.caption("Positives: watermarked texts. Negatives: unwatermarked texts. TPR thresholds are set on the negatives; ties at the threshold are not flagged.")
        st.dataframe(pd.DataFrame(summary_rows).round(3), hide_index=True, width="stretch")
        st.subheader("Score distributions")
        shown = scores.assign(run=scores.run_id + " · " + scores.method)
        figure = px.histogram(
            shown, x="score", color="text_kind", facet_row="run", barmode="overlay", nbins=30, opacity=0.65,
            labels={"score": "detection score (z for KGW)", "text_kind": "text"},
            color_discrete_map={"watermarked": "#2a9d8f", "unwatermarked": "#e76f51", "reference": "#8d99ae"},
        )
        figure.update_yaxes(title_text="texts")
        st.plotly_chart(figure, width="stretch")
        st.subheader("Scores per text")
        st.dataframe(
            scores[["run_id", "method", "sample_idx", "text_kind", "score", "num_tokens_scored"]].round(3),
            hide_index=True, width="stretch",
        )

st.subheader("Detect a watermark in any text")
method = st.selectbox("Method", list(METHODS), key="paste-method")
params = ui.param_inputs(METHODS[method].defaults, f"paste-{method}")
text = st.text_area("Text", height=150, placeholder="Paste a generated text; it is tokenised with the embedded model's tokenizer.")
if st.button("Detect"):
    try:
        detection, tokens = detect_text(method, params, ui.model(EMBEDDED_MODEL), text)
    except ValueError as error:
        st.error(str(error))
    else:
        verdict = "watermarked" if detection.score > params["z_threshold"] else "not watermarked"
        st.metric("z-score", f"{detection.score:.2f}", help=f"{detection.num_tokens_scored} tokens scored")
        st.write(f"Verdict at z > {params['z_threshold']}: **{verdict}** ({detection.num_tokens_scored} tokens scored)")
        st.markdown(ui.token_view(tokens, detection.token_flags), unsafe_allow_html=True)
        st.caption("Green: token in its green list. Red: not. Grey: not scored (no preceding token).")
