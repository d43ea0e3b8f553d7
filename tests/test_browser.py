"""The main path in a real browser: Debian's Chromium driven by Playwright against `streamlit run`."""
import re

from tests.conftest import PROJECT

ARTIFACTS = PROJECT / "test-artifacts"


def test_two_sample_demo_generation_shows_watermarked_text_and_z(streamlit_server, browser_page):
    page = browser_page
    page.goto(streamlit_server)
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
    page.get_by_role("heading", name="Detection metrics").wait_for(timeout=60_000)
    page.wait_for_timeout(2000)
    page.screenshot(path=str(ARTIFACTS / "detect.png"), full_page=True)
