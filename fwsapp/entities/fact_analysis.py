"""A run's clinical facts, stored: each text's facts (`fwsapp.entities.facts`), and the changes of each answer
against the run's other texts (`fwsapp.entities.fact_review.COMPARISONS`: the watermarked answer against its
unwatermarked twin and the reference, the unwatermarked one against the reference, by concept). Samples go in chunks,
each written with its done-marker in one transaction, so a stopped analysis resumes where it stopped and a repeated one
adds nothing."""
from __future__ import annotations

from fwsapp.entities.fact_review import samples_facts
from fwsapp.entities.facts import FactFinder

CHUNK = 16  # samples found together and written in one transaction


def analyze_run_facts(store, run_id: str, finder: FactFinder | None = None, progress=None, cancel=None) -> int:
    """Store the facts and changes of every sample of a run that lacks them under this finder's config; returns how
    many samples were analysed."""
    finder = finder or FactFinder()
    config = finder.config
    done = store.fact_analysed_samples(run_id, config)
    generations = store.generations(run_id)
    todo = generations[~generations.sample_idx.isin(done)]
    for start in range(0, len(todo), CHUNK):
        if cancel is not None and cancel.is_set():
            return start
        chunk = todo.iloc[start:start + CHUNK]
        fact_rows, change_rows = [], []
        every = samples_facts([{"watermarked": row.watermarked_text, "unwatermarked": row.unwatermarked_text,
                                "reference": row.reference} for row in chunk.itertuples()], finder)
        for row, found in zip(chunk.itertuples(), every):
            index = int(row.sample_idx)
            fact_rows += [{"sample_idx": index, "text_kind": text_kind, "config": config, "kind": fact.kind,
                           "start_char": fact.start, "end_char": fact.end, "text": fact.text, "value": fact.value,
                           "assertion": fact.assertion}
                          for text_kind, facts in found.facts.items() for fact in facts]
            change_rows += [{"sample_idx": index, "text_kind": text, "against": against, "config": config,
                             "position": position, "kind": change.kind, "start_char": change.start,
                             "end_char": change.end, "was": change.was, "now": change.now}
                            for (text, against), changes in found.changes.items()
                            for position, change in enumerate(changes)]
        store.write_fact_analysis(run_id, config, fact_rows, change_rows, [int(i) for i in chunk.sample_idx])
        if progress:
            progress(start + len(chunk), len(todo))
    return len(todo)
