"""Inputs and panels several pages share: the run picker's labels, method parameter inputs, and the
progress panel of a background job, and download buttons."""
from __future__ import annotations

import logging
from contextlib import contextmanager
from numbers import Integral

import pandas as pd
import streamlit as st

from fwsapp import counted, duration
from fwsapp.ui import render
from fwsapp.judge.summary import judge_name
from fwsapp.results.fws import DEFAULT_ALPHA, DEFAULT_BETA
from fwsapp.results.tables import column_number_text, decimals_of
from fwsapp.watermark.methods import MethodInfo
from fwsapp.ui.queries import missing_model_free_work, runs
from fwsapp.ui.resources import jobs, loaded_models, revision, store


@contextmanager
def section(what: str):
    """A page section that cannot be drawn says so in one line, and the sections after it are still drawn: a model
    or tokenizer this machine lacks ends one view, not the page. Streamlit's own stop and rerun are no errors."""
    from fwsapp import EXPECTED_ERRORS, one_line

    try:
        yield
    except EXPECTED_ERRORS as error:
        st.error(render.message(f"{what}: {one_line(error)}"))
    except Exception as error:  # a defect: one line here, the traceback in the server's log
        logging.getLogger(__name__).exception("%s failed", what)
        st.error(render.message(f"{what} could not be drawn ({type(error).__name__}: {one_line(error)}). The rest "
                                "of the page works; the server's log has the details."))


def kept_open(label: str, key: str, expanded: bool = False):
    """An expander whose open state is kept in the session (`key`); opening or closing it reruns the page, what keeping
    it costs, and `.open` says which it is. A form that starts a background job needs it: untracked, it was drawn anew,
    closed, when the page above it changed in the job's reruns (Re-detect's detection sets land above its form; Attack
    runs' `expanded` flips once a run is attacked), hiding the job's progress and the line that says it finished."""
    return st.expander(label, expanded=expanded, key=key, on_change="rerun")


def attack_refusals(run_ids: list[str], attack: str, params: dict) -> dict[str, str]:
    """Why the attack cannot run on each of these runs with these parameters (a method spoofing cannot steal, a
    parameter out of range), checked as the job would check it: none where it can."""
    from fwsapp.robustness.attack_sets import check_attack

    refused = {}
    for run_id in run_ids:
        try:
            check_attack(store(), run_id, attack, params)
        except ValueError as error:
            refused[run_id] = str(error)
    return refused


def runs_or_stop() -> pd.DataFrame:
    """Every run; a page with nothing to show says what to do, offers the example data, and stops."""
    frame = runs(revision())
    if frame.empty:
        no_runs_yet()
        st.stop()
    return frame


def job_inputs(frame: pd.DataFrame) -> dict[str, str]:
    """The runs a form may start a job on, id -> label: every form's one rule (`run_names.ready`: none still
    generating, none without a sample), the others named in a line."""
    from fwsapp.results.run_names import ready, run_label

    shown = ready(frame)
    waiting = frame[~frame.run_id.isin(shown.run_id)]
    if not waiting.empty:
        st.caption(f"Left out until their texts are stored: {', '.join(waiting.run_id)} (still generating, or no sample).")
    return {row.run_id: run_label(row._asdict()) for row in shown.itertuples()}


def tokenizer_choice(runs: pd.DataFrame, key: str, leaves_out: bool = False) -> tuple[str | None, dict[str, str]]:
    """A Tokenizer field for a form that detects runs again from text (empty: each run's own), and the runs whose
    tokenizer cannot be had here, each with why, said at once before any job starts (Meditron's is not shipped): an
    error where the form refuses them, a warning where it goes on without them (`leaves_out`) and others remain."""
    named = st.text_input("Tokenizer (empty: each run's own)", key=key,
                          help="mistral-v1 or llama-3 (shipped), a Hugging Face id in the local cache, or the folder "
                               "of a local copy").strip() or None
    problems = tokenizer_problems(runs, named)
    left_out = leaves_out and len(problems) < len(runs)
    for run_id, problem in problems.items():
        (st.warning if left_out else st.error)(render.message(f"{run_id}: {problem}." + (" It is left out."
                                                                                          if left_out else "")))
    return named, problems


