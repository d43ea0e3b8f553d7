"""What every plug-in registry shares: an entry's declaration, and the registry that holds one axis's entries.

Torch-free. Each axis (watermark methods in `watermark/methods.py`, attacks in `robustness/attacks/__init__.py`, quality
metrics in `quality/registry.py`, disease recognizers in `entities/recognizers/__init__.py`, judge backends in
`judge/registry.py`) declares its entries in one module. The CLI's choices, the pages' options, the grid's checks,
`doctor` and the generic tests read that registry, so a new plug-in is its module plus one entry, and nothing else
names it. An entry names its implementation as "module:attribute", imported only when it is used.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path


def always_available() -> str | None:
    return None


def missing_package(package: str) -> Callable[[], str | None]:
    """An availability check: None when `package` is installed, else why not."""
    from importlib.util import find_spec

    return lambda: None if find_spec(package) else f"the {package} package is not installed"


def load_implementation(implementation: str):
    """The attribute named by "module:attribute", its module imported now."""
    module, _, attribute = implementation.partition(":")
    return getattr(import_module(module), attribute)


def _bound(value: float) -> str:
    """A range's end as written: a whole number exactly ("1,099,511,627,776", which "1.09951e+12" rounded, so a key
    just past the end read as in range), any other number in its shortest form."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Param:
    """What values a parameter takes, with one line of help: a numeric range, or a set of choices."""

    help: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    # With choices: a path to an existing file is valid too (a lexicon of one's own).
    or_file: bool = False
    # A key: it may be given as `$VAR`, read from that environment variable and recorded as its fingerprint alone
    # (fwsapp/secret_keys.py).
    secret: bool = False

    def describe(self, secret: bool = True) -> str:
        if self.secret and secret:  # the range, then the other way to give it
            return replace(self, secret=False).describe() + ", or $VAR: read from that environment variable, only " \
                "its fingerprint stored"
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices)) + (", or a file" if self.or_file else "")
        if self.low is not None and self.high is not None:
            return (f"in {'(' if self.open_low else '['}{_bound(self.low)}, {_bound(self.high)}"
                    f"{')' if self.open_high else ']'}")
        if self.low is not None:
            return f"{'>' if self.open_low else '≥'} {_bound(self.low)}"
        if self.high is not None:
            return f"{'<' if self.open_high else '≤'} {_bound(self.high)}"
        return "a finite number"

    def names_a_variable(self, value) -> bool:
        """Whether `value` is a secret given as `$VAR` (or recorded as `$VAR sha256:…`) rather than itself."""
        from fwsapp.secret_keys import is_reference

        return self.secret and is_reference(value)

    def check(self, method: str, name: str, value, shown: str | None = None) -> None:
        """One line naming the parameter where `value` is not valid; a key's value is never in it (`shown` says what
        to call it instead, "the key" by default)."""
        if self.names_a_variable(value):
            return  # checked where the key is read (MethodInfo.key_from)
        if self.choices:
            valid = value in self.choices or (self.or_file and isinstance(value, str) and Path(value).is_file())
        elif not isinstance(value, (int, float)) or not math.isfinite(value):  # text, a list, a table
            valid = False
        else:
            valid = not (
                (self.low is not None and (value <= self.low if self.open_low else value < self.low))
                or (self.high is not None and (value >= self.high if self.open_high else value > self.high))
            )
        if not valid:
            wrong = "is out of range" if isinstance(value, (int, float)) or self.choices else "is not a number"
            what = f"{name}: {shown or 'the key'}" if self.secret else f"{name}={value!r}"
            raise ValueError(f"{method}: {what} {wrong}; it must be {self.describe()} ({self.help}).")


# Seeds are stored as 32-bit integers (DuckDB's INTEGER), so every seed is checked against this range before any work.
MAX_SEED = 2**31 - 1


