"""The clinical language: what a medical fact is and how one is found, below the watermarks that use it. The recognizer
registry and its plug-ins (`recognizers/`), the trained taggers (`ner/`), facts with their assertions (`facts.py`,
`assertion.py`), what changed between two texts (`changes.py`), the entities a watermark introduced (`introduced.py`),
facts per run and their review (`fact_analysis.py`, `fact_review.py`) and token entropies (`entropy.py`)."""
