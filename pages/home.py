"""Home: what the app answers, the database's state, and the next step for that state."""
import streamlit as st

from fwsapp.ui import queries, resources, widgets
from fwsapp.ui.router import through_router

through_router()


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("fwsapp")
    st.markdown(
        "**What does an LLM watermark do to the medical facts in a text, not only to its fluency?** fwsapp generates "
        "medical answers with and without a watermark (KGW, SWEET, DiPmark, EXP-edit and more), detects them, and "
        "measures what changed: quality metrics, a pairwise LLM judge, the Factuality-Weighted Score, and the disease "
        "entities the watermark introduced or lost."
    )

    state = queries.coverage(resources.revision())
    columns = st.columns(5)
    for column, (label, key) in zip(columns, (("Runs", "runs"), ("Scored", "scored"), ("Analysed", "analysed"),
                                             ("Judged", "judged"), ("With entropies", "entropies"))):
        column.metric(label, state[key])

    page, label, why = queries.next_step(state)
    st.subheader("Next step")
    st.write(why)
    st.page_link(page, label=label, icon="➡️")

    st.subheader("Example data")
    st.write("The paper's published KGW logs (Hastuti et al., EMNLP 2025; Apache-2.0) for Meditron-7B, three tasks × 200 "
             "samples with MarkLLM's detection scores and GPT-4o's verdicts, and for BioMistral-7B, whose tokenizer "
             "ships here, so its texts can be scored by length and attacked offline. Loading them gives every page "
             "content; loading them again changes nothing.")
    widgets.example_data_button(primary=not state["runs"])

    st.subheader("Or start from")
    for target, text in (("pages/playground.py", "Playground: your own prompt, watermarked and not, side by side"),
                         ("pages/generate.py", "Generate: a dataset run, stored for every other page"),
                         ("pages/experiments.py", "Experiments: a whole grid from one spec file"),
                         ("pages/import.py", "Import: logs from MarkLLM or the paper")):
        st.page_link(target, label=text)


render()
