"""Stored text is data: every hostile string renders as itself, with no HTML, Markdown or Streamlit syntax live."""
import re
import string

import pandas as pd
import pytest

from fwsapp.ui.render import WORD_JOINER, chart_text, highlight_entities, inert, inert_figure, message, token_view

HOSTILE = [
    "![x](http://evil.example/pixel.png)",
    "[click](http://evil.example/) and http://evil.example/bare and www.evil.example",
    ":red[alarm] :material/warning: :smile:",
    "$x^2$ and $$\\int f$$",
    "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>",
    "# heading\n> quote\n| a | b |\n|---|---|\n- item\n1. item",
    "**bold** _it_ `code` ~~strike~~ <b>b</b> &amp; &#60;",
    "write to doctor@evil.example or see WWW.evil.example and https://evil.example",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_syntax_survives(text):
    rendered = inert(text)
    # Only character references, the line-break tag and the empty spans that break autolinks remain.
    leftover = re.sub(r"&#\d+;|<br>|<span></span>", "", rendered)
    assert not set(leftover) & set(string.punctuation), leftover
    # …and they decode back to exactly the text, with nothing invisible added (copied text is the text)…
    decoded = re.sub(r"&#(\d+);", lambda match: chr(int(match.group(1))), rendered.replace("<br>", "\n"))
    assert WORD_JOINER not in decoded and decoded.replace("<span></span>", "") == text
    # …while no scheme, e-mail address or www. name is contiguous text for GFM's autolinker.
    assert not re.search(r"(?i)https?://|www\.|\w@\w", decoded)
    # Notices, which allow no HTML, split them with a word joiner instead.
    plain = re.sub(r"&#(\d+);", lambda match: chr(int(match.group(1))), message(text).replace("  \n", "\n"))
    assert plain.replace(WORD_JOINER, "") == text and not re.search(r"(?i)https?://|www\.|\w@\w", plain)


def test_a_charts_text_is_literal_and_keeps_plotly_expresss_own_markup():
    """Plotly draws a figure's strings as HTML of its own: `<a href>` in a legend is a live link (seen in Chromium)."""
    import plotly.express as px

    named = "m<a href='http://evil.example/'>x</a> <b>b</b> &amp; Q&A"
    assert chart_text(named) == "m&lt;a href='http://evil.example/'>x&lt;/a> &lt;b>b&lt;/b> &amp;amp; Q&amp;A"
    frame = pd.DataFrame({"run": [named, named, "KGW"], "disease": ["<i>gout</i>", "asthma", "asthma"], "y": [1, 2, 3]})
    figure = inert_figure(px.box(frame, x="disease", y="y", color="run"))
    traces = {trace["name"]: trace for trace in figure["data"]}
    assert set(traces) == {chart_text(named), "KGW"}
    assert list(traces[chart_text(named)]["x"]) == ["&lt;i>gout&lt;/i>", "asthma"]
    # plotly.express's hover box keeps its line breaks and <extra></extra>; the name inside it is literal.
    assert traces["KGW"]["hovertemplate"] == "run=KGW<br>disease=%{x}<br>y=%{y}<extra></extra>"
    assert traces[chart_text(named)]["hovertemplate"].startswith("run=m&lt;a href=")


def test_messages_break_lines_as_markdown_and_keep_letters():
    assert message("a.json, row 2\nbad") == "a&#46;json&#44; row 2  \nbad"
    assert inert("mail a@b.org") == "mail a&#64;<span></span>b&#46;org"
    assert message("mail a@b.org") == "mail a&#64;\u2060b&#46;org"
    # A scheme's ':' is split from what follows it; a ':' before a space stays as typed (searchable, copied as is).
    assert message("at http://x: 2 of 5") == "at http&#58;\u2060&#47;&#47;x&#58; 2 of 5"
    assert inert(None) == "" and inert("Gout 2") == "Gout 2"


def test_entity_highlight_and_token_view_wrap_only_inert_text():
    text = "Gout [x](http://evil.example) and asthma"
    entities = pd.DataFrame([{"start_char": 0, "end_char": 4, "introduced": True, "hallucinated": False,
                              "closest_reference": '"><script>', "similarity": 0.4}])
    html = highlight_entities(text, entities)
    assert "](" not in html and "http://" not in html and "<script>" not in html
    assert 'title="introduced, close to a reference entity: closest reference entity &quot;&gt;&lt;script&gt; (similarity 0.40)"' in html
    view = token_view(["![a](", "http://x"], [1, 0])
    assert "](" not in view and "http://" not in view and view.count("<span style") == 2


def test_a_newline_token_keeps_its_colour_visible():
    view = token_view(["Gout", "\n\n", "is"], [1, 0, -1])
    assert 'rgba(247, 197, 197, 1.0);padding:0 1px;border-radius:2px">↵↵</span><br><br>' in view


def test_token_weights_set_the_strength_of_a_colour_and_values_its_hue():
    weighted = token_view(["a", "b", "c"], [1, 1, -1], weights=[2.0, 0.5, 9.0])
    # The largest weight among scored tokens is full strength; an unscored token's weight is not drawn.
    assert 'title="weight 2" style="background:rgba(200, 247, 197, 1.0)' in weighted
    assert 'title="weight 0.5" style="background:rgba(200, 247, 197, 0.362)' in weighted
    assert 'style="background:rgba(224, 224, 224, 0.0);padding:0 1px;border-radius:2px;outline:1px dashed' in weighted
    graded = token_view(["a", "b", "c", "d"], [1, 1, 1, -1], values=[0.0, 0.5, 1.0, 0.5])
    assert "rgba(247, 197, 197, 1.0)" in graded and "rgba(224, 224, 224, 1.0)" in graded
    assert "rgba(200, 247, 197, 1.0)" in graded and 'title="evidence 0.50"' in graded
    # A token with neutral evidence is grey; an unscored one was the same grey, so the two could not be told apart.
    neutral, unscored = re.findall(r'<span[^>]*style="([^"]*)">[bd]</span>', graded)
    assert "dashed" in unscored and "dashed" not in neutral and "0.0)" in unscored


def test_a_column_of_numbers_with_words_among_them_writes_every_number_alike():
    from fwsapp.ui.widgets import uniform

    frame = pd.DataFrame({"r": [1, 1.0, 0.71, "not enough data (n = 4)", None], "n": [10, 10, 10, 4, 0]})
    shown = uniform(frame)
    assert shown.r.tolist()[:4] == ["1.000", "1.000", "0.710", "not enough data (n = 4)"] and pd.isna(shown.r[4])
    assert shown.n.tolist() == [10, 10, 10, 4, 0]  # numbers alone stay numbers
    # ... as the downloads write them: a TPR of 1 in 400 read 0.003 on the Report page and 0.0025 in its Markdown.
    from fwsapp.results.tables import written_numbers

    rare = pd.DataFrame({"TPR at FPR 1%": [0.0025, "not enough data (n = 4)"], "Unsupported % (watermarked)": [36.36, "–"]})
    assert uniform(rare).values.tolist() == written_numbers(rare).values.tolist() == [
        ["0.0025", "36.4"], ["not enough data (n = 4)", "–"]]


def test_attack_changes_marks_changed_and_pasted_words_and_underlines_mentions_in_inert_text():
    from fwsapp.ui.render import CHANGE_COLOURS, MENTION_STYLE, attack_changes

    clean, attacked = attack_changes("Gout and <b>asthma</b> are common.", "Gout and flu are [x](http://h) common.",
                                     spans=[(9, 12)], clean_mentions=[(0, 4)], attacked_mentions=[(9, 12)])
    assert "<b>" not in clean and "&#60;b&#62;asthma" in clean and "](http" not in attacked
    assert f'background:{CHANGE_COLOURS["changed"]}">&#60;b&#62;asthma' in clean  # removed by the attack
    assert f'<span style="{MENTION_STYLE}">Gout</span>' in clean
    assert f'background:{CHANGE_COLOURS["pasted"]};{MENTION_STYLE}">flu</span>' in attacked
    assert f'background:{CHANGE_COLOURS["changed"]}">&#91;x&#93;' in attacked and attacked.endswith("common&#46;")


def test_entity_swaps_names_are_marked_as_inserted_changes_named_in_the_legend_not_as_pasted_words():
    from fwsapp.robustness.attacks import ATTACKS
    from fwsapp.ui.render import CHANGE_COLOURS, CHANGE_MEANINGS, attack_changes, change_legend

    swap = ATTACKS["entity-swap"]
    assert swap.spans_are == "inserted" and ATTACKS["copy-paste"].spans_are == "pasted"
    _, attacked = attack_changes("Gout is common.", "Leprosy is common.", spans=[(0, 7)], spans_are=swap.spans_are)
    assert f'background:{CHANGE_COLOURS["inserted"]}">Leprosy' in attacked and CHANGE_COLOURS["pasted"] not in attacked
    legend = change_legend(swap.spans_are, swap.fact)
    assert "a disease the attack put in: a change of the facts" in legend and CHANGE_MEANINGS["pasted"] not in legend
    # A dose change's marks are doses, not disease names (its legend read "a disease name the attack put in").
    dose = ATTACKS["dose-change"]
    legend = change_legend(dose.spans_are, dose.fact)
    assert "a dose the attack put in" in legend and "a dose mention" in legend and "disease" not in legend
    assert ATTACKS["drug-swap"].fact == "drug" and ATTACKS["word-deletion"].fact == "disease"


def test_a_p_value_is_shown_in_significant_digits_and_an_underflow_as_a_bound():
    from fwsapp.ui.render import score_text

    assert score_text(2.1e-12, "p") == "2.1e-12" and score_text(0.0, "p") == "< 1e-300"
    assert score_text(0.2345, "p") == "0.234" and score_text(4.56789, "z") == "4.568"


def test_the_playgrounds_tries_write_each_score_under_its_own_label():
    """A vLLM-Gumbel try's p of 5e-25 beside a KGW try's z, in one column: neither a long decimal nor 0.000."""
    from fwsapp.ui.render import tries_table

    table = tries_table([
        {"score is": "p", "score watermarked": 5.3e-25, "score unwatermarked": 0.41, "p watermarked": 5.3e-25},
        {"score is": "z", "score watermarked": 6.12345, "score unwatermarked": -0.5, "p watermarked": 4.6e-10},
    ])
    assert table["score watermarked"].tolist() == ["5.3e-25", "6.123"]
    assert table["score unwatermarked"].tolist() == ["0.41", "-0.500"]
    assert table["p watermarked"].tolist() == ["5.3e-25", "4.6e-10"]


def test_a_column_of_scores_is_written_under_each_rows_label():
    """The Detect page's scores per text: a vLLM-Gumbel p of 1e-30 beside a KGW z read 0 and 4.2 when rounded."""
    import pandas as pd

    from fwsapp.ui.render import scores_written

    table = pd.DataFrame({"score": [1e-30, 4.21234, None], "p": [1e-30, 1.3e-05, 0.5]})
    written = scores_written(table, {"score": ["p", "z", "z"], "p": "p"})
    assert written.score.tolist()[:2] == ["1e-30", "4.212"] and pd.isna(written.score[2])  # nothing, not "nan"
    assert written.p.tolist() == ["1e-30", "1.3e-05", "0.5"]


def test_a_sentence_watermarks_token_colours_say_each_flag_is_a_sentences():
    """SemStamp flags each sentence on its last token; its legend said "green = the token counts for the watermark"
    beside answers whose every other token is outlined as not scored."""
    from fwsapp.ui.render import detection_legend
    from fwsapp.watermark.base import Detection

    flags = Detection(1.7, 2, token_flags=[-1, -1, 1, -1, 0])
    assert "the sentence that ends at the token counts" in detection_legend("SemStamp", flags)
    assert "green = the token counts for the watermark" in detection_legend("KGW", flags)


def test_a_pages_table_rounds_an_exact_half_as_the_text_beside_it_does():
    """An AUROC of 0.8125 (8 against 8 texts: 52 of 64 pairs) read 0.813 in the Detect page's detection sets, the
    browser rounding the half away from zero, and 0.812 in the Robustness table, written by Python."""
    from streamlit.testing.v1 import AppTest

    def page():
        import pandas as pd

        from fwsapp.ui import widgets

        widgets.table(pd.DataFrame({"run": ["a", "b"], "AUROC": [0.8125, 0.9375], "n": [8, 8]}))

    app = AppTest.from_function(page).run()
    shown = app.dataframe[0].value
    assert shown.AUROC.tolist() == [float(f"{0.8125:.3f}"), 0.938] == [0.812, 0.938]
    assert shown.n.tolist() == [8, 8]
