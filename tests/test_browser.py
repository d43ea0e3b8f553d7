"""The main path in a real browser: Debian's Chromium driven by Playwright against `streamlit run`."""
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import PROJECT

ARTIFACTS = PROJECT / "test-artifacts"


def test_two_sample_demo_generation_shows_watermarked_text_and_z(streamlit_server, browser_page):
    page = browser_page
    page.goto(f"{streamlit_server}/generate")
    page.get_by_role("heading", name="Generate").wait_for(timeout=90_000)
    page.get_by_role("spinbutton", name="Samples").fill("2")
    page.get_by_role("spinbutton", name="Samples").press("Enter")
    page.get_by_role("spinbutton", name="New tokens").fill("16")
    page.get_by_role("spinbutton", name="New tokens").press("Enter")
    page.wait_for_timeout(1000)
    page.get_by_role("button", name="Run", exact=True).click()
    marked = page.get_by_text(re.compile(r"Watermarked · z = -?\d+\.\d\d"))
    marked.first.wait_for(timeout=180_000)
    assert page.get_by_text(re.compile(r"Unwatermarked · z = -?\d+\.\d\d")).count() >= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "generate.png"), full_page=True)

    page.get_by_role("link", name="Detect").click()
    page.get_by_role("heading", name="Method comparison").wait_for(timeout=60_000)
    page.wait_for_timeout(2000)
    page.screenshot(path=str(ARTIFACTS / "detect.png"), full_page=True)


def test_a_run_generated_through_a_serving_engine_from_the_generate_page(lm, tmp_path, browser_page):
    """The Generate page's other generator: the user's OpenAI-compatible engine (here one whose sampler is vLLM's own
    GumbelWatermarker), the watermark's key read from the app's environment and never shown."""
    from fwsapp.models import EMBEDDED_MODEL
    from tests.conftest import start_streamlit
    from tests.served_engine import served

    key, page = 2**63 + 11, browser_page
    with served(lm, key, EMBEDDED_MODEL) as (engine, server), \
            start_streamlit(tmp_path, tmp_path / "served.duckdb", SERVED_WATERMARK_KEY=str(key)) as url:
        page.goto(f"{url}/generate")
        page.get_by_role("heading", name="Generate").wait_for(timeout=90_000)
        page.get_by_text("A serving engine (vLLM)").click()
        for label, value in (("Server URL", server), ("Served model", EMBEDDED_MODEL), ("key", "$SERVED_WATERMARK_KEY")):
            page.get_by_label(label, exact=True).fill(value)
            page.get_by_label(label, exact=True).press("Tab")
            settled(page)
        for label, value in (("Samples", "2"), ("New tokens", "16")):
            page.get_by_role("spinbutton", name=label).fill(value)
            page.get_by_role("spinbutton", name=label).press("Enter")
            settled(page)
        page.get_by_role("button", name="Run", exact=True).click()
        # A strong watermark's p in significant digits (1.2e-07), where it read "p = 0.00".
        page.get_by_text(re.compile(r"^Watermarked · p = (\d\.\d+e-\d+|0\.\d+|< 1e-300) · \d+\.\d s$")).first.wait_for(
            timeout=120_000)  # and the answer's seconds, what it cost
        assert page.get_by_text(re.compile(r"· p = 0\.00( ·|$)")).count() == 0
        assert sorted(request.get("watermarking", True) for request in engine.requests) == [False, False, True, True]
        assert str(key) not in page.content()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "generate-served.png"), full_page=True)


