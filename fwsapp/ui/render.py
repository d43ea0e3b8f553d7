"""Stored text made inert for the page: model output and imported files are data, never markup.

Streamlit's markdown interprets far more than HTML: links and images (`[x](url)`, `![x](url)`, bare
`http://…` and `www.…`), emphasis, `:red[…]` colours, `:material/…:` icons, `$…$` maths, headings, tables
and quotes. Escaping only HTML leaves all of that live: an imported text with `![x](http://host/…)` makes
a reviewer's browser fetch that URL. So every ASCII punctuation character becomes a numeric character
reference: the markdown parser decodes it back to the same character after parsing, as text, so the page
shows the text literally and no syntax survives. Letters, digits and spaces are left alone.

GFM's autolinking still runs on the decoded text (a browser test showed `http://…` turned into a live
link), so every ':' and '@' is followed, and the '.' of 'www.' preceded, by an empty `<span></span>`: it splits the text
where a scheme, an e-mail address or a www. name would be recognised, and copied text carries nothing extra.
Notices that allow no HTML (`message`, for st.error, st.progress and the like) split them with an invisible word
joiner (U+2060) instead, after a ':' only where text follows it, as a scheme's does.
"""
from __future__ import annotations

import html
import re
import string

import numpy as np
import pandas as pd

from fwsapp import in_words, p_text, share_text, units
from fwsapp.entities.recognizers import KINDS
from fwsapp.watermark import methods

_INERT = {ord(char): f"&#{ord(char)};" for char in string.punctuation}
WORD_JOINER = "\u2060"
# "written by another process: 2 of 5" stays as typed: searchable, and copied without an invisible character.
_AUTOLINK_TRIGGERS = re.compile(r"(?<=:)(?=\S)|(?<=@)|(?i:(?<=www)(?=\.))")
_ESCAPED_TRIGGERS = re.compile(r"&#58;|&#64;|(?i:(?<=www)&#46;)")  # ':', '@' and the '.' of 'www.', once escaped
AUTOLINK_BREAK = "<span></span>"


def inert(text: str | None) -> str:
    """`text` as literal page content for st.markdown with unsafe_allow_html; newlines become <br>."""
    if text is None:
        return ""
    escaped = str(text).translate(_INERT)
    # Before the '.' of 'www.' (after it, the autolinker still took a lone "www" for a link, seen in Chromium).
    unlinkable = _ESCAPED_TRIGGERS.sub(lambda match: match.group(0) + AUTOLINK_BREAK if match.group(0) != "&#46;"
                                       else AUTOLINK_BREAK + match.group(0), escaped)
    return unlinkable.replace("\r\n", "\n").replace("\n", "<br>")


def message(text: str) -> str:
    """An error or notice that may quote file names or file content, for st.error, st.warning and st.info: no HTML
    there, so newlines are Markdown breaks and autolinks are split by word joiners."""
    if text is None:
        return ""
    unlinkable = _AUTOLINK_TRIGGERS.sub(WORD_JOINER, str(text))
    return unlinkable.translate(_INERT).replace("\r\n", "\n").replace("\n", "  \n")


ENTITY_COLOURS = {"hallucinated": "#f4a6a6", "introduced": "#ffe08a", "entity": "#cfe3ff"}
ENTITY_MEANINGS = {"hallucinated": "introduced and unsupported by the reference",
                   "introduced": "introduced, close to a reference entity", "entity": "a disease the reference names"}


# plotly.express's own markup in a figure: line breaks and the hover box's <extra></extra>.
_NOT_CHART_MARKUP = re.compile(r"<(?!(?:br|/?extra)>)")


def chart_text(text: str) -> str:
    """`text` as literal chart text. Plotly draws every string of a figure (legend, ticks, hover, titles) as its own
    subset of HTML, where `<a href>` is a live link and `<span style>` styles: a model's or a file's name would be
    markup there. '&' and every '<' but plotly.express's own become entities, which plotly shows as the characters."""
    return _NOT_CHART_MARKUP.sub("&lt;", text.replace("&", "&amp;"))


