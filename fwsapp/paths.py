"""Where the app keeps its files: the project's cache/ and data/ folders, overridable by environment."""
import os
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("FWSAPP_CACHE", PROJECT_DIR / "cache"))
DEMO_DATA_DIR = PROJECT_DIR / "data"
EXPERIMENTS_DIR = PROJECT_DIR / "experiments"  # the shipped experiment specs
DEFAULT_DB = Path(os.environ.get("FWSAPP_DB", CACHE_DIR / "fwsapp.duckdb"))
UPLOADS_DIR = CACHE_DIR / "uploads"  # datasets uploaded in the app
