"""Robustness: the attack registry and one module per attack (`attacks/`), and attack sets: a run's texts attacked
and detected again (`attack_sets.py`)."""
