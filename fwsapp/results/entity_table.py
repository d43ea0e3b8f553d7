"""The paper's Table 7 per run: the disease entities a watermark introduced and how many the reference does not
support, each run named as every page names it (`run_names`). The analysis per text is `fwsapp.entities.introduced`."""
from __future__ import annotations

import pandas as pd

from fwsapp.entities.introduced import recognizer_of
from fwsapp.results.run_names import run_settings
from fwsapp.sample_size import enough, not_enough


def unsupported_shown(rate: float | None, mentions: int):
    """A share (%) of unsupported mentions, or its increase, as a table shows it: below the small-sample rule's minimum
    of mentions "not enough data (n = …)" (one mention read 0 % or 100 %); None where there was no mention."""
    return not_enough(mentions) if mentions and not enough("rate", mentions) else rate


def entity_summary(entities, analyses, runs):
    """The paper's Table 7 per run: introduced entities per text, the share of tokens inside introduced
    entities, the hallucination rate (hallucinated share of the text's disease mentions, with the mentions it counts),
    and the increase of each over unwatermarked."""
    rows = []
    names = run_settings(runs)
    for run in runs.itertuples():
        own = entities[entities.run_id == run.run_id]
        samples = analyses[analyses.run_id == run.run_id]
        if samples.empty:
            continue
        row = {"run_id": run.run_id, "method": run.method, "settings": names[run.run_id], "task": run.task,
               "model": run.model, "texts": len(samples),
               "recognizer": ", ".join(sorted(set(samples.config.map(recognizer_of))))}
        for kind in ("unwatermarked", "watermarked"):
            mentions = own[own.text_kind == kind]
            introduced = mentions[mentions.introduced]
            token_total = samples[f"{kind}_tokens"].dropna().sum()
            row[f"introduced per text ({kind})"] = len(introduced) / len(samples)
            row[f"introduced token share % ({kind})"] = (
                introduced.token_indices.map(len).sum() / token_total * 100 if token_total else None)
            row[f"unsupported by the reference % ({kind})"] = mentions.hallucinated.mean() * 100 if len(mentions) else None
            row[f"disease mentions ({kind})"] = len(mentions)
        for measure in ("introduced per text", "introduced token share %", "unsupported by the reference %"):
            marked, plain = row[f"{measure} (watermarked)"], row[f"{measure} (unwatermarked)"]
            row[f"{measure}: increase"] = None if marked is None or plain is None else marked - plain
        rows.append(row)
    frame = pd.DataFrame(rows)
    # The answer first (what the watermark added, and how much of it the reference does not support), where a
    # 1,400 px page shows it; the run's identity after.
    first = ["method", "settings", "task", "model", "introduced per text: increase", "unsupported by the reference % (watermarked)",
             "unsupported by the reference %: increase"]
    return frame[[column for column in first if column in frame] + [column for column in frame if column not in first]]


def shown_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Table 7 as read (`entity_summary` keeps the numbers): each unsupported share and its increase through
    `unsupported_shown`, the increase by the side with fewer mentions."""
    column = "unsupported by the reference %"
    mentions = {kind: summary[f"disease mentions ({kind})"] for kind in ("watermarked", "unwatermarked")}
    fewer = pd.concat(mentions.values(), axis=1).min(axis=1)
    counts = {**{f"{column} ({kind})": counted for kind, counted in mentions.items()}, f"{column}: increase": fewer}
    return summary.assign(**{name: [unsupported_shown(rate, int(n)) for rate, n in zip(summary[name], counts[name])]
                             for name in counts})