def inert_figure(figure) -> dict:
    """`figure` (a plotly Figure) as a dict whose every string is `chart_text`, for st.plotly_chart. Every string,
    not a list of text properties: the names a legend groups by (legendgroup, offsetgroup) are escaped alike, and a
    property plotly's enumerations spell (a mode, a colour, a dash) has no '&' or '<' to change."""
    def inert(value):
        if isinstance(value, str):
            return chart_text(value)
        if isinstance(value, dict):
            return {key: inert(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [inert(item) for item in value]
        if isinstance(value, np.ndarray) and value.dtype == object:
            return [inert(item) for item in value.tolist()]
        return value

    return inert(figure.to_plotly_json())


def score_text(score: float, label: str, resolution: float | None = None) -> str:
    """A detection score as shown: a p-value in significant digits (a strong watermark's p is 1e-12, not "0.000"),
    and one that underflowed to 0 as below the smallest double; any other score to three decimals. `resolution`: the
    step of a p-value that counts null keys (`MethodInfo.p_resolution`), whose 0 is below that step, not 1e-300."""
    if label == "p" and score == 0 and resolution:
        return f"< {resolution:.3g}"
    return p_text(score) if label == "p" else f"{score:.3f}"


def score_equation(label: str, score: float, resolution: float | None = None) -> str:
    """'p = 0.013', 'z = 4.213', or 'p < 0.002' where the score is written as a bound."""
    written = score_text(score, label, resolution)
    return f"{label} {written}" if written.startswith("<") else f"{label} = {written}"


def scores_written(table: pd.DataFrame, labels: dict, resolutions=None) -> pd.DataFrame:
    """`table` with each column of `labels` written as `score_text` writes a score under its label (one label for the
    column, or one per row), so a p of 5e-25 reads 5e-25 beside a z of 4.213, not 0 or a long decimal.
    `resolutions`: per row, the step of its method's p-values where they count null keys, else None."""
    if table.empty:
        return table
    steps = [None] * len(table) if resolutions is None else list(resolutions)
    written = {}
    for column, label in labels.items():
        row_labels = [label] * len(table) if isinstance(label, str) else list(label)
        written[column] = [score_text(score, kind, step) if pd.notna(score) else None
                           for score, kind, step in zip(table[column], row_labels, steps)]
    return table.assign(**written)


def tries_table(rows: list[dict]) -> pd.DataFrame:
    """The Playground's tries (`playground.history_row`) as a table, each score under its own label."""
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    steps = table.pop("p resolution") if "p resolution" in table else None
    return scores_written(table, {"score watermarked": table["score is"], "score unwatermarked": table["score is"],
                                  "p watermarked": "p"}, steps)


def answer_line(figures: dict) -> str:
    """The detector's say on one Playground answer (`playground.answer_figures`), as the lm-watermarking demo gives
    it, with a cheap quality figure; counts in the method's unit (a semantic watermark scores sentences)."""
    unit = figures["unit"]
    scored = units(figures["scored"], unit)
    green = (f" · green {figures['green']} of {scored} ({share_text(figures['green share'])})"
             if figures["green"] is not None else f" · {scored} scored")
    # The p-value beside the score, unless the score is that p-value.
    p_value = (f" · {score_equation('p', figures['p'])}" if figures["p"] is not None and figures["score label"] != "p"
               else "")
    quality = "".join(f" · ROUGE-L to the {name} {figures[key]:.2f}" for name, key in
                      (("unwatermarked answer", "ROUGE-L to unwatermarked"), ("reference", "ROUGE-L to reference"))
                      if figures[key] is not None)
    verdict = "watermark detected" if figures["detected"] else "no watermark detected"
    if figures.get("needed"):  # short answers are often just too short: say how long this one would need
        stronger = f", or a stronger {figures['strength'].replace('_', ' ')}" if figures["strength"] else ""
        quality += (f" · at this strength it would need about {units(figures['needed'], unit, 'scored')}, "
                    f"not {figures['scored']}: raise the new tokens{stronger}")
    score = score_equation(figures["score label"], figures["score"], figures["resolution"])  # a p of 5e-25 is not "0.00"
    return f"{score} · {verdict} (threshold: {figures['threshold']}){green}{p_value}{quality}"


def entity_legend() -> str:
    """The highlight colours and what each means, as chips."""
    return " ".join(f'<span style="background:{ENTITY_COLOURS[kind]};padding:0 6px;border-radius:3px">{meaning}</span>'
                    for kind, meaning in ENTITY_MEANINGS.items())


def highlight_entities(text: str | None, entities: pd.DataFrame) -> str:
    """Text with its disease entities highlighted; every piece of text is made inert before it is wrapped,
    and tooltips (the closest reference entity and its similarity) are escaped as attributes."""
    if not isinstance(text, str):
        return "<em>(no text)</em>"
    pieces, position = [], 0
    for row in entities.sort_values("start_char").itertuples():
        if row.start_char < position:
            continue
        pieces.append(inert(text[position:row.start_char]))
        kind = "hallucinated" if row.hallucinated else "introduced" if row.introduced else "entity"
        tip = ENTITY_MEANINGS[kind]
        if row.introduced:
            closest = row.closest_reference if isinstance(row.closest_reference, str) else "none in the reference"
            tip = f"{tip}: closest reference entity {closest} (similarity {row.similarity:.2f})"
        pieces.append(f'<span title="{html.escape(tip, quote=True)}" style="background:{ENTITY_COLOURS[kind]};'
                      f'padding:0 2px;border-radius:3px">{inert(text[row.start_char:row.end_char])}</span>')
        position = row.end_char
    pieces.append(inert(text[position:]))
    return "".join(pieces)


CHANGED_BORDER = "2px solid #c0392b"
ASSERTION_MARKS = {"negated": "¬ ", "uncertain": "? "}


def fact_kinds_named() -> str:
    """The kinds of fact, as a caption names them: "diseases, drugs, doses and durations"."""
    return in_words(kind.plural for kind in KINDS.values())


def fact_legend() -> str:
    """The facts' highlight colours, and how a changed, negated or uncertain fact is marked, as chips."""
    chips = [f'<span style="background:{kind.colour};padding:0 6px;border-radius:3px">{html.escape(kind.change)}</span>'
             for kind in KINDS.values()]
    chips.append(f'<span style="border:{CHANGED_BORDER};padding:0 6px;border-radius:3px">changed</span>')
    chips += [f"<span>{mark.strip()} {assertion}</span>" for assertion, mark in ASSERTION_MARKS.items()]
    return " ".join(chips)


def highlight_facts(text: str, facts, changed: dict) -> str:
    """Text with its facts highlighted by kind, a negated or uncertain fact marked (¬, ?), and each span that changed
    outlined, its tooltip saying against what and how (`changed`: span -> [(against, Change)]). A corrupted term
    (a change with no fact) is outlined alone. Every piece of text is made inert before it is wrapped."""
    if not text:
        return "<em>(no text)</em>"
    marks = {(fact.start, fact.end): fact for fact in facts}
    spans = sorted(set(marks) | set(changed))
    pieces, position = [], 0
    for start, end in spans:
        if start < position or start == end:
            continue
        pieces.append(inert(text[position:start]))
        fact = marks.get((start, end))
        style = "padding:0 2px;border-radius:3px"
        tips = [f"{fact.kind}: {fact.value} ({fact.assertion})"] if fact else []
        if fact:
            style += f";background:{KINDS[fact.kind].colour}"
        for against, change in changed.get((start, end), []):
            style += f";border:{CHANGED_BORDER}"
            tips.append(f"{change.kind} against the {against}: was '{change.was}', now '{change.now}'")
        mark = ASSERTION_MARKS.get(fact.assertion, "") if fact else ""
        pieces.append(f'<span title="{html.escape("; ".join(tips), quote=True)}" style="{style}">'
                      f"{html.escape(mark)}{inert(text[start:end])}</span>")
        position = end
    pieces.append(inert(text[position:]))
    return "".join(pieces)


FLAG_COLOURS = {1: (200, 247, 197), 0: (247, 197, 197), -1: (224, 224, 224)}
# An unscored token has no fill, only a dashed outline: in the continuous view grey is a scored token's neutral evidence.
UNSCORED_STYLE = "outline:1px dashed #9e9e9e;outline-offset:-1px"


def _evidence_colour(value: float) -> tuple[int, int, int]:
    """Red at 0, grey at 0.5 (an unwatermarked token's average), green at 1, as MarkLLM's continuous view."""
    low, high = (FLAG_COLOURS[0], FLAG_COLOURS[-1]) if value < 0.5 else (FLAG_COLOURS[-1], FLAG_COLOURS[1])
    share = value * 2 if value < 0.5 else value * 2 - 1
    return tuple(round(a + (b - a) * share) for a, b in zip(low, high))


def token_view(tokens: list[str], flags: list[int], weights: list[float] = (), values: list[float] = (),
               window: tuple[int, int] | None = None) -> str:
    """Tokens coloured green/red by flag, or red → grey → green by continuous evidence (`values`), unscored ones only
    outlined, each made inert before it is wrapped. Where tokens carry `weights`, a token's colour is as strong as
    its weight against the largest, and its tooltip gives the weight. A newline token shows as ↵ inside its colour,
    then breaks the line, so its flag stays visible. The tokens of `window` (first, end) are underlined."""
    largest = max((weight for weight, flag in zip(weights, flags) if flag >= 0), default=0) or 1
    spans = []
    for index, (token, flag) in enumerate(zip(tokens, flags)):
        scored = flag >= 0
        colour = _evidence_colour(values[index]) if values and scored else FLAG_COLOURS[flag]
        strength, tip = (1.0 if scored else 0.0), []
        if values and scored:
            tip.append(f"evidence {values[index]:.2f}")
        if weights and scored:
            strength = 0.15 + 0.85 * max(weights[index], 0) / largest
            tip.append(f"weight {weights[index]:.3g}")
        title = f' title="{html.escape(", ".join(tip), quote=True)}"' if tip else ""
        underlined = f";{WINDOW_STYLE}" if window and window[0] <= index < window[1] else ""
        unscored = "" if scored else f";{UNSCORED_STYLE}"
        spans.append(f'<span{title} style="background:rgba{(*colour, round(strength, 3))};padding:0 1px;'
                     f'border-radius:2px{unscored}{underlined}">{inert(token.replace(chr(10), "↵"))}</span>' + "<br>" * token.count("\n"))
    return '<div style="line-height:1.9;font-family:monospace">' + "".join(spans) + "</div>"


def detection_tokens(tokens: list[str], detection, window: tuple[int, int] | None = None) -> str:
    """A Detection's tokens as `token_view` draws them, with whatever per-token weights and evidence it carries, and
    a WinMax window (first token, end) underlined."""
    return token_view(tokens, detection.token_flags, detection.token_weights, detection.token_values, window)


WINDOW_STYLE = "box-shadow:inset 0 -3px 0 #6a3d9a"  # one purple bar under the whole window


def detection_legend(method: str, detection, window: tuple[int, int] | None = None) -> str:
    """What the colours of `detection_tokens` mean for this detection."""
    colours = ("red → grey → green = evidence against, neutral, for the watermark" if detection.token_values
               else "green = the sentence that ends at the token counts for the watermark, red = against (a watermark "
               "of sentences scores each on its last token)" if methods.info(method).unit == "sentence"
               else "green = the token counts for the watermark, red = against")
    weights = "; a fainter colour = less weight in the score (hover for it)" if detection.token_weights else ""
    underlined = (f"; underlined in purple = the best window (WinMax), tokens {window[0] + 1}–{window[1]}" if window else "")
    return f"{method}: {colours}, a dashed outline = not scored{weights}{underlined}."


CHANGE_COLOURS = {"changed": "#ffd6a5", "pasted": "#b7e4c7", "inserted": "#ffadad"}
# What each colour marks; {fact} is what the attack's mentions are ("disease", "drug", "dose").
CHANGE_MEANINGS = {"changed": "words the attack changed, removed or added", "pasted": "watermarked words pasted in",
                   "inserted": "a {fact} the attack put in: a change of the facts"}
MENTION_STYLE = "border-bottom:2px solid #1f6fb2"


def change_legend(spans_are: str = "pasted", fact: str = "disease") -> str:
    """The colours of a comparison whose marked spans are `spans_are` ("pasted" or "inserted") and whose underlined
    mentions are of `fact` (a fact kind's change name: disease, drug, dose)."""
    chips = [f'<span style="background:{CHANGE_COLOURS[kind]};padding:0 6px;border-radius:3px">'
             f'{CHANGE_MEANINGS[kind].format(fact=fact)}</span>' for kind in ("changed", spans_are)]
    return " ".join(chips + [f'<span style="{MENTION_STYLE}">a {fact} mention</span>'])


def _words_marked(text: str, changed: set[int], spanned: set[int], mentions: list[tuple[int, int]],
                  spans_are: str = "pasted") -> str:
    marked = []
    for index, match in enumerate(re.finditer(r"\S+", text)):
        kind = spans_are if index in spanned else "changed" if index in changed else None
        style = [f"background:{CHANGE_COLOURS[kind]}"] if kind else []
        if any(start < match.end() and match.start() < end for start, end in mentions):
            style.append(MENTION_STYLE)
        marked.append(f'<span style="{";".join(style)}">{inert(match[0])}</span>' if style else inert(match[0]))
    return " ".join(marked)


def attack_changes(clean: str, attacked: str, spans: list[tuple[int, int]] = (),
                   clean_mentions: list[tuple[int, int]] = (), attacked_mentions: list[tuple[int, int]] = (),
                   spans_are: str = "pasted") -> tuple[str, str]:
    """The clean and the attacked text, each made inert, with the words an alignment of the two does not keep marked
    in both, in the attacked text the words of the attack's spans (given in characters: watermarked words pasted in,
    or the names or doses put in) marked as `spans_are` says, and each text's mentions (character spans) underlined."""
    import difflib

    before, after = clean.split(), attacked.split()
    kept_before, kept_after = set(), set()
    for block in difflib.SequenceMatcher(None, before, after, autojunk=False).get_matching_blocks():
        kept_before |= set(range(block.a, block.a + block.size))
        kept_after |= set(range(block.b, block.b + block.size))
    starts = [match.start() for match in re.finditer(r"\S+", attacked)]
    pasted = {index for index, start in enumerate(starts) if any(low <= start < high for low, high in spans)}
    return (_words_marked(clean, set(range(len(before))) - kept_before, set(), list(clean_mentions)),
            _words_marked(attacked, set(range(len(after))) - kept_after, pasted, list(attacked_mentions), spans_are))
