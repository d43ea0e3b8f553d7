"""A clinician study served to a team: the items drawn from chosen runs, raters who each hold an invite link, their
own items in their own random order, attention checks, and what the researcher reads of it.

- **Items**: a share of each run's samples (or a number of them), each with the random A/B order the Rate page stores
  (`human.sample_items`' rule; an item already drawn keeps its order).
- **Assignment** (overlap control): each item goes to `raters_per_item` raters, those with the fewest items so far.
  Raters invited together share the items evenly; a rater invited later takes the items still short of raters.
- **Order**: each rater sees their items in an order drawn from their own id, so no two raters go through the study
  alike and no order effect is shared; and an item's raters see its A/B order counterbalanced (half the watermarked
  text first, half second, the item's own order breaking a tie), so no position bias is shared either.
- **Attention checks**: a share of each rater's items (10 % by default) is shown again, A and B swapped, once the
  rater has rated `ATTENTION_GAP` more items (or has none left). The second rating is kept apart; the researcher
  reads how consistent the rater was, the rater is never told.
- **Ratings** go to `human_ratings` under the rater's id (`workflow.py`, as the Rate page's), so the agreement
  statistics of `agreement.py` (Krippendorff's alpha, Pearson against the judge and the metrics) read them as they read
  ratings under typed names, which stay as legacy raters. Every write checks first that the rater's link is open.
"""
from __future__ import annotations

import hashlib
import math
import random
import secrets
from pathlib import Path
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fwsapp import counted, percent, share_text
from fwsapp.human import access
from fwsapp.results.fws import ASPECTS
from fwsapp.quality.registry import ASPECT_LABELS
from fwsapp.human.ratings import RATERS_PER_ITEM
from fwsapp.human.workflow import Queue, Rater, RatingError, Task
from fwsapp.plugins import checked_seed
from fwsapp.store import Store

DEFAULT_ITEM_SHARE = 0.10
DEFAULT_ATTENTION_SHARE = 0.10
ATTENTION_GAP = 3  # items rated between an item and its second showing
DISAGREEMENT = 2  # points apart on one aspect of one text: the item goes to adjudication
CONSISTENT_WITHIN = 1  # a second rating within this many points of the first is consistent


class StudyError(ValueError):
    """A study command that cannot be carried out; nothing was written."""


@dataclass(frozen=True)
class Study:
    study_id: str
    name: str
    runs: tuple[str, ...]
    raters_per_item: int
    attention_share: float
    entity_task: bool

    def describe(self) -> str:
        """The study's design in a sentence, as the Study page and `study status` say it."""
        checks = (f"{percent(self.attention_share)} of each rater's items (at least one) shown twice as attention checks"
                  if self.attention_share else "no attention checks")
        return (f"{counted(len(self.runs), 'run', 'runs')}, {counted(self.raters_per_item, 'rater', 'raters')} per item, "
                f"{checks}" + (", with the disease-name verdicts." if self.entity_task else "."))


@dataclass(frozen=True)
class Invite:
    rater_id: str
    name: str
    token: str  # shown once, to be sent to the rater; only its hash is stored


def _seeded(*parts) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "little"))


def study(store: Store, name_or_id: str) -> Study:
    studies = store.studies()
    found = studies[(studies.study_id == name_or_id) | (studies.name == name_or_id)]
    if found.empty:
        known = ", ".join(studies.name) or "none yet"
        raise StudyError(f"No study {name_or_id!r} (studies: {known}). Create one with `study create`.")
    row = found.iloc[0]
    return Study(row.study_id, row["name"], tuple(row.runs), int(row.raters_per_item), float(row.attention_share),
                 bool(row.entity_task))


