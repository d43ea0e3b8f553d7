"""Watermarking: the method registry (`methods.py`), what every method shares (`base.py`), one module per method,
and `factory.py`, which builds a method's watermark from its name."""
