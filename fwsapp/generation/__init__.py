"""Generation: a run's unwatermarked and watermarked texts, batched (`generate.py`), and the Playground's single tries."""