def test_a_served_run_walks_through_detect_redetect_robustness_and_quality(lm, tmp_path, browser_page, monkeypatch):
    """Issue 58: a run generated through an engine whose sampler is vLLM's own, then every page that reads it: each
    draws without a traceback and without loading the served model's name as a model here."""
    from fwsapp.cli import main
    from fwsapp.models import EMBEDDED_MODEL
    from tests.conftest import start_streamlit
    from tests.served_engine import served

    key, page, db = 2**63 + 11, browser_page, tmp_path / "walk.duckdb"
    monkeypatch.setenv("WALK_WATERMARK_KEY", str(key))
    with served(lm, key, EMBEDDED_MODEL) as (engine, server):
        assert main(["generate", "--server", server, "--task", "qa", "--method", "gumbel", "--param",
                     "key=$WALK_WATERMARK_KEY", "--n", "4", "--max-new-tokens", "24", "--db", str(db)]) == 0
    ARTIFACTS.mkdir(exist_ok=True)

    def clean(name: str) -> None:
        settled(page)
        assert page.get_by_test_id("stException").count() == 0 and "Traceback" not in page.content(), name
        assert str(key) not in page.content()
        page.screenshot(path=str(ARTIFACTS / f"served-walk-{name}.png"), full_page=True)

    with start_streamlit(tmp_path, db, WALK_WATERMARK_KEY=str(key)) as url:
        page.goto(f"{url}/detect")
        page.get_by_role("heading", name="Token-level view").wait_for(timeout=90_000)
        page.get_by_text(re.compile(r"^Score \S+ over \d+ tokens\.$")).wait_for(timeout=60_000)
        page.get_by_role("heading", name="Detect a watermark in any text").wait_for()
        clean("detect")
        page.get_by_text("Re-detect a run: its texts scored").click()
        settled(page)  # a click on the form while the opened section is still being drawn was lost once, under load
        page.get_by_role("button", name="Re-detect", exact=True).click()
        # The job's line in the form the click was in: the form stays open through the job's reruns, where it had
        # closed and hidden the line (the test then waited for the set's row heading above, and timed out in CI).
        job_finished(page, "served-walk-redetect")
        page.get_by_text(re.compile(r"^Detection sets: the runs' texts scored again")).wait_for(timeout=90_000)
        clean("redetect")
        page.goto(f"{url}/robustness")
        page.get_by_role("button", name="Attack and detect").wait_for(timeout=90_000)
        page.get_by_role("button", name="Attack and detect").click()
        page.get_by_role("heading", name="Method × attack: removal").wait_for(timeout=120_000)
        clean("robustness")  # the row's note that the baseline was read again from text: tests/test_served_hostile.py
        page.goto(f"{url}/quality")
        page.get_by_role("heading", name="Quality").wait_for(timeout=90_000)
        clean("quality")


def rate_items_as(page, base_url, rater, count, offset):
    page.goto(base_url)
    page.get_by_role("heading", name="fwsapp", exact=True).wait_for(timeout=90_000)
    page.get_by_role("link", name="Rate", exact=True).click()
    page.get_by_role("heading", name="Rate answers").wait_for(timeout=30_000)
    page.get_by_label("Your name").fill(rater)
    page.get_by_label("Your name").press("Enter")
    for item in range(count):
        page.get_by_text(f"{item + 1} of {count}").wait_for(timeout=30_000)
        following = f"{item + 2} of {count}" if item + 1 < count else "Nothing left to rate"
        rate_current(page, [(index + item + offset) % 5 + 1 for index in range(6)], following)  # ratings that vary
        if item + 1 < count:  # the next item's place in view, not below the last one's buttons
            assert comes_into_view(page, page.get_by_text(following)), f"item {item + 2} is off screen"


def in_view(page, locator) -> bool:
    """In the top half of the viewport: brought there, not merely peeking in at the bottom edge."""
    box = locator.first.bounding_box()
    return box is not None and 0 <= box["y"] < page.viewport_size["height"] / 2


def comes_into_view(page, locator, seconds: float = 10) -> bool:
    """Within `seconds` (the scroll runs once its frame has loaded, then glides)."""
    for _ in range(int(seconds * 4)):
        if in_view(page, locator):
            return True
        page.wait_for_timeout(250)
    return False


