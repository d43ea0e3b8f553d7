"""A generation run as asked for: its task, method, model, parameters, size and sampling, checked when it is made, and
its identity, whose hash is the run's id (the same config is the same run, wherever and whenever it is generated); and
`Cancelled`, how its generation stops when its job is cancelled between batches.

Torch-free, like the registries it checks against: the app's pages, the grid's specs and the CLI make configs without
loading a model library.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fwsapp.data.loaders import DEMO, load_dataset
from fwsapp.models import EMBEDDED_MODEL
from fwsapp.network import checked_server_url
from fwsapp.plugins import checked_seed
from fwsapp.watermark import methods
from fwsapp.watermark.methods import canonical_name

# MarkLLM's generation defaults, as the paper used them: multinomial sampling, no 4-gram repeats,
# and a minimum length (MarkLLM's min_length) so every output is long enough to score.
DEFAULT_SAMPLING = {
    "do_sample": True,
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "no_repeat_ngram_size": 4,
    "min_new_tokens": None,  # None: the same as max_new_tokens
}


@dataclass
class RunConfig:
    task: str
    method: str
    dataset: str = DEMO
    model: str = EMBEDDED_MODEL
    params: dict = field(default_factory=dict)
    n: int = 4
    max_new_tokens: int = 64
    batch_size: int = 4
    seed: int = 42
    sampling: dict = field(default_factory=dict)
    # The base URL of the OpenAI-compatible serving engine that generates the run (its `model` is the name the engine
    # serves it by), or None to generate in this process.
    server: str | None = None
    # The served model's tokenizer where it was named (its name implies none): kept with the run, so every later step
    # reads its ids and texts with it; no part of its identity (the engine's ids are what they are).
    tokenizer: str | None = field(default=None, compare=False)
    # What a method fitted on references (k-SemStamp's clusters) fitted for this run, as stored with it; set when the
    # run's units are planned, and no part of its identity (the fit follows from the identity).
    fitted: dict | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        self.method = canonical_name(self.method)
        for name in ("n", "max_new_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)} (--{name.replace('_', '-')} "
                                 "on the command line).")
        checked_seed(self.seed)
        declared = methods.info(self.method)
        if self.server is not None:
            checked_server_url(self.server)
            if not declared.served_by:
                raise ValueError(f"{self.method} is not a watermark a serving engine applies. Through a server, the method "
                                 f"is the one its engine applies: {' or '.join(methods.served_names())}, with the key "
                                 "and context of the engine's watermark configuration.")
        self.params = declared.typed_params(self.params)  # one setting, one run id: delta = 2 is delta = 2.0
        declared.checked_params(self.params)  # before any run is created or model loaded
        if "rng" in declared.params and "rng" not in self.params:
            # Recorded explicitly: runs made before the generator became a parameter used the CPU one.
            self.params = {**self.params, "rng": declared.defaults["rng"]}

    def resolved_sampling(self) -> dict:
        sampling = {**DEFAULT_SAMPLING, **self.sampling}
        if sampling["min_new_tokens"] is None:
            sampling["min_new_tokens"] = self.max_new_tokens
        if self.server is not None:  # an OpenAI-compatible request has no n-gram ban: the run records what was asked
            sampling.pop("no_repeat_ngram_size")
        return sampling

    def samples(self) -> list:
        """The run's samples; more than the dataset holds is refused, not cut silently."""
        dataset = load_dataset(self.task, self.dataset)
        if self.n > len(dataset):
            raise ValueError(f"n={self.n} is more than the {len(dataset)} samples in {self.dataset}; "
                             f"ask for {len(dataset)} or fewer.")
        return dataset[: self.n]

    def identity(self) -> dict:
        """What determines the outputs; the run id is its hash. The dataset counts by content."""
        identity = asdict(self)
        del identity["fitted"], identity["tokenizer"]
        identity["sampling"] = self.resolved_sampling()
        if self.server is None:  # the ids of runs generated in-process before servers could generate them
            del identity["server"]
        if self.dataset != DEMO:
            identity["dataset_sha256"] = hashlib.sha256(Path(self.dataset).read_bytes()).hexdigest()
        return identity

    def run_id(self) -> str:
        canonical = json.dumps(self.identity(), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def plain_identity(self) -> dict:
        """What determines the unwatermarked texts: the identity without the method, its parameters and n
        (a batch's unwatermarked texts depend on its prompts and seed only)."""
        return plain_identity(self.identity())


def plain_identity(identity: dict) -> dict:
    return {key: value for key, value in identity.items() if key not in ("method", "params", "n")}


class Cancelled(Exception):
    """The job was cancelled between batches; finished batches are stored."""