def create(store: Store, name: str, run_ids: list[str], share: float | None = DEFAULT_ITEM_SHARE,
           items_per_run: int | None = None, raters_per_item: int = RATERS_PER_ITEM,
           attention_share: float = DEFAULT_ATTENTION_SHARE, entity_task: bool = False, seed: int = 0,
           raters: list[str] = ()) -> tuple[Study, list[Invite]]:
    """Create a study, draw its items and invite `raters` (their names, for the researcher's eyes). Every parameter
    is checked before anything is written."""
    name = " ".join((name or "").split())
    if not name:
        raise StudyError("Name the study (--name).")
    if name in set(store.studies().name):
        raise StudyError(f"A study named {name!r} exists; choose another name.")
    if not run_ids:
        raise StudyError("Name the runs the study draws its items from (--runs).")
    if items_per_run is None and not (share is not None and 0 < share <= 1):
        raise StudyError("The share of each run's samples to rate must be above 0 and at most 1.")
    if items_per_run is not None and items_per_run < 1:
        raise StudyError("A study needs at least one item per run.")
    if not 1 <= raters_per_item <= 20:
        raise StudyError("Raters per item must be from 1 to 20.")
    if not 0 <= attention_share <= 0.5:
        raise StudyError("The share of items shown twice as attention checks must be from 0 to 0.5.")
    try:
        checked_seed(seed)
    except ValueError as error:
        raise StudyError(str(error)) from None
    if raters:
        rater_names(list(raters))
    stored = store.human_item_orders()
    items = []
    for run_id in dict.fromkeys(run_ids):
        store.run(run_id)  # an unknown run is named as such, before any item is drawn
        generations = store.generations(run_id)
        pairs = generations[generations.watermarked_text.notna() & generations.unwatermarked_text.notna()]
        samples = sorted(int(index) for index in pairs.sample_idx)
        if not samples:
            raise StudyError(f"Run {run_id} has no pair of watermarked and unwatermarked texts to rate.")
        if entity_task and store.entity_analyses([run_id]).empty:
            # Its questions are the disease names the analysis found: without it the task would ask nothing.
            raise StudyError(f"Run {run_id} has no entity analysis, so the Entities task would ask nothing: run "
                             f"`python -m fwsapp analyze --run {run_id}` (or Analyze on the Entities page) first.")
        if items_per_run is not None and items_per_run > len(samples):
            # Fewer items than asked, drawn silently, would be a smaller study than its design says.
            raise StudyError(f"Run {run_id} has {counted(len(samples), 'pair', 'pairs')} of watermarked and "
                             f"unwatermarked texts to rate, not {items_per_run}: ask for at most {len(samples)} items "
                             "per run, or --share 1 for every pair of each run.")
        rng = _seeded(seed, run_id)
        count = items_per_run or max(1, math.ceil(share * len(samples)))
        for sample_idx in sorted(rng.sample(samples, count)):
            order = stored.get((run_id, sample_idx))
            items.append((run_id, sample_idx, order if order is not None else rng.random() < 0.5))
    if len(raters) > len(items) * raters_per_item:  # some would get nothing to rate (see `invite`), before any write
        raise StudyError(f"{len(raters)} raters for {counted(len(items), 'item', 'items')} rated "
                         f"{counted(raters_per_item, 'time', 'times')} each: some would "
                         "get no item. Invite fewer raters, or draw more items or raters per item.")
    study_id = "study-" + secrets.token_hex(4)
    store.add_study({"study_id": study_id, "name": name, "runs": list(dict.fromkeys(run_ids)),
                     "raters_per_item": raters_per_item, "attention_share": attention_share,
                     "entity_task": entity_task, "seed": seed}, items)
    created = study(store, study_id)
    return created, invite(store, created, list(raters)) if raters else []


def rater_names(names: list[str], taken: set[str] = frozenset()) -> list[str]:
    """The raters' names, checked: 1 to 80 characters each, none twice in the study."""
    names = [" ".join(name.split()) for name in names]
    if not names or any(not name or len(name) > 80 for name in names):
        raise StudyError("Give each rater a name of 1 to 80 characters (the researcher's label; raters never see it).")
    repeated = sorted({name for name in names if name in taken or names.count(name) > 1})
    if repeated:
        raise StudyError(f"This study already has a rater named {', '.join(repeated)}; give each rater their own name.")
    return names