def tokenizer_problems(runs: pd.DataFrame, named: str | None = None) -> dict[str, str]:
    """Run id -> why its tokenizer (the one named, else the run's own) cannot be had here; a run that can be detected
    again from text is absent."""
    from fwsapp.models.tokenizers import run_tokenizer
    from fwsapp.ui.queries import tokenizer_problem

    return {row.run_id: problem for row in runs.itertuples()
            if (problem := tokenizer_problem(named or run_tokenizer(row.model, row.tokenizer)))}


def first_detectable(runs: pd.DataFrame, run_ids: list[str]) -> int:
    """Where in `run_ids` the first run whose own tokenizer is had here stands (0 where none is): a form that detects
    texts again opens on it, not on an error it could have avoided (an imported meditron run, newest)."""
    blocked = tokenizer_problems(runs[runs.run_id.isin(run_ids)])
    return next((index for index, run_id in enumerate(run_ids) if run_id not in blocked), 0)


def no_runs_yet() -> None:
    st.info("No runs yet. Load the example data (the paper's meditron logs, a few seconds), try a prompt on the "
            "Playground, generate a run or import logs; `python -m fwsapp generate` and `import` do the same headless.")
    example_data_button(primary=True)


def example_data_button(primary: bool) -> None:
    """Imports the paper's meditron logs shipped in data/examples; a second press changes nothing."""
    from fwsapp.orchestration.examples import load_examples

    if st.button("Load the example data", type="primary" if primary else "secondary", key="load-examples"):
        with st.spinner("Importing three runs of 200 samples…"):
            run_ids = load_examples(store())
        st.toast(f"Loaded runs {', '.join(run_ids)}.")
        st.rerun()


def job_status(kind: str, noun: str, body=None) -> None:
    """A background job's progress bar with Cancel, or its result, redrawn every second; `body(job)` draws
    more inside the same fragment. Reruns the page when the job ends, so its results show."""
    @st.fragment(run_every=1.0)
    def panel():
        job = jobs().latest(kind)
        if job is None:
            return
        if job.status == "failed" and job.refused:  # nothing was done: there is nothing to resume
            st.error(render.message(f"{job.label} was refused: {(job.message or 'unknown error').rstrip('. ')}."))
        elif job.status == "failed":
            reason = (job.message or "unknown error").rstrip(". ")
            st.error(render.message(f"{job.label} failed: {reason}. Finished work is kept; start it again to resume."))
        elif job.status == "cancelled":
            st.warning(render.message(f"{job.label} was cancelled after {job.done} of {job.total} {noun}; start it again to "
                                      "resume."))
        elif job.finished and st.session_state.get(f"{kind}_dismissed") != job.key:
            # Said with its time and dismissable, so an old result is not read as the current state.
            st.success(render.message(f"{job.message or 'Done.'} (finished {job.finished_at:%H:%M:%S})"))
            if st.button("Dismiss", key=f"dismiss-{kind}"):
                st.session_state[f"{kind}_dismissed"] = job.key
                st.rerun()
        elif not job.finished:  # a dismissed result shows nothing, least of all a progress bar with a live Cancel
            st.progress(job.fraction, text=render.message(progress_line(job, noun)))
            if st.button("Cancel", key=f"cancel-{kind}"):
                job.cancel()
        if body is not None:
            body(job)
        if job.finished and st.session_state.get(f"{kind}_shown") != (job.key, job.status):
            st.session_state[f"{kind}_shown"] = (job.key, job.status)
            st.rerun()

    panel()


def progress_line(job, noun: str = "") -> str:
    """A running job in one line: what, how far, the phase under way, and the time (elapsed; left at its own rate).
    Until its work is counted (a plan being made, a model loading), no count: "0 of 0" read as nothing to do."""
    counts = f", {job.done:,} of {job.total:,} {noun}" if job.total else ""
    detail = f" · {job.note}" if job.note else ""
    return f"{job.label}: {job.status}{counts}{detail} · {job.timing()}".replace("  ", " ")


def running_jobs() -> None:
    """Every job under way, on every page (the sidebar): this app's, and runs another process is generating in the
    same file (a `python -m fwsapp` command), from what it has stored. What another process writes shows as it lands:
    the page is drawn again when the store changes and no job of this app is running (its own panel does that)."""
    @st.fragment(run_every=2.0)
    def panel():
        own = jobs().running()
        for job in own:
            st.progress(job.fraction, text=render.message(progress_line(job)))
        current = revision()
        mine = {run_id for job in own for run_id in job.run_ids}
        stored = runs(current)
        for run in stored[(stored.status == "running") & ~stored.run_id.isin(mine)].itertuples():
            st.progress(min(1.0, run.samples_done / max(run.n, 1)), text=render.message(stored_progress_line(run)))
        if not own and current != st.session_state.get(DRAWN_REVISION, current):
            st.rerun(scope="app")

    panel()


