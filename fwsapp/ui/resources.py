"""Resources the app holds once per process (`st.cache_resource`): the store, loaded models and the job manager."""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from fwsapp.orchestration import pipeline
from fwsapp.orchestration.jobs import JobManager
from fwsapp.models import EMBEDDED_MODEL, LoadedModel, load_model
from fwsapp.paths import DEFAULT_DB
from fwsapp.store import Store


def db_path() -> Path:
    return Path(os.environ.get("FWSAPP_DB", DEFAULT_DB))


def store() -> Store:
    return _store(str(db_path()))


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:
    return Store(path)


_loaded_models: dict[str, str] = {}


@st.cache_resource(show_spinner="Loading the model (the embedded model is converted once, about 30 s)…")
def model(name: str = EMBEDDED_MODEL) -> LoadedModel:
    loaded = load_model(name)
    _loaded_models[name] = loaded.description
    return loaded


def loaded_models() -> list[str]:
    """Descriptions ('name on device (dtype)') of the models this app process holds."""
    return list(_loaded_models.values())


def jobs() -> JobManager:
    return _jobs(str(db_path()))


@st.cache_resource(show_spinner=False)
def _jobs(path: str) -> JobManager:
    return JobManager(_store(path), model)


def revision() -> str:
    return store().revision()


def judge_backend_check(kind: str, judge_model: str | None, base_url: str | None, timeout: float,
                        api_key: str | None = None) -> str:
    return pipeline.judge_backend(model, kind, judge_model, base_url, timeout, api_key).check()


def latest_sweep() -> list[str] | None:
    """The run ids of the newest finished sweep, to preselect on the Detect page."""
    job = jobs().latest("sweep")
    return jobs().sweeps.get(job.key) if job is not None and job.finished else None