def test_two_raters_rate_three_items_and_see_the_correlation_table(tmp_path, browser_page):
    from tests.conftest import judged_rating_db, start_streamlit

    db = tmp_path / "rating.duckdb"
    judged_rating_db(db, n=3)
    with start_streamlit(tmp_path, db) as url:
        page = browser_page
        page.set_viewport_size({"width": 1400, "height": 700})  # a laptop: the Submit button sits below the prompt
        rate_items_as(page, url, "Dr Ada", 3, offset=0)
        page.set_viewport_size({"width": 1400, "height": 1600})
        # Model text is escaped: the answer's <b> tag shows as text, it does not render.
        rate_items_as(page, url, "Dr Bo", 3, offset=2)
        page.get_by_role("link", name="FWS", exact=True).click()
        page.get_by_text("Correlation of human ratings with the judge and the metrics").wait_for(timeout=60_000)
        page.get_by_text("2 raters, 6 ratings of 3 items.").wait_for(timeout=30_000)
        settled(page)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "fws-agreement.png"), full_page=True)


@pytest.fixture(scope="module")
def hostile_app(tmp_path_factory):
    """One served app on the analysed run whose texts carry HTML, script and Markdown, for the tests that only read it
    (their group keeps them on one worker under the slow tier's `--dist loadgroup`)."""
    from tests.conftest import hostile_entity_db, start_streamlit

    folder = tmp_path_factory.mktemp("hostile")
    hostile_entity_db(folder / "hostile.duckdb")
    with start_streamlit(folder, folder / "hostile.duckdb") as url:
        yield url


@pytest.mark.xdist_group("hostile_app")
def test_model_text_is_escaped_in_the_entity_browser(hostile_app, browser_page):
    page, url = browser_page, hostile_app
    outgoing = []
    page.on("request", lambda request: outgoing.append(request.url))
    page.goto(url)
    page.get_by_role("heading", name="fwsapp", exact=True).wait_for(timeout=90_000)
    page.get_by_role("link", name="Entities", exact=True).click()
    page.get_by_text("<script>window.__pwned = 1</script>", exact=False).first.wait_for(timeout=60_000)
    assert page.get_by_text('<img src=x onerror="window.__pwned = 2">', exact=False).count() >= 1
    assert page.evaluate("window.__pwned") is None  # neither the script nor the onerror ran
    assert page.locator("main img[src='x']").count() == 0
    assert page.get_by_text("**asthma**", exact=False).count() >= 1  # no markdown either
    # Shown literally; an empty span after each ':' keeps the URLs from being linkified.
    assert page.get_by_text("![pixel](http:", exact=False).count() >= 1
    assert page.get_by_text("//evil.example/pixel.png) [click](http:", exact=False).count() >= 1
    assert page.get_by_text("red[alarm] $x^2$", exact=False).count() >= 1  # shown, not coloured or typeset
    assert page.locator("main a[href*='evil.example']").count() == 0
    page.get_by_role("link", name="Judge", exact=True).click()
    page.get_by_text("[3, 3, 3] Diabetes mellitus <script>", exact=False).first.wait_for(timeout=60_000)
    assert page.locator("main a[href*='evil.example']").count() == 0 and page.evaluate("window.__pwned") is None
    page.wait_for_timeout(1000)
    assert not [request for request in outgoing if "evil.example" in request]  # nothing was fetched
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "entities-escaping.png"), full_page=True)