# The store revision the page was last drawn at (`mark_drawn`), so the sidebar can tell when another process wrote.
DRAWN_REVISION = "drawn-revision"


def models_in_use(slot) -> None:
    """The sidebar's line of the models this app holds, written into `slot` (an `st.empty`): once before the page
    runs and again after it, as a page that loads one (the Playground's first answer) said "none loaded yet" beside
    the answer that model had just written."""
    loaded = loaded_models()
    with slot.container():
        st.caption("Model in use")
        st.write(render.message(", ".join(loaded)) if loaded else "none loaded yet (loads on the first run)")


def mark_drawn() -> int:
    """Mark the store revision this run draws the page at, before the sidebar's watcher looks; returns how many writes
    this thread had made by then, for `own_writes_drawn` to tell the page's own writes from others'."""
    st.session_state[DRAWN_REVISION] = revision()
    return store().writes_by_this_thread()


def own_writes_drawn(writes_before: int) -> None:
    """Once the page is drawn: if every write since its revision was taken is this run's own (an import, say), the
    page is marked drawn at the new revision. The sidebar reruns the app for what others write; rerunning it for the
    page's own write wiped what the page said of it ("Imported as run …") within a second."""
    database, now = store(), revision()
    if database.writes_between(st.session_state[DRAWN_REVISION], now) == database.writes_by_this_thread() - writes_before:
        st.session_state[DRAWN_REVISION] = now


def stored_progress_line(run) -> str:
    """A run that is being generated elsewhere, in one line: how many samples it has stored, and for how long none
    has come (as seen from this browser session), so a run whose process was stopped reads as such."""
    seen = st.session_state.setdefault("stored-progress", {})
    now = pd.Timestamp.now()
    count, since, moved = seen.get(run.run_id, (run.samples_done, now, False))
    if count != run.samples_done:
        count, since, moved = run.samples_done, now, True
    seen[run.run_id] = (count, since, moved)
    quiet = int((now - since).total_seconds())
    timing = ("new samples are arriving" if moved and quiet < 10 else
              f"no new sample for {quiet // 60} min" if quiet >= 120 else f"no new sample for {quiet} s")
    return (f"{run.method} {run.task} ({run.run_id}), written by another process: {run.samples_done:,} of {run.n:,} "
            f"samples stored · {timing}")


# Model-free metrics start by themselves when the page opens if they take at most this long here; longer work
# waits for a button that says how long.
AUTOMATIC_SECONDS = 600


def model_free_metrics(run_ids: list[str], automatic: bool) -> None:
    """The metrics that need no language model, computed in place for the runs that lack them: at once where
    `automatic` and the work is short (once a session per set of runs, so a cancelled job stays cancelled), else
    on a button that says how long it takes. Its progress is the "score" job's panel."""
    from fwsapp.quality.registry import METRICS, model_free_metrics as registered_model_free

    work = missing_model_free_work(revision(), tuple(run_ids))
    manager = jobs()
    if active := manager.active("score"):
        # Why values the page had are computed again, while they are, to whoever has the page open: a user who saw
        # them all wondered.
        if active[0].why:
            st.caption(render.message(active[0].why))
        return
    if not work.values:
        return
    about = duration(work.seconds)
    started = st.session_state.setdefault("model-free-started", set())
    names = ", ".join(METRICS[name].label for name in work.metrics)
    replaced = (f"{work.replaces:,} of them in place of values computed under an earlier version of a recognizer or "
                "of the facts" if work.replaces else "")

    def start() -> None:
        started.add(tuple(work.run_ids))
        job = manager.start_scoring(work.run_ids, registered_model_free(), None, None)
        if replaced:
            job.why = (f"Computing {counted(work.values, 'value', 'values')} of {names}, {replaced}: until the job ends, "
                       "the tables read the values computed so far, never the two versions together.")
        st.rerun()

    if automatic and work.seconds <= AUTOMATIC_SECONDS and tuple(work.run_ids) not in started:
        start()
    st.info(f"{counted(len(work.run_ids), 'run lacks', 'runs lack')} {names}: {work.values:,} values"
            f"{f' ({replaced})' if replaced else ''}, about {about} here. They need no language model.")
    if st.button(f"Compute them now (about {about})", key="model-free-compute", type="primary"):
        start()