def invite(store: Store, chosen: Study, names: list[str]) -> list[Invite]:
    """Invite raters (names for the researcher's eyes): each gets a token and the items still short of raters,
    shared among them, the least loaded first. Returns each rater's token, never stored."""
    taken = set(store.raters(chosen.study_id).name)
    names = rater_names(names, taken)
    items = store.study_items(chosen.study_id)
    load = dict.fromkeys(range(len(names)), 0)
    chosen_items: dict[int, list[tuple[str, int, bool]]] = {index: [] for index in load}
    rng = _seeded(chosen.study_id, len(taken))
    for row in items.sample(frac=1, random_state=rng.randrange(2**32)).itertuples():
        needed = chosen.raters_per_item - int(row.assigned)
        shown = [int(row.assigned) - int(row.assigned_watermarked_first), int(row.assigned_watermarked_first)]
        for index in sorted(load, key=lambda index: (load[index], rng.random()))[:max(0, needed)]:
            first = counterbalanced(bool(row.watermarked_first), shown)
            shown[first] += 1
            chosen_items[index].append((row.run_id, int(row.sample_idx), first))
            load[index] += 1
    idle = [names[index] for index, count in load.items() if not count]
    if idle:  # a link that opens nothing to rate, and a rater no status would show: refused, nothing written
        raise StudyError(f"{', '.join(idle)} would get no item to rate: the study {chosen.name!r} has "
                         f"{counted(len(items), 'item', 'items')}, each already with its "
                         f"{counted(chosen.raters_per_item, 'rater', 'raters')}. Revoke a rater "
                         "first (their unrated items go to the next one invited), or invite fewer raters at once.")
    invites = []
    for index, name in enumerate(names):
        rater_id = "rater-" + secrets.token_hex(6)
        token = access.new_token()
        own = chosen_items[index]
        order = _seeded(rater_id, "order")
        positions = order.sample(range(len(own)), len(own))
        checks = set(order.sample(range(len(own)), attention_checks(chosen.attention_share, len(own))))
        store.add_rater(rater_id, chosen.study_id, name, access.token_hash(token),
                        [(run_id, sample_idx, positions[i], i in checks, first)
                         for i, (run_id, sample_idx, first) in enumerate(own)])
        invites.append(Invite(rater_id, name, token))
    return invites


def counterbalanced(item_order: bool, shown: list[int]) -> bool:
    """Whether the next rater of an item sees its watermarked text first, given how many of its raters see it second
    and first (`shown`): the order fewer of them see, the item's own on a tie. A position bias shared by every rater of
    an item (A rated higher) would agree with itself and inflate Krippendorff's alpha; counterbalanced, it cancels."""
    if shown[0] == shown[1]:
        return item_order
    return shown[1] < shown[0]


def attention_checks(share: float, items: int) -> int:
    """How many of a rater's items come back as attention checks: the share, rounded, and at least one where the share
    is above 0 (10 % of a pilot's 4 items rounded to none, and no rater's attention was ever checked)."""
    return max(1, round(share * items)) if share > 0 and items else 0


def short_of_raters(store: Store, chosen: Study) -> str | None:
    """What a study lacks while fewer raters are invited (or left after a revoke) than each item asks for: its items
    would be rated fewer times than its design says, and neither the creation nor the progress table said so. None
    when every item has its raters."""
    items = store.study_items(chosen.study_id)
    short = items[items.assigned < chosen.raters_per_item]
    if short.empty:
        return None
    more = chosen.raters_per_item - int(short.assigned.min())  # a rater takes an item once, so the fewest decide
    return (f"{counted(len(short), 'item has', 'items have')} fewer than {counted(chosen.raters_per_item, 'rater', 'raters')}"
            f" (of {len(items)}): invite at least {counted(more, 'more rater', 'more raters')}; each new rater takes the "
            "items still short of raters.")


def rater_for(store: Store, token: str) -> str | None:
    """The rater id a token opens, or None (unknown or revoked): compared in constant time with every stored hash."""
    return access.matching(token, store.rater_hashes())