def test_import_page_uploads_the_paper_logs_and_the_report_shows_its_fws(tmp_path, browser_page):
    from tests.conftest import SHARED_DATA, start_streamlit

    paper = SHARED_DATA / "paper"
    if not paper.exists():
        pytest.skip("../shared/data/paper is not beside the project")
    with start_streamlit(tmp_path, tmp_path / "import.duckdb") as url:
        page = browser_page
        page.goto(url)
        page.get_by_role("heading", name="fwsapp", exact=True).wait_for(timeout=90_000)
        page.get_by_role("link", name="Import", exact=True).click()
        page.get_by_role("heading", name="Import logs").wait_for(timeout=30_000)
        uploads = page.locator("input[type=file]")
        stem = paper / "KGW-g0.5-d2-meditron-HQA2"
        for index, suffix in enumerate(("generations", "detection", "judged")):
            uploads.nth(index).set_input_files(str(stem.with_name(f"{stem.name}.{suffix}.json")))
            page.wait_for_timeout(1000)
        model = page.get_by_role("textbox", name="Model", exact=True)
        assert model.input_value() == "meditron"  # taken from the paper's file names
        model.press("Enter")
        page.get_by_role("combobox").nth(1).click()  # the Task select: method first, then task
        page.get_by_role("option", name="Question answering").click()
        page.get_by_role("button", name="Import", exact=True).click()
        page.get_by_text("Imported as run").wait_for(timeout=60_000)
        # The page's own write is no news to the sidebar's watcher (it looks every 2 s): the confirmation stays.
        page.wait_for_timeout(3000)
        assert page.get_by_text("Imported as run").count() == 1
        page.get_by_role("link", name="Report", exact=True).click()
        # The import starts the model-free scoring of 200 samples, whose writes the Report page's queries wait for:
        # under the whole suite's load that took over 60 s once.
        page.get_by_role("heading", name="Table 4: FWS (Auto and judge: gpt-4o), α = 0.4, β = 0.2").wait_for(timeout=150_000)
        page.wait_for_timeout(2000)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        assert page.get_by_text("0.411").count() >= 1
        page.get_by_text("Export a run", exact=True).click()
        # Built when the expander opens, reading the store the import's background scoring may still be writing.
        with page.expect_download(timeout=150_000) as download:
            page.get_by_role("button", name="Download CSV").click()
        exported = pd.read_csv(download.value.path())
        assert download.value.suggested_filename.startswith("fwsapp-imp-")
        # A browser slow to fetch the file still finds it after the sidebar's watcher has run a few times (each run
        # every 2 s): a file built on the click was gone within 6 s, and such a download never arrived.
        page.wait_for_timeout(7000)
        again = page.request.get(download.value.url)
        assert again.status == 200 and again.body() == Path(download.value.path()).read_bytes()
        assert len(exported) == 200 and exported.judge_coherence_watermarked.mean() == pytest.approx(2.17)
        assert exported.quality_rougeL_watermarked.notna().all()  # the import's model-free scores, per sample


def test_first_request_to_a_page_of_a_fresh_server_goes_through_the_router(tmp_path, browser_page):
    from tests.conftest import start_streamlit

    page = browser_page
    with start_streamlit(tmp_path, tmp_path / "fresh.duckdb") as url:
        page.goto(f"{url}/report")  # the server's very first request
        page.get_by_role("heading", name="Report").wait_for(timeout=90_000)
        sidebar = page.get_by_test_id("stSidebar")
        for section in ("Pipeline", "Why", "Results"):
            sidebar.get_by_text(section, exact=True).wait_for(timeout=30_000)
        assert sidebar.get_by_text("Database", exact=True).count() == 1  # the panel, once (the setup check also names the database)
        assert sidebar.get_by_text("report", exact=True).count() == 0  # no raw file names
        page.goto(f"{url}/import")
        page.get_by_role("heading", name="Import logs").wait_for(timeout=60_000)


OVERFLOW = """() => [...document.querySelectorAll('[data-testid="stMain"], [data-testid="stMainBlockContainer"]')]
    .some(element => element.scrollWidth > element.clientWidth + 1)"""


@pytest.mark.xdist_group("hostile_app")
def test_tables_and_charts_fit_the_page_or_scroll_inside_it(hostile_app, browser_page):
    """Wide tables (Table 7, the Report's, Detect's comparison) scroll inside their own frame, never the page."""
    page, url = browser_page, hostile_app
    page.set_viewport_size({"width": 1100, "height": 1400})
    page.goto(url)
    page.get_by_role("heading", name="fwsapp", exact=True).wait_for(timeout=90_000)
    ARTIFACTS.mkdir(exist_ok=True)
    for name, heading in (("entities", "Clinical facts and disease entities"), ("report", "Report"), ("quality", "Quality"),
                          ("judge", "Judge"), ("fws", "Factuality-Weighted Score")):
        page.goto(f"{url}/{name}")
        page.get_by_role("heading", name=heading, exact=True).wait_for(timeout=60_000)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60_000)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / f"layout-{name}.png"), full_page=True)
        assert not page.evaluate(OVERFLOW), f"the {name} page scrolls sideways"
        assert page.get_by_test_id("stException").count() == 0