def param_inputs(method: MethodInfo, key_prefix: str, values: dict | None = None) -> dict:
    """One input per method parameter: a choice for named options, else a number bounded by its spec,
    each with its one-line help. `values` pre-fills them (a run's own parameters)."""
    params = {}
    defaults = {**method.defaults, **(values or {})}
    per_row = 4
    names = list(method.defaults)
    def width(key: str) -> int:  # a choice longer than a number ("single_turn") gets a double column, not cut
        spec = method.param_specs.get(key)
        return 2 if spec is not None and spec.choices and max(map(len, map(str, spec.choices))) > 6 else 1

    for start in range(0, len(names), per_row):
        row = names[start:start + per_row]
        for column, key in zip(st.columns([*map(width, row), *[1] * (per_row - len(row))]), row):
            spec, value = method.param_specs.get(key), defaults[key]
            help_text = f"{spec.help}; {method.valid_values(key)}" if spec else None
            label = key.replace("_", " ")  # spaces let a narrow column wrap between words, not inside one
            with column:
                if spec is not None and spec.choices:
                    params[key] = _choice(label, spec, value, help_text, f"{key_prefix}-{key}")
                elif isinstance(method.defaults[key], str):
                    params[key] = st.text_input(label, value=value, help=help_text, key=f"{key_prefix}-{key}")
                elif isinstance(method.defaults[key], float):
                    params[key] = st.number_input(label, value=float(value), step=0.1, format="%.3f", help=help_text,
                                                  min_value=_bound(spec, "low", float), max_value=_bound(spec, "high", float),
                                                  key=f"{key_prefix}-{key}")
                elif spec is not None and spec.high is not None and spec.high > MAX_BROWSER_INTEGER:
                    params[key] = _whole_number(st.text_input(label, value=str(value), help=help_text,
                                                              key=f"{key_prefix}-{key}"))
                else:
                    params[key] = int(st.number_input(label, value=int(value), step=1, help=help_text,
                                                      min_value=_bound(spec, "low", int),
                                                      max_value=_bound(spec, "high", int), key=f"{key_prefix}-{key}"))
    return params


FILE_CHOICE = "a file of names…"


def _choice(label: str, spec, value: str, help_text: str, widget_key: str) -> str:
    """A choice among the named options; where a file is valid too, a path field after the last option."""
    options = list(spec.choices) + ([FILE_CHOICE] if spec.or_file else [])
    chosen = st.selectbox(label, options, index=options.index(value if value in spec.choices else FILE_CHOICE),
                          help=help_text, key=widget_key)
    if chosen != FILE_CHOICE:
        return chosen
    return st.text_input(f"{label} file", value="" if value in spec.choices else value, key=f"{widget_key}-file",
                         placeholder="/path/to/names.txt, one name per line").strip()


# A browser's numbers are doubles: a whole number input holds up to 2^53 − 1. A 64-bit key (vLLM's) is typed as text.
MAX_BROWSER_INTEGER = 2**53 - 1


def _whole_number(text: str):
    """The typed text as an integer where it is one; else the text itself, which the parameter check refuses by name."""
    try:
        return int(text.strip())
    except ValueError:
        return text


def _bound(spec, side: str, kind: type):
    """A closed bound for an input; open bounds are left to the parameter check, which says what is wrong."""
    if spec is None or getattr(spec, side) is None or getattr(spec, f"open_{side}"):
        return None
    return kind(getattr(spec, side))


DONE_NOTICE = "done-notice"  # what an action just did, said once on the page its rerun draws


def rerun_saying(notice: str) -> None:
    """Rerun the page (so every table shows the change), then say `notice` there: said before the rerun, it was
    wiped by the rerun before anyone read it."""
    st.session_state[DONE_NOTICE] = notice
    st.rerun()


def done_notice() -> None:
    """Say, once, what the action that reran the page did (`rerun_saying`)."""
    if notice := st.session_state.pop(DONE_NOTICE, None):
        st.success(render.message(notice))


def download(label: str, data, file_name: str, mime: str, container=st, **options) -> None:
    """A download button that does not rerun the app: a rerun redraws the page under the reader, and one that lands
    as they click another tab can leave them on the tab they left."""
    container.download_button(label, data, file_name, mime, on_click="ignore", **options)


