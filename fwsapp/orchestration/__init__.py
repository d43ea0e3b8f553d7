"""Orchestration: the pipeline's steps (`pipeline.py`), and the ways to run them: the app's background jobs, a grid
from a spec, a Ray cluster; with the example data, and `doctor`."""
