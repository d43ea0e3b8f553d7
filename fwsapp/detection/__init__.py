"""Detection: scores as rates (`roc.py`), stored texts scored again (`redetect.py`, `normalizers.py`), and what a
threshold means by length, calibration and strength (`length.py`, `calibration.py`, `strength.py`)."""