def checked_seed(value, option: str = "--seed") -> int:
    """A seed as stored: a whole number from 0 to MAX_SEED; a clear error naming the option otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise ValueError(f"{option} must be a whole number from 0 to {MAX_SEED:,} (seeds are stored as 32-bit "
                         f"integers), not {value!r}.")
    return value


def checked_params(owner: str, declared: dict[str, tuple[object, Param | None]], params: dict) -> dict:
    """The declared defaults updated with `params`, each checked against its spec; a clear error naming `owner`
    otherwise (an unknown name lists the known ones)."""
    unknown = set(params) - set(declared)
    if unknown:
        raise ValueError(f"{owner} has no parameter {', '.join(sorted(unknown))}; its parameters are "
                         f"{', '.join(declared)}.")
    merged = {**{key: default for key, (default, _) in declared.items()}, **params}
    for key, value in merged.items():
        default, spec = declared[key]
        if isinstance(default, str) and not (spec and spec.choices):  # free text: a prompt, a model's name
            if not isinstance(value, str):
                raise ValueError(f"{owner}: {key}={value!r} must be text.")
        elif spec is not None or not isinstance(default, bool):
            (spec or Param(key)).check(owner, key, value)
    return merged


def typed_value(owner: str, key: str, default, spec: Param | None, value):
    """`value` in the type its `default` declares, so one setting has one identity (2 is 2.0 where a number is
    declared, "true" is True where a switch is): from the command line's text, or from TOML, JSON and forms alike. A
    secret given as `$VAR` stays as it is (read where it is used). What cannot be that type is refused, naming the
    parameter; a secret's value is never in the message."""
    if spec is not None and spec.names_a_variable(value):
        return value
    shown = f"{key} (a key, not shown)" if spec is not None and spec.secret else f"{key}={value!r}"

    def refused(wanted: str):
        return ValueError(f"{owner}: {shown} must be {wanted}.")

    if isinstance(default, bool):
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "false", "0", "no"):
            return value.strip().lower() in ("true", "1", "yes")
        if isinstance(value, (bool, int)) and value in (0, 1):
            return bool(value)
        raise refused("true or false")
    if isinstance(default, (int, float)):
        if isinstance(value, bool):
            raise refused("a number, not true or false")
        if isinstance(value, str):
            try:
                value = int(value.strip()) if value.strip().lstrip("+-").isdigit() else float(value)
            except ValueError:
                raise refused("a whole number" if isinstance(default, int) else "a number") from None
        if not isinstance(value, (int, float)):  # a list or a table: the spec says what it must be instead
            (spec or Param(key)).check(owner, key, value)
        if isinstance(default, int):
            if isinstance(value, float) and not value.is_integer():
                raise refused("a whole number")
            return int(value)
        return float(value)
    if not isinstance(value, str):
        raise refused("one of " + ", ".join(spec.choices) if spec is not None and spec.choices else "text")
    return value


class DeclaredParams:
    """What an entry whose `params` map each parameter to (default, spec or None) offers."""

    params: dict

    @property
    def defaults(self) -> dict:
        return {key: default for key, (default, _) in self.params.items()}

    def typed_params(self, params: dict) -> dict:
        """`params` each in its declared type (`typed_value`); an unknown name is left for `checked_params` to name."""
        return {key: typed_value(self.name, key, *self.params[key], value) if key in self.params else value
                for key, value in params.items()}

    @property
    def param_specs(self) -> dict[str, Param]:
        return {key: spec for key, (_, spec) in self.params.items() if spec is not None}

    def valid_values(self, key: str) -> str:
        """What parameter `key` takes, in words, for --help and the forms: its range or choices, "true or false", or
        "text" (a model's name, a prompt)."""
        default, spec = self.params[key]
        if isinstance(default, bool) and not (spec and spec.choices):
            return "true or false"
        if isinstance(default, str) and not (spec and spec.choices):
            return "text"
        return (spec or Param(key)).describe()


@dataclass(frozen=True)
class PlugIn:
    name: str
    help: str  # one line, for --help, menus and doctor
    implementation: str  # "module:attribute"
    # What it needs beyond the package: "model" (a language model loaded), "key" (an API key), "base_url" (a server).
    needs: tuple[str, ...] = ()
    # None when it can run here, else why not (a missing optional package), said by doctor and the choices.
    unavailable: Callable[[], str | None] = always_available
    # Parameters its tests use to keep to a few seconds on a CPU.
    test_params: dict = field(default_factory=dict)
    # Other spellings it is found by, case-insensitively (the paper's file names: DIP for DiPmark).
    aliases: tuple[str, ...] = ()

    def load(self):
        return load_implementation(self.implementation)


class Registry:
    """One axis's plug-ins, by name, in declaration order; the first is the default unless one is named."""

    def __init__(self, axis: str, entries: list[PlugIn], default: str | None = None):
        self.axis = axis
        self._entries = {entry.name: entry for entry in entries}
        self.default = default or entries[0].name

    def __iter__(self) -> Iterator[PlugIn]:
        return iter(list(self._entries.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return list(self._entries)

    def available(self) -> list[str]:
        """The names of the plug-ins that can run here."""
        return [entry.name for entry in self if entry.unavailable() is None]

    def __getitem__(self, name: str) -> PlugIn:
        """The entry by its name, or by any of its spellings in any case."""
        if name in self._entries:
            return self._entries[name]
        wanted = str(name).strip().lower()
        for entry in self._entries.values():
            if wanted in {spelling.lower() for spelling in (entry.name, *entry.aliases)}:
                return entry
        raise ValueError(f"Unknown {self.axis} '{name}': choose one of {', '.join(self._entries)}.")

    def canonical(self, name: str) -> str:
        """The registered spelling of a name: 'kgw' -> 'KGW'."""
        return self[name].name

    def check(self, name: str) -> PlugIn:
        """The entry, if it can run here; else a ValueError saying why and what can."""
        entry = self[name]
        reason = entry.unavailable()
        if reason:
            raise ValueError(f"The {self.axis} '{name}' cannot run here: {reason}. Choose one of "
                             f"{', '.join(self.available())}.")
        return entry

    @contextmanager
    def registered(self, entry: PlugIn):
        """`entry` registered for the length of the block (a test's toy plug-in)."""
        self._entries[entry.name] = entry
        try:
            yield entry
        finally:
            del self._entries[entry.name]