def test_playground_result_comes_into_view_with_its_threshold_and_copies_clean(streamlit_server, browser_page):
    """The answer arrives below the fold: it is scrolled to; each verdict names its threshold; the page's text carries
    no invisible characters (they were inserted after every colon)."""
    page = browser_page
    page.set_viewport_size({"width": 1400, "height": 800})
    page.goto(f"{streamlit_server}/playground")
    page.get_by_role("heading", name="Playground").wait_for(timeout=90_000)
    page.get_by_role("spinbutton", name="New tokens").fill("16")
    page.get_by_role("spinbutton", name="New tokens").press("Enter")
    page.wait_for_timeout(1000)
    page.get_by_role("button", name="Generate", exact=True).click()
    result = page.get_by_role("heading", name="Result")
    result.wait_for(timeout=180_000)
    assert comes_into_view(page, result)
    page.get_by_text(re.compile(r"^Watermarked · z = -?\d+\.\d{3} · (no )?watermark detected \(threshold: z > 4\) · "
                                r"green \d+ of \d+ tokens \((\d+\.\d|under 0\.1|over 99\.9)%\) · p = ")).wait_for(timeout=30_000)
    assert "\u2060" not in page.locator("main").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "playground.png"))


def test_a_run_generated_from_the_command_line_shows_in_the_open_app_as_it_lands(tmp_path, browser_page):
    """The app open on a database while `python -m fwsapp generate` writes to it: the sidebar shows the run's stored
    progress, the Home page counts the run with no reload, and Quality and FWS open while it runs (they crashed on a
    run with no sample yet, issue 48)."""
    import subprocess
    import sys

    from tests.conftest import start_streamlit

    db, page = tmp_path / "shared.duckdb", browser_page
    with start_streamlit(tmp_path, db) as url:
        page.goto(url)
        page.get_by_role("heading", name="fwsapp", exact=True).wait_for(timeout=90_000)
        runs = page.get_by_test_id("stMetric").filter(has_text="Runs")
        runs.get_by_text("0", exact=True).wait_for(timeout=30_000)
        command = [sys.executable, "-m", "fwsapp", "generate", "--task", "qa", "--method", "KGW", "--n", "5",
                   "--max-new-tokens", "32", "--batch-size", "1", "--seed", "31", "--db", str(db)]
        errors = tmp_path / "generate.err"  # a file, not a pipe: its progress lines would fill a pipe nobody reads
        process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=errors.open("w"))
        try:
            page.get_by_text(re.compile(r"written by another process: \d of 5 samples stored")).wait_for(timeout=180_000)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "shared-database.png"), full_page=True)
            runs.get_by_text("1", exact=True).wait_for(timeout=30_000)  # the page drawn again, not reloaded
            for link, heading in (("Quality", "Quality"), ("FWS", "Factuality-Weighted Score")):
                page.get_by_role("link", name=link).first.click()
                page.get_by_role("heading", name=re.compile(heading)).first.wait_for(timeout=60_000)
                settled(page)
                assert page.get_by_test_id("stException").count() == 0, link
                assert page.get_by_text("written by another process").count() == 1, link  # drawn while it ran
                page.screenshot(path=str(ARTIFACTS / f"{link.lower()}-while-generating.png"), full_page=True)
            assert process.wait(timeout=300) == 0, errors.read_text()[-2000:]
        finally:
            process.kill()
        page.get_by_text("written by another process").wait_for(state="detached", timeout=30_000)


ADMIN_TOKEN = "an admin token for the browser test, long and random enough"


