"""DuckDB store: runs, generations, scores, verdicts, analyses, ratings and studies, in one file under cache/.

`core` opens the file (held only while used, so the app and the CLI share it), migrates it and runs transactions;
each other module holds the tables of one area.
"""
from fwsapp.store.analysis import AnalysisTables
from fwsapp.store.core import PER_RUN_TABLES, TEXT_COLUMNS, StoreError, insert_rows
from fwsapp.store.human import HumanTables
from fwsapp.store.migrations import MIGRATIONS, SCHEMA_VERSION
from fwsapp.store.redetections import DetectionSets
from fwsapp.store.runs import RunTables, detection_record, generated_here
from fwsapp.store.study import StudyTables


class Store(RunTables, DetectionSets, AnalysisTables, HumanTables, StudyTables):
    """The database: every area's tables through one object."""


__all__ = ["MIGRATIONS", "PER_RUN_TABLES", "SCHEMA_VERSION", "TEXT_COLUMNS", "Store", "StoreError", "detected_record",
           "detection_record", "generated_here", "insert_rows"]