def revoke(store: Store, rater_id: str) -> int:
    """Close a rater's link; returns how many of their items they had not rated, which go to the raters invited
    next (their ratings stay)."""
    if not store.revoke_rater(rater_id):
        raise StudyError(f"No rater {rater_id} with a working link (already revoked, or unknown).")
    return int(store.assignments(rater_id).rated.isna().sum())


def delete(store: Store, chosen: Study) -> dict[str, int]:
    """Delete a study with its raters' links and everything they gave; returns the rows deleted per table. Its runs
    stay, and can be deleted once no study uses them."""
    return store.delete_study(chosen.study_id)


def deletion_question(store: Store, chosen: Study) -> str:
    """What deleting a study loses, asked before it is done."""
    progress = rater_progress(store, chosen)
    rated = int(progress.rated.sum()) if not progress.empty else 0
    return (f"Delete the study {chosen.name!r}? {counted(len(progress), 'rater loses their link', 'raters lose their links')}"
            f", and {counted(rated, 'rating', 'ratings')} and the raters' other answers are deleted with it (export them "
            "first: they cannot be brought back). Its runs stay.")


def rater_study(store: Store, rater_id: str) -> Study:
    raters = store.raters()
    return study(store, raters.loc[raters.rater_id == rater_id, "study_id"].iloc[0])


def _handle(rater_id: str, run_id: str, sample_idx: int, repeat: bool) -> str:
    """An item's name in the rater's page: opaque, so no element says which run or which text it is."""
    return hashlib.sha256(f"{rater_id}:{run_id}:{sample_idx}:{repeat}".encode()).hexdigest()[:12]


def _scores(value) -> tuple[float, ...] | None:
    """A stored score list, or None where the database has none (a skip, an item not yet rated)."""
    return tuple(float(score) for score in value) if isinstance(value, (list, tuple, np.ndarray)) else None


def _task(rater_id: str, row, repeat: bool = False) -> Task:
    """The item of an assignment row as the rater sees it: first or second showing (A and B swapped), with the
    rater's own rating of that showing, as they saw it, once given."""
    first = bool(row.watermarked_first) != repeat
    if repeat:
        own, done, comment = (_scores(row.repeat_watermarked), _scores(row.repeat_unwatermarked)), pd.notna(row.repeated), None
    else:
        own = _scores(row.scores_watermarked), _scores(row.scores_unwatermarked)
        done = pd.notna(row.rated) or pd.notna(row.skipped)
        comment = row.comment if isinstance(row.comment, str) else None
    scores_a, scores_b = own if first else own[::-1]
    return Task(_handle(rater_id, row.run_id, row.sample_idx, repeat), row.run_id, int(row.sample_idx), first, repeat,
                bool(done), scores_a, scores_b, comment)


class StudyRater(Rater):
    """A study's invited rater, known by their id: their own items in their own order, each attention check shown
    again (A and B swapped) once they have rated ATTENTION_GAP more items or have none left."""

    def __init__(self, rater_id: str):
        self.identity = rater_id

    def check_open(self, store: Store) -> None:
        if self.identity not in store.rater_hashes():
            raise RatingError("This link was revoked: nothing was saved. Ask the study's organiser for a new one.")

    def queue(self, store: Store) -> Queue:
        rows = store.assignments(self.identity)
        firsts = rows[rows.rated.notna() | rows.skipped.notna()]
        seconds = rows[rows.repeated.notna()]
        done = sorted([(row.rated if pd.notna(row.rated) else row.skipped, row.position, _task(self.identity, row))
                       for row in firsts.itertuples()]
                      + [(row.repeated, row.position, _task(self.identity, row, repeat=True))
                         for row in seconds.itertuples()], key=lambda entry: (entry[0], entry[1]))
        rated = rows[rows.rated.notna()].sort_values("rated")
        order = {key: index for index, key in enumerate(zip(rated.run_id, rated.sample_idx))}
        fresh = rows[rows.rated.isna() & rows.skipped.isna()]
        due = [row for row in rated.itertuples() if row.attention and pd.isna(row.repeated)
               and (len(rated) - 1 - order[(row.run_id, row.sample_idx)] >= ATTENTION_GAP or fresh.empty)]
        if due:
            upcoming = _task(self.identity, due[0], repeat=True)
        else:
            upcoming = _task(self.identity, next(fresh.itertuples())) if not fresh.empty else None
        return Queue([task for _, _, task in done], upcoming, len(rows) + int(rows.attention.sum()))