def job_finished(page, name: str, timeout_ms: int = 90_000) -> None:
    """Wait for a background job's result in its form: the line ending "(finished HH:MM:SS)", or its failure line,
    which fails the test with what it says; where neither comes, a screenshot of the page as it stood."""
    # The time's colons are followed by a word joiner (render.message: no autolinks in a message).
    result = page.get_by_text(re.compile(r"\(finished \d\d:\u2060?\d\d:\u2060?\d\d\)$| failed: | was refused: ")).first
    try:
        result.wait_for(timeout=timeout_ms)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"{name}-timeout.png"), full_page=True)
        raise
    assert "(finished" in result.inner_text(), result.inner_text()


def settled(page) -> None:
    """Wait until the script run has finished (Streamlit's "Running" status is gone): a click on a form that is still
    being redrawn would be lost."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30_000)
    page.wait_for_timeout(300)


def rate_current(page, values, then: str) -> None:
    """Answer the six questions of the item in view with `values`, submit, and wait for the text `then`. No earlier
    answer may be shown. Clicks that land while the form is still being redrawn are lost, as a person would find:
    the page says so, and the answers are given again."""
    for attempt in range(3):
        settled(page)
        groups = page.get_by_role("radiogroup")
        groups.nth(5).wait_for(timeout=30_000)
        assert groups.count() == len(values)
        if attempt == 0:  # no rating of anyone's in view; a refused submit keeps the answers given
            # Once drawn: under load, the item's number can be new while the form below is still the last item's.
            page.wait_for_function("() => !document.querySelector('input[type=radio]:checked')", timeout=15_000)
        for index, value in enumerate(values):
            groups.nth(index).get_by_text(str(value), exact=True).click()
        page.get_by_role("button", name="Submit").click()
        try:
            page.get_by_text(then).wait_for(timeout=15_000)
            return
        except Exception:
            assert page.get_by_text("Rate all three questions").count() == 1
    raise AssertionError(f"never reached {then!r}")


def only_the_rater_view(page) -> bool:
    """The rater view and no way out of it: no sidebar, no link to another page (a heading's own anchor aside)."""
    page.get_by_role("heading", name="Rate answers").wait_for(timeout=30_000)
    links = page.locator("a[href]").evaluate_all("links => links.map(link => link.getAttribute('href'))")
    assert all(href.startswith("#") for href in links), links
    # Issue 58, item 17: no Deploy button and no developer menu either.
    assert page.get_by_role("button", name="Deploy").count() == 0
    assert page.locator('[data-testid="stMainMenu"]').count() == 0
    return page.locator('[data-testid="stSidebar"]').count() == 0


def test_a_study_served_to_an_admin_and_two_raters_at_once(tmp_path, chromium):
    """Two raters rate through their links while the admin follows; neither reaches another page or the other's
    ratings, nothing their browsers receive names the watermark, and a revoked link stops at once."""
    from fwsapp.human import access, study
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db, start_streamlit

    db = tmp_path / "study.duckdb"
    run_id = imported_qa_db(db, 8)
    store = Store(db)
    _, invites = study.create(store, "pilot", [run_id], items_per_run=4, raters_per_item=2, attention_share=0.25,
                              raters=["Dr A", "Dr B"])
    store.close()
    with start_streamlit(tmp_path, db, FWSAPP_ADMIN_TOKEN=ADMIN_TOKEN) as url:
        raters = []
        for invite in invites:
            context = chromium.new_context(viewport={"width": 1400, "height": 1600})
            page = context.new_page()
            received = []
            page.on("websocket", lambda socket, received=received: socket.on(
                "framereceived", lambda frame: received.append(frame if isinstance(frame, bytes) else frame.encode())))
            page.goto(f"{url}/?invite={invite.token}")
            assert only_the_rater_view(page)
            raters.append((invite, context, page, received))
        tasks = 4 + 1  # four items each, one shown again as an attention check
        for step in range(tasks):  # the two raters in turn, item by item, at the same time
            for number, (_, _, page, _) in enumerate(raters):
                rate_current(page, [(step + number + index) % 5 + 1 for index in range(6)],
                             f"{step + 2} of {tasks}" if step + 1 < tasks else "Nothing left to rate")
        for invite, context, page, received in raters:
            seen = (page.content().encode() + b"".join(received)).lower()
            for secret in (b"watermark", run_id.lower().encode(), b"kgw"):
                assert secret not in seen, f"{secret!r} reached {invite.name}'s browser"
            other = next(link for link in invites if link is not invite)
            assert other.rater_id.encode() not in seen and other.token.lower().encode() not in seen
            probe = context.new_page()
            # Another page's URL with the link (every page's is an AppTest in test_study.py), and without it.
            for path in ["detect", "study"]:
                probe.goto(f"{url}/{path}?invite={invite.token}")
                assert only_the_rater_view(probe), path
                probe.get_by_text("Nothing left to rate").wait_for(timeout=30_000)
            probe.close()
        stranger = chromium.new_page()
        for path in ["", "rate"]:
            stranger.goto(f"{url}/{path}")
            stranger.get_by_label("Admin token", exact=True).wait_for(timeout=30_000)
            assert stranger.locator("a[href]:not([href^='#'])").count() == 0
            assert stranger.locator('[data-testid="stSidebar"]').count() == 0
        stranger.close()
        ARTIFACTS.mkdir(exist_ok=True)
        raters[0][2].screenshot(path=str(ARTIFACTS / "rater-done.png"), full_page=True)

        admin = chromium.new_page(viewport={"width": 1400, "height": 1600})
        admin.goto(f"{url}/study")
        admin.get_by_label("Admin token", exact=True).fill(ADMIN_TOKEN)
        admin.get_by_role("button", name="Open the app").click()
        admin.get_by_role("link", name="Study").click()  # the app, its pages in the sidebar
        admin.get_by_role("heading", name="Study", exact=True).wait_for(timeout=60_000)
        admin.get_by_text("Attention consistency:").wait_for(timeout=30_000)
        admin.locator('[data-testid="stDataFrame"] canvas').first.wait_for(timeout=30_000)
        admin.wait_for_timeout(1000)
        admin.screenshot(path=str(ARTIFACTS / "study-progress.png"), full_page=True)
        admin.get_by_role("tab", name="Agreement", exact=True).click()
        admin.get_by_text("Inter-rater agreement").wait_for(timeout=30_000)
        admin.get_by_role("tab", name="Export", exact=True).click()
        with admin.expect_download() as download:
            admin.get_by_role("button", name="Ratings (csv)").click()
        exported = download.value.path().read_text()
        assert invites[0].rater_id in exported and invites[1].rater_id in exported
        assert all(invite.token not in exported and invite.name not in exported for invite in invites)
        admin.get_by_role("tab", name="Links", exact=True).click()
        admin.locator('[data-testid="stSelectbox"]', has_text="Revoke a link").locator("input").click()
        admin.get_by_role("option", name=re.compile("Dr B")).click()
        admin.get_by_role("button", name="Revoke", exact=True).click()
        admin.get_by_text("Revoked the link of Dr B", exact=False).wait_for(timeout=30_000)
        _, _, revoked, _ = raters[1]
        revoked.get_by_role("button", name="Previous").click()  # the page the rater has open
        revoked.get_by_text(access.INVALID_LINK).wait_for(timeout=30_000)
        assert revoked.get_by_role("radiogroup").count() == 0
        revoked.goto(f"{url}/?invite={invites[1].token}")
        revoked.get_by_text(access.INVALID_LINK).wait_for(timeout=30_000)
        raters[0][2].get_by_role("button", name="Previous").click()  # the other link still works
        raters[0][2].get_by_role("radiogroup").nth(5).wait_for(timeout=30_000)
        admin.screenshot(path=str(ARTIFACTS / "study-links.png"), full_page=True)


def test_no_list_of_page_files_is_painted_before_the_router_runs(streamlit_server, browser_page):
    """Streamlit's own list of pages/ would paint every file before st.navigation runs (a rater's link and the admin
    sign-in included); the app lists its pages itself, by section, once the router has run. The tab of a fresh
    server's first page never reads "app" (the script's name), not even for an instant."""
    browser_page.add_init_script("""window.titles = [];
        setInterval(() => { if (window.titles.at(-1) !== document.title) window.titles.push(document.title); }, 2);""")
    for path in ("", "quality", "?invite=nothing"):
        browser_page.goto(f"{streamlit_server}/{path}")
        browser_page.wait_for_selector("[data-testid=stApp]", timeout=60_000)
        assert browser_page.locator("[data-testid=stSidebarNav]").count() == 0
        assert browser_page.get_by_text("rater", exact=True).count() == 0  # no file name of pages/
        browser_page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=60_000)
        browser_page.wait_for_timeout(500)
        assert "app" not in browser_page.evaluate("window.titles"), path
    browser_page.goto(streamlit_server)
    browser_page.get_by_role("link", name="Robustness").wait_for(timeout=60_000)  # the app's own list