def scroll_to(anchor: str) -> None:
    """Bring the element with this id (a header's anchor) to the top of the viewport: a result that arrives below the
    fold is shown, not left for the user to find."""
    import json

    import streamlit.components.v1 as components

    # A new nonce each time: Streamlit keeps an identical component mounted, and its script would not run again.
    nonce = st.session_state["scroll_nonce"] = st.session_state.get("scroll_nonce", 0) + 1
    components.html(f"<script>/* {nonce} */ window.parent.document.getElementById({json.dumps(anchor)})"
                    "?.scrollIntoView({behavior: 'smooth', block: 'start'});</script>", height=0)


def _mixed(column: pd.Series) -> bool:
    """A column of numbers with words among them ("not enough data (n = 4)"): the numbers as numbers, or as the text
    `uniform` writes them (a column of text throughout, which pandas 3 types as str, not object)."""
    numbers = pd.to_numeric(column, errors="coerce")
    return bool(numbers.notna().any() and (numbers.isna() & column.map(lambda value: isinstance(value, str))).any())


def uniform(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every number of a mixed column written alike, as the downloads write it (`column_number_text`:
    0.710, 1.000, not 1, 1.0 and 0.71; a percentage to a tenth), so the column is text throughout: one format for the
    reader, one type for Arrow (a mixed column made it log a traceback). A column whose numbers are all integers is a
    count and keeps them whole (tokens to detect: 16 or "never", not 16.000)."""
    def written(column: pd.Series) -> pd.Series:
        def word(value) -> bool:
            return value is None or isinstance(value, (str, bool)) or pd.isna(value)

        counts = all(isinstance(value, Integral) for value in column if not word(value))
        write = column_number_text(column.name)
        return column.map(lambda value: value if word(value) else f"{value:d}" if counts else write(value))

    return frame.assign(**{column: written(frame[column]) for column in frame.columns if _mixed(frame[column])})


def worded_columns(frame: pd.DataFrame, decimals: int | None = 3, headings: dict[str, str] | None = None) -> dict:
    """Column settings for st.dataframe that give a column of numbers with words among them ("not enough data
    (n = 4)") room for the words (a formatted frame's columns are sized by their numbers and cut the words short), and
    every column of fractional numbers as many `decimals` (a percentage a tenth, `decimals_of`), so 1 reads 1.000
    beside 0.997 and a drop of 11 % 11.0 beside 9.5 (None: a Styler's format, which a column's format here would
    override). `headings`: a shorter heading for a column, its own name then its help."""
    worded = {column: st.column_config.Column(width=160) for column in frame.columns
              if _mixed(frame[column])}
    fixed = {column: st.column_config.NumberColumn(format=f"%.{decimals_of(column, decimals)}f")
             for column in frame.columns if decimals is not None and pd.api.types.is_float_dtype(frame[column])}
    settings = {**fixed, **worded}
    return {**settings, **{column: {**settings.get(column, {}), "label": heading, "help": column}
                           for column, heading in (headings or {}).items()}}


def rounded_as_written(frame: pd.DataFrame, decimals: int, columns=None) -> pd.DataFrame:
    """`frame` with its fractional columns (or `columns`) rounded as Python writes them (the report, the commands,
    the pages' sentences), each to `decimals` (a percentage a tenth, `decimals_of`): the browser's format rounds an
    exact half away from zero, so an AUROC of 0.8125 (52 of 64 pairs) read 0.813 in a table and 0.812 in the text
    beside it."""
    chosen = [column for column in (frame.columns if columns is None else columns)
              if pd.api.types.is_float_dtype(frame[column])]
    def rounded(column: pd.Series) -> pd.Series:
        places = decimals_of(column.name, decimals)
        return column.map(lambda value: value if pd.isna(value) else float(f"{value:.{places}f}"))

    return frame.assign(**{column: rounded(frame[column]) for column in chosen})


def table(frame: pd.DataFrame, decimals: int | None = 3, where=st) -> None:
    """`frame` as a page's table (in `where`: the page, a tab): no index, the page's width, numbers to `decimals` (a
    percentage a tenth) and words given room."""
    shown = frame if decimals is None else rounded_as_written(frame, decimals)
    where.dataframe(shown, hide_index=True, width="stretch", column_config=worded_columns(frame, decimals))


def exported_table(frame: pd.DataFrame, where=st, bold: pd.DataFrame | None = None,
                   headings: dict[str, str] | None = None) -> None:
    """`frame` as a page's table written as the report's downloads write it (`column_number_text`): three decimals (a
    percentage a tenth), and two significant digits where they would keep fewer (z > 4's nominal FPR, 3.2e-05, read
    0.000 on the Report page and 3.2e-05 in its Markdown); the cells True in `bold` in bold; `headings` as
    `worded_columns` takes them."""
    shown = uniform(frame)
    numbers = {column: column_number_text(column) for column in shown.columns if shown[column].dtype.kind == "f"}
    styled = shown.style.format(numbers, na_rep="None")
    if bold is not None:
        styled = styled.apply(lambda column: ["font-weight: bold" if flag else "" for flag in bold[column.name]], axis=0)
    where.dataframe(styled, hide_index=True, width="stretch",
                    column_config=worded_columns(shown, decimals=None, headings=headings))


# A legend of run labels under its chart: at the side, long labels took half the plot's width.
LEGEND_BELOW = {"orientation": "h", "y": -0.25}


# One colour per series on every chart: the two baselines, then each method in the registry's order.
BASELINE_COLOURS = {"reference": "#8d99ae", "unwatermarked": "#e76f51", "watermarked": "#2a9d8f"}
# How far apart (Euclidean, in RGB) two series' colours must be to be told apart on a chart: Dark24 drew EWD in
# #EB663B beside the unwatermarked texts' #e76f51, and vLLM-Gumbel-DualKey in #778AAE beside the reference's #8d99ae.
DISTINCT_RGB = 60


def _rgb_distance(first: str, second: str) -> float:
    from plotly.colors import hex_to_rgb

    return sum((a - b) ** 2 for a, b in zip(hex_to_rgb(first), hex_to_rgb(second))) ** 0.5


def method_palette() -> list[str]:
    """Dark24, then Alphabet, keeping each colour far enough from the baselines' and from every one kept before it."""
    import plotly.express as px

    kept: list[str] = []
    for colour in px.colors.qualitative.Dark24 + px.colors.qualitative.Alphabet:
        if all(_rgb_distance(colour, other) >= DISTINCT_RGB for other in [*BASELINE_COLOURS.values(), *kept]):
            kept.append(colour)
    return kept


def series_colours(series=()) -> dict[str, str]:
    """Colours of the baselines and of each method; each of `series` (runs named 'method · settings') gets its
    method's colour, or, where another run of the method has it already, the next colour no series uses; past the
    palettes' colours (a sweep of many settings) they are used again in turn."""
    import itertools

    import plotly.express as px

    from fwsapp.watermark.methods import METHODS

    palette = method_palette()
    colours = {**BASELINE_COLOURS, **{method: palette[index % len(palette)] for index, method in enumerate(METHODS.names())}}
    taken = set(BASELINE_COLOURS.values())
    spare = itertools.chain([colour for colour in palette + px.colors.qualitative.Light24 if colour not in colours.values()],
                            itertools.cycle(palette + px.colors.qualitative.Light24))
    for name in sorted(set(series) - set(colours)):
        own = colours.get(name.split(" · ")[0])
        colours[name] = own if own and own not in taken else next(spare)
        taken.add(colours[name])
    return colours


def chart(figure) -> None:
    """A plotly figure across the page, its text literal (`render.inert_figure`): run labels carry model names typed
    or read from files, and the Entropy page's axis the names found in model output."""
    st.plotly_chart(render.inert_figure(figure), width="stretch")


def count_smoke_tests(judges: list[str], key: str) -> bool:
    """Whether the user counts these smoke-test judges' verdicts in FWS and the rankings (never by default)."""
    return bool(judges) and st.checkbox(
        render.message(f"Count the smoke-test verdicts of {', '.join(judges)}"), value=False, key=key,
        help="The embedded 135M model is forced into the verdict format: its verdicts test the plumbing, not the "
             "texts, so FWS, the drops and the rankings leave them out unless you count them here.")


def judge_choice(judges: list[str], key: str) -> str | None:
    """The one judge whose verdicts the page's judge figures count, chosen where several judged (`counted_judges`, the
    default first); None for the default, so that the figures cached for it are shared."""
    if len(judges) < 2:
        return None
    chosen = st.selectbox("Judge", judges, key=key, format_func=judge_name,
                          help="Judges' scales differ, so the judge figures count one judge's verdicts, never several "
                               "pooled. The default judged the most pairs; a run this judge did not judge has no judge "
                               "figure under it.")
    return None if chosen == judges[0] else chosen


WEIGHTS_KEY = "fws_weights"  # not a widget's key: it outlives the page that set it


def fws_weights() -> tuple[float, float]:
    """The FWS weights (α, β) of this session, shared by the FWS and Report pages: those in the URL
    (`?alpha=0.3&beta=0.4`) when the session starts, so a reload or a shared link keeps them; else the paper's 0.4,
    0.2. A value that is not a number in [0, 1] is ignored."""
    if WEIGHTS_KEY not in st.session_state:
        st.session_state[WEIGHTS_KEY] = (_weight_from_url("alpha", DEFAULT_ALPHA), _weight_from_url("beta", DEFAULT_BETA))
    return st.session_state[WEIGHTS_KEY]


def _weight_from_url(name: str, default: float) -> float:
    try:
        value = float(st.query_params.get(name, default))
    except ValueError:
        return default
    return value if 0 <= value <= 1 else default


def set_fws_weights(alpha: float, beta: float) -> None:
    st.session_state[WEIGHTS_KEY] = (float(alpha), float(beta))
    st.query_params.update(alpha=f"{alpha:g}", beta=f"{beta:g}")


def rating_form(key: str, prompt: str, reference: str, answers: tuple[str, str], questions: dict[str, str],
                given: dict[str, tuple] | None = None, comment: str = "", revising: bool = False):
    """The prompt, the reference, answers A and B with the rating questions under each, and a comment, every text
    inert. Returns (the button pressed, "submit" or "skip" or None; the scores per letter, None where unanswered; the
    comment; a place beside the buttons for what went wrong). `given` holds the rater's earlier scores per letter, when
    they went back. The answers stay as given when a submit is refused, so nothing is asked twice."""
    given = given or {}
    st.markdown(f"**Prompt:** {render.inert(prompt)}", unsafe_allow_html=True)
    st.markdown(f"**Reference (ground truth):** {render.inert(reference)}", unsafe_allow_html=True)
    scores = {}
    with st.form(f"rate-{key}", clear_on_submit=False):
        for column, letter, text in zip(st.columns(2), "AB", answers):
            with column:
                st.markdown(f"**Answer {letter}**")
                st.markdown(render.inert(text), unsafe_allow_html=True)
                scores[letter] = [
                    st.radio(question, [1, 2, 3, 4, 5], horizontal=True, key=f"{key}-{letter}-{aspect}",
                             index=int(given[letter][index]) - 1 if given.get(letter) else None)
                    for index, (aspect, question) in enumerate(questions.items())
                ]
        written = st.text_area("Comment (optional)", value=comment, key=f"{key}-comment")
        notice = st.empty()  # where the eye is when a submit is refused: just above the buttons
        buttons = st.columns([2, 1, 5])  # wide enough for "Save changes"
        submitted = buttons[0].form_submit_button("Save changes" if revising else "Submit", type="primary")
        skipped = buttons[1].form_submit_button("Skip", disabled=revising)
    return "submit" if submitted else "skip" if skipped else None, scores, written, notice


def rating_session(rater, back_key: str):
    """One rating workflow drawn for any rater (`fwsapp.human.workflow.Rater`: the Rate page's open pool, a study's
    invited rater): Previous and Next, the item's number (the same going back and forth), the blinded form, and what
    Submit and Skip store, with the seconds spent. Returns (the task shown, None when nothing is left; the queue), so a
    page can say why nothing is left and ask what it asks besides (a study's disease names)."""
    import time

    from fwsapp.human.workflow import RatingError, questions
    from fwsapp.ui.queries import sample_row

    def go(steps: int) -> None:
        st.session_state[back_key] = max(0, st.session_state.get(back_key, 0) + steps)

    try:
        queue = rater.queue(store())
    except RatingError as error:
        st.error(render.message(str(error)))
        st.stop()
    back = min(st.session_state.get(back_key, 0), len(queue.done))
    task, number = queue.at(back)
    navigation = st.columns([1, 1, 6])
    navigation[0].button("Previous", on_click=go, args=(1,), disabled=back >= len(queue.done), width="stretch",
                         help="Go back to an item you rated or skipped, and change your rating.")
    navigation[1].button("Next", on_click=go, args=(-1,), disabled=back == 0, width="stretch")
    if task is None:
        return None, queue
    st.markdown('<div id="rate-item"></div>', unsafe_allow_html=True)  # where a submitted rating brings the next item
    st.progress(min((number - 1) / queue.total, 1.0) if queue.total else 0.0, text=f"{number} of {queue.total}")
    if task.done:
        st.caption(f"You {'skipped' if task.skipped else 'rated'} this item earlier. Change your rating and save it, "
                   "or press Next.")
    sample = sample_row(revision(), task.run_id, task.sample_idx)
    shown_at = st.session_state.setdefault(f"shown-{task.handle}", time.monotonic())
    key = f"{'revise-' if task.done else ''}{task.handle}"
    pressed, scores, comment, notice = rating_form(
        key, sample["prompt"], sample["reference"], task.texts(sample["watermarked_text"], sample["unwatermarked_text"]),
        questions(sample["task"]), {"A": task.scores_a, "B": task.scores_b} if task.scores_a else {}, task.comment or "",
        revising=task.done)
    try:
        if pressed == "skip":
            rater.skip(store(), task)
        elif pressed == "submit":
            if missing := unanswered(scores, questions(sample["task"])):
                raise RatingError("Rate all three questions for both answers; still open: " + "; ".join(missing)
                                  + (". Or press Skip." if not task.done else "."))
            rater.submit(store(), task, scores["A"], scores["B"], comment, seconds=time.monotonic() - shown_at,
                         revise=task.done)
            st.toast(f"Saved your rating of item {number} of {queue.total}.")
    except RatingError as error:
        notice.error(render.message(str(error)))
    else:
        if pressed:
            st.session_state.pop(f"shown-{task.handle}", None)
            if task.done:
                go(-1)
            st.session_state["rate_scroll"] = True
            st.rerun()
    if st.session_state.pop("rate_scroll", False):  # the next item's prompt in view, not below the last one's buttons
        scroll_to("rate-item")
    return task, queue


def unanswered(scores: dict[str, list], asked: dict[str, str]) -> list[str]:
    """The questions left open, as 'Answer B: Factual accuracy' (the question's name, before its colon)."""
    names = [question.split(":")[0] for question in asked.values()]
    return [f"Answer {letter}: {name}" for letter, values in scores.items()
            for name, value in zip(names, values) if value is None]


def human_agreement(rated: pd.DataFrame, samples: dict, alpha: float, beta: float, judge_label: str) -> pd.DataFrame:
    """How human ratings agree with the judge and the metrics (Pearson r, the paper's Table 6) and with each other
    (Krippendorff's alpha), each under the small-sample rule. `samples` is `queries.fws_samples`. Returns the mean
    human rating per text."""
    from fwsapp.human.agreement import (
        correlation_matrix,
        correlation_table,
        doubly_rated,
        human_means,
        krippendorff_alpha,
        named,
    )
    from fwsapp.quality.registry import ASPECT_LABELS
    from fwsapp.sample_size import MINIMUM, shown

    humans = human_means(rated)
    st.caption(f"{counted(rated.rater.nunique(), 'rater', 'raters')}, "
               f"{counted(len(rated) // 2, 'rating', 'ratings')} of {counted(len(humans) // 2, 'item', 'items')}.")
    st.subheader("Correlation of human ratings with the judge and the metrics (Pearson r)")
    correlations = correlation_table(humans, samples["judge"], samples["auto"], samples["metrics"], alpha, beta,
                                     judge_label)
    table(uniform(correlation_matrix(correlations).reset_index()))
    st.caption(f"A correlation needs {MINIMUM['pearson']} rated texts; below that the table says so instead of giving r.")
    with st.expander("p-values and sample sizes"):
        # p in significant digits: rounded to four decimals, a strong correlation's p read 0.
        st.dataframe(render.scores_written(named(correlations).round({"r": 4}), {"p": "p"}), hide_index=True,
                     width="stretch")
    st.subheader("Inter-rater agreement (Krippendorff's α, ordinal)")
    texts = doubly_rated(rated)
    table(uniform(pd.DataFrame({ASPECT_LABELS[aspect]: [shown(value, "krippendorff", texts)]
                                for aspect, value in krippendorff_alpha(rated).items()})))
    st.caption(f"Over the {texts} texts rated by two raters or more; α needs {MINIMUM['krippendorff']}.")
    return humans