# -- what the researcher reads ----------------------------------------------------------------------------------------

def _assignments(store: Store, chosen: Study) -> pd.DataFrame:
    raters = store.raters(chosen.study_id)
    frames = [store.assignments(rater_id).assign(rater_id=rater_id, rater=name, revoked=revoked)
              for rater_id, name, revoked in zip(raters.rater_id, raters.name, raters.revoked)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _gaps(first, second) -> np.ndarray:
    return np.abs(np.asarray(list(first), dtype=float) - np.asarray(list(second), dtype=float))


def rater_progress(store: Store, chosen: Study) -> pd.DataFrame:
    """Per rater: items assigned (a revoked rater's: those they rated), rated and skipped, attention checks given, the
    median seconds per item, and the attention consistency (the share of second ratings within a point of the first,
    on every aspect of both texts, with its count: one check of one is not a rate). Written as read, the same by
    `study status` and the Study page: a rater with nothing rated yet reads so, not None or a dash."""
    rows = _assignments(store, chosen)
    columns = ["rater id", "rater", "link", "assigned", "rated", "skipped", "checks done", "median seconds per item",
               "attention consistency"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    found = []
    for (rater_id, name), own in rows.groupby(["rater_id", "rater"], sort=False):
        revoked = own.revoked.notna().any()
        if revoked:  # they keep what they rated; the rest go to the raters invited next (`Store.study_items`)
            own = own[own.rated.notna()]
        repeats = own[own.repeat_watermarked.notna() & own.scores_watermarked.notna()]  # a skipped showing has none
        gaps = [np.concatenate([_gaps(row.scores_watermarked, row.repeat_watermarked),
                                _gaps(row.scores_unwatermarked, row.repeat_unwatermarked)])
                for row in repeats.itertuples()]
        seconds = pd.concat([own.seconds, own.repeat_seconds]).dropna()
        found.append({"rater id": rater_id, "rater": name, "link": "revoked" if revoked else "open",
                      "assigned": len(own), "rated": int(own.rated.notna().sum()),
                      "skipped": int(own.skipped.notna().sum()), "checks done": f"{len(repeats)} of {int(own.attention.sum())}",
                      "median seconds per item": f"{seconds.median():.1f}" if len(seconds) else "none rated yet",
                      "attention consistency": _consistency([(gap <= CONSISTENT_WITHIN).all() for gap in gaps])})
    return pd.DataFrame(found, columns=columns)


def _consistency(consistent: list[bool]) -> str:
    if not consistent:
        return "no check done yet"
    return f"{share_text(np.mean(consistent))} ({sum(consistent)} of {len(consistent)})"


def item_progress(store: Store, chosen: Study) -> pd.DataFrame:
    """Per item (run and sample): raters assigned and ratings given."""
    items = store.study_items(chosen.study_id)
    rows = _assignments(store, chosen)
    if rows.empty:
        counted_items = items.assign(rated=0)
    else:
        rated = rows[rows.rated.notna()].groupby(["run_id", "sample_idx"]).size().rename("rated")
        counted_items = items.join(rated, on=["run_id", "sample_idx"]).fillna({"rated": 0}).astype({"rated": int})
    return counted_items[["run_id", "sample_idx", "assigned", "rated"]].rename(columns={"run_id": "run",
                                                                                      "sample_idx": "sample"})


def ratings(store: Store, chosen: Study) -> pd.DataFrame:
    """The study's ratings, one row per rater × item × text kind (`human.ratings`' columns, the rater as their id)
    with the seconds spent: what is exported. No token, no rater name."""
    from fwsapp.human.ratings import ratings as all_ratings

    items = store.study_items(chosen.study_id)[["run_id", "sample_idx"]]
    raters = set(store.raters(chosen.study_id).rater_id)
    rated = all_ratings(store).merge(items, on=["run_id", "sample_idx"])
    return rated[rated.rater.isin(raters)].reset_index(drop=True)


def legacy_raters(store: Store) -> pd.DataFrame:
    """Raters known by a name typed on the Rate page, before invite links: each with how many ratings they gave."""
    return store.frame("""SELECT rater, count(*) AS ratings FROM human_ratings
                          WHERE rater NOT IN (SELECT rater_id FROM raters) GROUP BY rater ORDER BY rater""")


def disagreements(rated: pd.DataFrame) -> pd.DataFrame:
    """The texts whose raters are DISAGREEMENT points apart or more on some aspect: run, sample, kind, aspect, the
    lowest and highest ratings and who gave them (rater ids)."""
    found = []
    for (run_id, sample_idx, kind), group in rated.groupby(["run_id", "sample_idx", "kind"]):
        for aspect in ASPECTS:
            values = group[[aspect, "rater"]].dropna()
            if len(values) >= 2 and values[aspect].max() - values[aspect].min() >= DISAGREEMENT:
                low, high = values.loc[values[aspect].idxmin()], values.loc[values[aspect].idxmax()]
                found.append({"run": run_id, "sample": int(sample_idx), "text": kind, "aspect": ASPECT_LABELS[aspect],
                              "lowest": int(low[aspect]), "lowest by": low.rater, "highest": int(high[aspect]),
                              "highest by": high.rater, "raters": len(values)})
    return pd.DataFrame(found, columns=["run", "sample", "text", "aspect", "lowest", "lowest by", "highest",
                                        "highest by", "raters"])


def entity_verdicts(store: Store, chosen: Study) -> pd.DataFrame:
    """The study's raters' verdicts on the disease names the answers introduced (its Entities task), by rater id."""
    from fwsapp.entities.introduced import name_verdicts

    verdicts = name_verdicts(store)
    items = store.study_items(chosen.study_id)[["run_id", "sample_idx"]]
    raters = set(store.raters(chosen.study_id).rater_id)
    return verdicts.merge(items, on=["run_id", "sample_idx"])[lambda frame: frame.rater.isin(raters)].reset_index(
        drop=True)


def ratings_file(rated: pd.DataFrame, kind: str) -> bytes:
    """A table of the study as the bytes of a CSV file (every cell a spreadsheet would run as a formula made text) or
    a Parquet file."""
    from fwsapp.results.export import table_bytes

    return table_bytes(rated, kind)


def entities_path(path) -> Path:
    """Where the study's entity verdicts go beside its ratings: ratings.csv -> ratings.entities.csv."""
    path = Path(path)
    return path.with_name(f"{path.stem}.entities{path.suffix}")


def export(store: Store, chosen: Study, path, file_format: str | None = None, force: bool = False) -> int:
    """Write the study's ratings (`ratings`) to CSV or Parquet (by `file_format`, else the file's suffix), and with an
    Entities task its raters' verdicts beside them (`entities_path`); returns the ratings' rows. An existing file is
    replaced only with `force`, and only a regular file."""
    from fwsapp.paths import replaceable_output, write_output
    from fwsapp.results.export import export_format

    path = Path(path)
    try:
        kind = export_format(path, file_format)
    except ValueError as error:
        raise StudyError(str(error)) from None
    data = ratings_file(rated := ratings(store, chosen), kind)
    verdicts = entity_verdicts(store, chosen) if chosen.entity_task else None
    for target in (path, *([entities_path(path)] if verdicts is not None else [])):
        replaceable_output(target, force)  # both checked before either is written
    write_output(path, data, force)
    if verdicts is not None:
        write_output(entities_path(path), ratings_file(verdicts, kind), force)
    return len(rated)
