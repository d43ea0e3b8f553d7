"""Stored text made inert for the page: model output and imported files are data, never markup.

Streamlit's markdown interprets far more than HTML: links and images (`[x](url)`, `![x](url)`, bare
`http://…` and `www.…`), emphasis, `:red[…]` colours, `:material/…:` icons, `$…$` maths, headings, tables
and quotes. Escaping only HTML leaves all of that live: an imported text with `![x](http://host/…)` makes
a reviewer's browser fetch that URL. So every ASCII punctuation character becomes a numeric character
reference: the markdown parser decodes it back to the same character after parsing, as text, so the page
shows the text literally and no syntax survives. Letters, digits and spaces are left alone.

GFM's autolinking still runs on the decoded text (a browser test showed `http://…` turned into a live
link), so every ':' and '@', and the '.' of 'www.', is followed by an empty `<span></span>`: it splits the text
where a scheme, an e-mail address or a www. name would be recognised, and copied text carries nothing extra.
Notices that allow no HTML (`message`, for st.error and the like) split them with an invisible word joiner
(U+2060) instead.
"""
from __future__ import annotations

import html
import re
import string

import pandas as pd

_INERT = {ord(char): f"&#{ord(char)};" for char in string.punctuation}
WORD_JOINER = "\u2060"
_AUTOLINK_TRIGGERS = re.compile(r"(?<=[:@])|(?i:(?<=www)(?=\.))")
_ESCAPED_TRIGGERS = re.compile(r"&#58;|&#64;|(?i:(?<=www)&#46;)")  # ':', '@' and the '.' of 'www.', once escaped
AUTOLINK_BREAK = "<span></span>"


def inert(text: str | None) -> str:
    """`text` as literal page content for st.markdown with unsafe_allow_html; newlines become <br>."""
    if text is None:
        return ""
    escaped = str(text).translate(_INERT)
    unlinkable = _ESCAPED_TRIGGERS.sub(lambda match: match.group(0) + AUTOLINK_BREAK, escaped)
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


def token_view(tokens: list[str], flags: list[int]) -> str:
    """Tokens coloured green/red (unscored grey), each made inert before it is wrapped. A newline token shows
    as ↵ inside its colour, then breaks the line, so its flag stays visible."""
    colours = {1: "#c8f7c5", 0: "#f7c5c5", -1: "#e0e0e0"}
    spans = [
        f'<span style="background:{colours[flag]};padding:0 1px;border-radius:2px">'
        f'{inert(token.replace(chr(10), "↵"))}</span>' + "<br>" * token.count("\n")
        for token, flag in zip(tokens, flags)
    ]
    return '<div style="line-height:1.9;font-family:monospace">' + "".join(spans) + "</div>"
