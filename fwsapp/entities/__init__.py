"""Disease entities: the recognizer registry and its plug-ins (`recognizers/`), the trained recognizer (`ner/`), the
entities a watermark introduced (`introduced.py`) and token entropies (`entropy.py`)."""