def test_the_facts_browser_on_the_paper_biomistral_answers(tmp_path, browser_page):
    """The Entities page's facts tab in Chromium on the paper's BioMistral QA answers: a changed drug is outlined, a
    negated fact is marked, and a verdict on a drug is saved under the rater's name."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store
    from tests.conftest import start_streamlit

    db, page = tmp_path / "facts.duckdb", browser_page
    store = Store(db)
    run_id = import_logs(store, method="KGW", model="biomistral", task_name="qa", generations=LogFile.from_path(
        PROJECT.parent / "shared" / "data" / "paper" / "KGW-g0.5-d2-biomistral-HQA2.generations.json"))
    store.close()
    ARTIFACTS.mkdir(exist_ok=True)
    with start_streamlit(tmp_path, db) as url:
        page.goto(f"{url}/entities")
        page.get_by_role("heading", name="Clinical facts and disease entities").wait_for(timeout=90_000)
        page.screenshot(path=str(ARTIFACTS / "facts-first-paint.png"), full_page=True)
        needle = page.get_by_role("textbox", name="Texts contain")
        needle.fill("sulfasalazine")
        needle.press("Enter")
        page.get_by_text("Who can not take disease").first.wait_for(timeout=60_000)
        settled(page)
        drugs_tab = page.get_by_role("tab", name=re.compile(r"drugs \(\d+ changed\)"))
        drugs_tab.wait_for(timeout=120_000)  # the facts are found once the taggers have loaded
        drugs_tab.click()
        outlined = page.locator("span[title*='drug against the']:visible")  # React rewrites the style attribute
        outlined.first.wait_for(timeout=60_000)  # a drug change, outlined
        assert "solid" in outlined.first.get_attribute("style")
        assert page.locator("a:visible", has_text="www").count() == 0  # the reference's "www.mhra.gov.uk" is text
        rater = page.get_by_role("textbox", name="Your name (verdicts are filed under it)").first
        rater.fill("Dr A")
        rater.press("Enter")
        settled(page)
        page.locator("label:visible").filter(has_text=re.compile("^Wrong$")).first.click()
        page.get_by_text(re.compile("Recorded for Dr A: Wrong")).first.wait_for(timeout=30_000)
        # "because they have no arthralgia / swelling": negated facts, marked ¬ ("do not clearly specify ... the
        # safety of methotrexate" negates no drug: the trigger is seven words away).
        page.get_by_role("tab", name=re.compile(r"diseases \(\d+ changed\)")).click()
        page.locator("span[title*='(negated)']:visible").first.wait_for(timeout=30_000)
        settled(page)
        page.screenshot(path=str(ARTIFACTS / "facts-settled.png"), full_page=True)
        assert page.get_by_test_id("stException").count() == 0
    verdicts = Store(db).fact_verdicts("Dr A", run_id, 5)
    assert list(verdicts.verdict) == ["wrong"]
