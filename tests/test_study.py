"""A clinician study on a shared server (issue 36): invite tokens stored only hashed and compared in constant time,
raters who see only their own items in their own order, attention checks with A and B swapped, what the researcher
reads, and an app that refuses to serve a network without an admin token."""
import html
import re
import threading
from pathlib import Path

import pandas as pd
import pytest

from fwsapp.human import access, study
from fwsapp.human.ratings import ratings
from fwsapp.human.workflow import RatingError
from fwsapp.store import Store
from tests.conftest import database_at_schema, hostile_entity_db, imported_qa_db, shown

SCORES = ([4, 4, 4], [3, 3, 3])


@pytest.fixture
def study_db(tmp_path):
    """A database with an imported run of 12 samples and a study of 6 of them, 2 raters per item, 3 raters invited."""
    path = tmp_path / "study.duckdb"
    run_id = imported_qa_db(path, 12)
    store = Store(path)
    created, invites = study.create(store, "pilot", [run_id], items_per_run=6, raters_per_item=2,
                                    attention_share=0.34, raters=["Dr A", "Dr B", "Dr C"])
    yield store, created, invites
    store.close()


def rate_all(store, rater_id, scores=SCORES, seconds=2.0):
    """Every item of the rater rated, each in `seconds`: `scores` are the watermarked text's and the unwatermarked
    one's, whichever the rater sees first."""
    while True:
        task = study.StudyRater(rater_id).queue(store).upcoming
        if task is None:
            return
        study.StudyRater(rater_id).submit(store, task, *(scores if task.watermarked_first else scores[::-1]),
                                            seconds=seconds)


def test_the_token_is_stored_only_as_its_hash_and_opens_its_rater_alone(study_db):
    store, _, invites = study_db
    assert all(len(invite.token) >= 43 for invite in invites)  # 256 bits, url-safe base64
    dump = store.frame("SELECT * FROM raters").to_string() + store.frame("SELECT * FROM study_assignments").to_string()
    for invite in invites:
        assert invite.token not in dump and access.token_hash(invite.token) in dump
        assert study.rater_for(store, invite.token) == invite.rater_id
    assert study.rater_for(store, "not-a-token") is None and study.rater_for(store, "") is None


def test_a_wrong_token_is_compared_in_constant_time_with_every_stored_hash(study_db, monkeypatch):
    store, _, invites = study_db
    compared = []
    real = access.hmac.compare_digest
    monkeypatch.setattr(access.hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    assert study.rater_for(store, invites[0].token[:-1] + "x") is None
    assert len(compared) == len(invites)  # no early exit, no `==`
    compared.clear()
    assert study.rater_for(store, invites[0].token) == invites[0].rater_id and len(compared) == len(invites)
    assert access.is_admin_token("secret", "secret") and not access.is_admin_token("secreT", "secret")


def test_a_revoked_link_opens_nothing_at_once(study_db):
    store, _, invites = study_db
    study.revoke(store, invites[1].rater_id)
    assert study.rater_for(store, invites[1].token) is None
    assert study.rater_for(store, invites[0].token) == invites[0].rater_id
    with pytest.raises(study.StudyError, match="already revoked"):
        study.revoke(store, invites[1].rater_id)


def test_a_revoked_raters_unrated_items_go_to_the_rater_invited_next(study_db):
    store, created, invites = study_db
    rater = study.StudyRater(invites[1].rater_id)
    first = rater.queue(store).upcoming
    rater.submit(store, first, *SCORES, seconds=2.0)
    own = store.assignments(invites[1].rater_id)
    assert study.revoke(store, invites[1].rater_id) == len(own) - 1
    assert study.short_of_raters(store, created) == (f"{len(own) - 1} items have fewer than 2 raters (of 6): invite at "
                                                     "least 1 more rater; each new rater takes the items still short of "
                                                     "raters.")
    [newcomer] = study.invite(store, created, ["Dr D"])
    taken = set(zip(store.assignments(newcomer.rater_id).run_id, store.assignments(newcomer.rater_id).sample_idx))
    unrated = set(zip(own.run_id, own.sample_idx)) - {(first.run_id, first.sample_idx)}
    assert taken == unrated  # the rated item keeps its rating and is not given twice
    assert (store.study_items(created.study_id).assigned == 2).all()
    assert study.short_of_raters(store, created) is None
    # The revoked rater holds the item they rated, no more: the progress table read every item first given them.
    progress = study.rater_progress(store, created).set_index("rater id")
    assert progress.loc[invites[1].rater_id, ["link", "assigned", "rated"]].tolist() == ["revoked", 1, 1]
    assert progress.assigned.sum() == (store.study_items(created.study_id).assigned).sum()


def test_a_study_with_fewer_raters_than_each_item_asks_for_says_so_where_it_is_made_and_followed(tmp_path, capsys):
    """Three raters per item and two invited: every item would be rated twice, not three times, and neither `study
    create` nor `study status` said so."""
    from fwsapp.cli import main

    db = tmp_path / "short.duckdb"
    run_id = imported_qa_db(db, 8)
    assert main(["study", "create", "--name", "pilot", "--runs", run_id, "--items-per-run", "4", "--raters-per-item",
                 "3", "--rater", "Ann", "--rater", "Bob", "--db", str(db)]) == 0
    made = capsys.readouterr()
    short = ("4 items have fewer than 3 raters (of 4): invite at least 1 more rater; each new rater takes the items "
             "still short of raters.")
    assert short in made.err and short not in made.out and len(made.out.splitlines()) == 3  # the id, then two links
    assert main(["study", "status", "--study", "pilot", "--db", str(db)]) == 0
    assert short in capsys.readouterr().out
    assert main(["study", "invite", "--study", "pilot", "--rater", "Cy", "--db", str(db)]) == 0
    assert "fewer than" not in capsys.readouterr().err
    assert main(["study", "status", "--study", "pilot", "--db", str(db)]) == 0
    assert "fewer than" not in capsys.readouterr().out


def test_a_revoked_rater_writes_nothing_more_from_any_click(study_db):
    store, _, invites = study_db
    rater = study.StudyRater(invites[1].rater_id)
    task = rater.queue(store).upcoming
    study.revoke(store, invites[1].rater_id)
    for write in (lambda: rater.submit(store, task, *SCORES), lambda: rater.skip(store, task)):
        with pytest.raises(RatingError, match="This link was revoked: nothing was saved"):
            write()
    assert store.row("SELECT (SELECT count(*) FROM human_ratings) + (SELECT count(*) FROM human_skips)")[0] == 0


def test_an_attention_checks_second_showing_can_be_revisited_revised_and_skipped(study_db):
    store, _, invites = study_db
    rater = study.StudyRater(invites[0].rater_id)
    while (task := rater.queue(store).upcoming) is not None and not task.repeat:
        rater.submit(store, task, *SCORES)
    assert task is not None and task.repeat
    rater.skip(store, task)  # skipped like any item: Skip is there on every new item, so nothing gives a check away
    queue = rater.queue(store)
    second = next(done for done in queue.done if done.repeat)
    assert second.skipped and second.handle == task.handle
    rater.submit(store, second, [4, 4, 4], [3, 3, 3], revise=True)  # gone back to it and rated
    again = next(done for done in rater.queue(store).done if done.repeat)
    assert again.scores_a == (4, 4, 4) and again.scores_b == (3, 3, 3)
    stored = store.frame("SELECT * FROM attention_ratings")
    assert len(stored) == 1 and stored.revised.notna().all()


@pytest.mark.parametrize("address, token, refused", [
    ("localhost", None, False), ("127.0.0.1", None, False), ("::1", None, False), ("[::1]", None, False),
    ("0.0.0.0", None, True), ("", None, True), (None, None, True), ("192.168.1.20", None, True),
    ("example.org", None, True), ("0.0.0.0", "Jq7vR2xLk9TzW4mNp8sDf3hGc6bYa1eU", False), ("0.0.0.0", "a", True),
    ("localhost", "a", False),
])
def test_served_beyond_loopback_without_an_admin_token_the_app_refuses(address, token, refused):
    problem = access.serving_problem(address, token)
    assert (problem is not None) == refused
    if refused and token:
        assert f"an admin token of {len(token)} characters, which can be guessed" in problem
    elif refused:
        assert access.ADMIN_TOKEN_VARIABLE in problem and "localhost" in problem


def test_each_failed_sign_in_waits_longer_and_the_window_caps_failures_across_every_session():
    now, waits = [0.0], []
    throttle = access.Throttle(clock=lambda: now[0], sleep=waits.append)
    assert [throttle.sign_in(lambda: False) for _ in range(5)] == [(False, None)] * 5
    assert waits == [0.5, 1, 2, 4, 8]
    checked = []
    passed, locked_for = throttle.sign_in(lambda: checked.append(1) or True)  # even the right token is not checked
    assert (passed, locked_for, checked) == (False, 60.0, [])
    now[0] = 61.0  # the window has room again: the right token passes, and the doubling starts again
    assert throttle.sign_in(lambda: True) == (True, None)
    throttle.sign_in(lambda: False)
    assert waits[-1] == 0.5


def test_parallel_sessions_guessing_at_once_get_no_more_than_the_window_allows():
    """Issue 58, item 28: 8 sessions of 2 guesses each, at once; one check at a time, server-wide."""
    import threading
    import time

    throttle, checked = access.Throttle(sleep=lambda seconds: time.sleep(0.01)), []
    lock = threading.Lock()

    def guess():
        with lock:
            checked.append(1)
        return False

    sessions = [threading.Thread(target=lambda: [throttle.sign_in(guess) for _ in range(2)]) for _ in range(8)]
    for session in sessions:
        session.start()
    for session in sessions:
        session.join()
    assert len(checked) == access.MAX_FAILURES_PER_WINDOW


@pytest.mark.parametrize("token, looks_random", [
    ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", False), ("abababababababababababababababab", False),
    ("correcthorsebatterystapleagainxx", False), ("a-long-random-string-of-32-chars", False),
    ("kT3vQx9LmZp2RwYb7NcFh4JdG8sWq5Ze", True),
])
def test_an_admin_token_off_loopback_must_look_random_not_just_be_long(token, looks_random):
    assert len(token) >= access.MIN_ADMIN_TOKEN_CHARACTERS
    problem = access.serving_problem("0.0.0.0", token)
    assert (problem is None) == looks_random, (access.token_bits(token), problem)
    if problem:
        assert "does not look random" in problem
    assert min(access.token_bits(access.new_token()) for _ in range(100)) > access.MIN_ADMIN_TOKEN_BITS + 40


def test_each_item_goes_to_its_raters_per_item_and_raters_share_them_evenly(study_db):
    store, created, invites = study_db
    items = store.study_items(created.study_id)
    assert len(items) == 6 and (items.assigned == 2).all()
    loads = [len(store.assignments(invite.rater_id)) for invite in invites]
    assert sum(loads) == 12 and max(loads) - min(loads) <= 1
    orders = [list(zip(*[store.assignments(invite.rater_id)[column] for column in ("run_id", "sample_idx")]))
              for invite in invites]
    assert all(len(set(order)) == len(order) for order in orders)
    raters = len(store.raters(created.study_id))
    # Every item has its raters: a late rater would get none, so no link is made (issue 58, item 29).
    with pytest.raises(study.StudyError, match="Dr D would get no item to rate"):
        study.invite(store, created, ["Dr D"])
    assert len(store.raters(created.study_id)) == raters
    with pytest.raises(study.StudyError, match="already has a rater named Dr A"):
        study.invite(store, created, ["Dr A"])


def test_a_rater_sees_only_their_items_and_an_attention_check_comes_back_later_with_a_and_b_swapped(study_db):
    store, _, invites = study_db
    rater = invites[0].rater_id
    own = store.assignments(rater)
    checks = own[own.attention]
    assert len(checks) == 1
    seen = []
    while True:
        queue = study.StudyRater(rater).queue(store)
        if queue.upcoming is None:
            break
        task = queue.upcoming
        assert (task.run_id, task.sample_idx) in set(zip(own.run_id, own.sample_idx))
        assert queue.at(0)[1] == len(seen) + 1  # numbered in the order shown
        seen.append(task)
        study.StudyRater(rater).submit(store, task, [5, 4, 3], [2, 2, 1], seconds=3.0)
    assert len(queue.done) == queue.total == len(own) + 1
    # Every item keeps its number going back, the attention check's second showing included.
    assert [queue.at(back)[0].handle for back in range(len(seen), 0, -1)] == [task.handle for task in seen]
    first = next(task for task in seen if not task.repeat and task.sample_idx == checks.sample_idx.iloc[0])
    second = next(task for task in seen if task.repeat)
    assert second.sample_idx == first.sample_idx and second.watermarked_first != first.watermarked_first
    assert seen.index(second) - seen.index(first) > study.ATTENTION_GAP or seen[-1] is second
    assert second.handle != first.handle and first.run_id not in first.handle
    progress = study.rater_progress(store, study.rater_study(store, rater)).set_index("rater id").loc[rater]
    # the same scores given to the swapped answers: A's 5, 4, 3 now land on the other text
    assert progress["attention consistency"] == "0.0% (0 of 1)" and progress["checks done"] == "1 of 1"
    assert progress["median seconds per item"] == "3.0"


def test_going_back_shows_the_raters_own_rating_and_revising_replaces_it(study_db):
    store, _, invites = study_db
    rater = invites[0].rater_id
    mine = study.StudyRater(rater)
    task = mine.queue(store).upcoming
    mine.submit(store, task, [5, 5, 5], [1, 1, 1], "first")
    queue = mine.queue(store)
    done, upcoming = queue.done, queue.upcoming
    assert done[-1].scores_a == (5, 5, 5) and done[-1].comment == "first" and upcoming.handle != task.handle
    with pytest.raises(RatingError, match="already rated"):
        mine.submit(store, done[-1], [4, 4, 4], [1, 1, 1])
    mine.submit(store, done[-1], [4, 4, 4], [2, 2, 2], "revised", revise=True)
    again = mine.queue(store).done
    assert again[-1].scores_a == (4, 4, 4) and again[-1].comment == "revised" and len(again) == 1
    other = invites[1].rater_id
    assert all(task.scores_a is None for task in study.StudyRater(other).queue(store).done)  # never another's ratings


def test_two_raters_saving_at_once_both_keep_their_ratings(study_db):
    store, created, invites = study_db
    shared = store.frame("""SELECT run_id, sample_idx FROM study_assignments WHERE rater_id IN (?, ?)
                            GROUP BY ALL HAVING count(*) = 2""", [invites[0].rater_id, invites[1].rater_id])
    tasks = {}
    for invite in invites[:2]:
        rows = store.assignments(invite.rater_id)
        for row in rows.itertuples():
            if (row.run_id, row.sample_idx) in set(zip(shared.run_id, shared.sample_idx)):
                tasks[invite.rater_id] = study._task(invite.rater_id, row)
    assert len(tasks) == 2
    start = threading.Barrier(2)

    def save(rater_id):
        start.wait()
        study.StudyRater(rater_id).submit(store, tasks[rater_id], *SCORES)

    threads = [threading.Thread(target=save, args=(rater_id,)) for rater_id in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rated = study.ratings(store, created)
    assert set(rated.rater) == set(tasks) and len(rated) == 4  # two raters × two texts


def test_the_researcher_reads_progress_disagreements_and_exports_without_tokens(study_db, tmp_path):
    store, created, invites = study_db
    rate_all(store, invites[0].rater_id, ([5, 5, 5], [1, 1, 1]))
    rate_all(store, invites[1].rater_id, ([2, 2, 2], [1, 1, 1]))
    progress = study.rater_progress(store, created).set_index("rater")
    assert progress.loc["Dr A", "rated"] == len(store.assignments(invites[0].rater_id))
    assert progress.loc["Dr C", "rated"] == 0 and progress.loc["Dr A", "link"] == "open"
    # Written as read on the page and by `study status` alike (the page's cells read "None" and 12.4386 seconds)
    assert progress.loc["Dr C", "median seconds per item"] == "none rated yet"
    assert progress.loc["Dr C", "attention consistency"] == "no check done yet"
    items = study.item_progress(store, created)
    assert items.rated.sum() == progress.rated.sum()
    rated = study.ratings(store, created)
    disagreements = study.disagreements(rated)
    both = rated.groupby(["run_id", "sample_idx"]).rater.nunique()
    assert len(disagreements) == 3 * int((both == 2).sum())  # three aspects of the watermarked text apart by 3
    assert ((disagreements.highest == 5) & (disagreements.lowest == 2)).all()
    # Headed as read: who gave each, the aspect as named everywhere (it read "by", "by " and factual_accuracy)
    assert list(disagreements.columns) == ["run", "sample", "text", "aspect", "lowest", "lowest by", "highest",
                                           "highest by", "raters"]
    assert set(disagreements.aspect) == {"Coherence", "Relevance", "Factual accuracy"}
    assert list(items.columns) == ["run", "sample", "assigned", "rated"]
    for suffix in ("csv", "parquet"):
        written = study.export(store, created, tmp_path / f"study.{suffix}")
        exported = pd.read_csv(tmp_path / "study.csv") if suffix == "csv" else pd.read_parquet(tmp_path / "study.parquet")
        assert written == len(exported) == len(rated)
        text = exported.to_csv()
        assert all(invite.token not in text and invite.name not in text for invite in invites)
        assert set(exported.rater) <= {invite.rater_id for invite in invites}
    with pytest.raises(study.StudyError, match="csv or .parquet"):
        study.export(store, created, tmp_path / "study.xlsx")


def test_the_export_carries_position_time_and_revision_neutralises_formulas_and_replaces_nothing_unasked(
        study_db, tmp_path):
    import os

    store, created, invites = study_db
    rater = study.StudyRater(invites[0].rater_id)
    task = rater.queue(store).upcoming
    rater.submit(store, task, [5, 4, 3], [2, 2, 1], '=HYPERLINK("http://evil.example","x")', seconds=7.5)
    rater.submit(store, rater.queue(store).done[-1], [5, 5, 3], [2, 2, 1], "@SUM(1)", seconds=9.0, revise=True)
    target = tmp_path / "ratings.csv"
    assert study.export(store, created, target) == 2
    exported = pd.read_csv(target)
    assert exported.comment.tolist() == ["'@SUM(1)", "'@SUM(1)"]  # text in a spreadsheet, never a formula
    watermarked = exported[exported.kind == "watermarked"].iloc[0]
    assert watermarked.shown_as == ("A" if task.watermarked_first else "B") and watermarked.coherence == (
        5 if task.watermarked_first else 2)
    assert (exported.seconds == 9.0).all() and exported.revised.notna().all() and exported.created.notna().all()
    with pytest.raises(ValueError, match="exists: pass --force"):
        study.export(store, created, target)
    assert study.export(store, created, target, force=True) == 2
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):  # refused at once, never blocking on the pipe
        study.export(store, created, fifo, force=True)


def test_the_entities_tasks_verdicts_are_exported_beside_the_ratings(tmp_path):
    path = tmp_path / "entities.duckdb"
    run_id = hostile_entity_db(path)
    store = Store(path)
    created, invites = study.create(store, "names", [run_id], share=1.0, raters_per_item=1, entity_task=True,
                                    raters=["Dr A"])
    from fwsapp.entities.introduced import analysed_entities, names_to_judge, record_verdict

    entities, _ = analysed_entities(store)
    sample = int(entities.sample_idx.iloc[0])
    name = names_to_judge(entities[entities.sample_idx == sample], "watermarked")[0]
    record_verdict(store, invites[0].rater_id, run_id, sample, name, "hallucinated")
    study.export(store, created, tmp_path / "names.csv")
    verdicts = pd.read_csv(tmp_path / "names.entities.csv")
    assert verdicts.rater.tolist() == [invites[0].rater_id] and verdicts.verdict.tolist() == ["hallucinated"]
    store.close()


def test_a_bad_study_is_one_line_and_nothing_is_written(tmp_path):
    path = tmp_path / "bad.duckdb"
    run_id = imported_qa_db(path, 3)
    store = Store(path)
    revision = store.revision()
    for arguments, message in (({"name": ""}, "Name the study"), ({"run_ids": []}, "Name the runs"),
                               ({"share": 0}, "share"), ({"raters_per_item": 0}, "Raters per item"),
                               ({"attention_share": 0.9}, "attention"), ({"raters": ["Dr A", ""]}, "name of 1 to 80"),
                               ({"raters": ["Dr A", "Dr A"]}, "already has a rater named Dr A"),
                               ({"items_per_run": 4, "share": None}, "has 3 pairs of watermarked and unwatermarked "
                                "texts to rate, not 4: ask for at most 3 items per run, or --share 1")):
        with pytest.raises(study.StudyError, match=message):
            study.create(store, **{"name": "s", "run_ids": [run_id], **arguments})
    with pytest.raises(Exception, match="nope"):
        study.create(store, "s", [run_id, "nope"])
    assert store.revision() == revision and store.studies().empty
    store.close()


def test_an_items_raters_see_its_texts_in_counterbalanced_order_and_the_export_says_which(study_db):
    """Every rater of an item saw it in the item's one A/B order, so a position bias the raters share (A rated higher)
    agreed with itself and raised Krippendorff's alpha. Now half of an item's raters see the watermarked text first;
    each rater's page and the export follow the rater's own order."""
    store, created, invites = study_db
    items = store.study_items(created.study_id).set_index(["run_id", "sample_idx"])
    orders = {}
    for invite in invites:
        for row in store.assignments(invite.rater_id).itertuples():
            orders.setdefault((row.run_id, row.sample_idx), []).append(bool(row.watermarked_first))
    assert len(orders) == 6 and all(sorted(shown) == [False, True] for shown in orders.values())
    assert (items.assigned == 2).all() and (items.assigned_watermarked_first == 1).all()
    for invite in invites:
        rate_all(store, invite.rater_id, ([5, 5, 5], [1, 1, 1]))
    seen = {(invite.rater_id, row.run_id, row.sample_idx): bool(row.watermarked_first)
            for invite in invites for row in store.assignments(invite.rater_id).itertuples()}
    rated = ratings(store)
    assert (rated[rated.kind == "watermarked"].coherence == 5).all()  # each text's scores as the rater gave them
    assert all(row.shown_as == ("A" if seen[(row.rater, row.run_id, row.sample_idx)] == (row.kind == "watermarked")
                                else "B") for row in rated.itertuples())
    assert set(rated[rated.kind == "watermarked"].shown_as) == {"A", "B"}


def old_database_with_an_item(path, version: int, watermarked_first: bool):
    """A database at an old schema version holding run 'r' and its sample 0 up for rating; the open connection."""
    connection = database_at_schema(path, version)
    connection.execute("INSERT INTO runs (run_id, config_hash, config, task, method, params, n, status, created) "
                       "VALUES ('r', 'h', '{}', 'qa', 'KGW', '{}', 1, 'done', now())")
    connection.execute("INSERT INTO human_items VALUES ('r', 0, ?, now())", [watermarked_first])
    return connection


def test_a_study_rater_assigned_before_the_counterbalancing_sees_the_items_order(tmp_path):
    path = tmp_path / "old.duckdb"
    connection = old_database_with_an_item(path, 20, watermarked_first=False)
    connection.execute("INSERT INTO studies VALUES ('s', 'old', ['r'], 2, 0, false, 0, now())")
    connection.execute("INSERT INTO study_items VALUES ('s', 'r', 0)")
    connection.execute("INSERT INTO raters VALUES ('rater-1', 's', 'Dr Old', 'hash', now(), NULL)")
    connection.execute("INSERT INTO study_assignments VALUES ('rater-1', 'r', 0, 0, false)")
    connection.close()
    store = Store(path)
    assert store.assignments("rater-1").watermarked_first.tolist() == [False]
    [item] = store.study_items("s").itertuples()
    assert (item.assigned, item.assigned_watermarked_first) == (1, 0)
    assert study.counterbalanced(False, [1, 0]) is True  # the next rater sees the watermarked text first
    store.close()


def test_legacy_ratings_under_typed_names_survive_the_migration_and_are_counted(tmp_path):
    path = tmp_path / "old.duckdb"
    connection = old_database_with_an_item(path, 10, watermarked_first=True)
    connection.execute("INSERT INTO human_ratings VALUES ('Dr Legacy', 'r', 0, [4, 4, 4], [5, 5, 5], 'ok', now())")
    connection.close()
    store = Store(path)
    rated = ratings(store)
    assert rated.rater.tolist() == ["Dr Legacy", "Dr Legacy"] and rated.coherence.tolist() == [4, 5]
    assert study.legacy_raters(store).to_dict("records") == [{"rater": "Dr Legacy", "ratings": 1}]
    store.close()


def test_the_cli_creates_a_study_prints_each_link_once_and_exports(tmp_path, capsys):
    from fwsapp.cli import main

    db = tmp_path / "cli.duckdb"
    run_id = imported_qa_db(db, 8)
    assert main(["study", "create", "--name", "pilot", "--runs", run_id, "--items-per-run", "4", "--raters-per-item",
                 "2", "--rater", "Dr A", "--rater", "Dr B", "--url", "https://study.example", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": 4 items")
    links = [line.split("\t") for line in out[1:]]
    assert [name for _, name, _ in links] == ["Dr A", "Dr B"]
    assert all(link.startswith("https://study.example/?invite=") for _, _, link in links)
    store = Store(db)
    token = links[0][2].split("=", 1)[1]
    assert study.rater_for(store, token) == links[0][0]
    rate_all(store, links[0][0], seconds=9.193096)  # as a browser times an item
    store.close()
    assert main(["study", "status", "--study", "pilot", "--db", str(db)]) == 0
    status = capsys.readouterr().out
    assert re.search(r"Dr A .* 9\.2 +100\.0% \(1 of 1\)$", status, re.MULTILINE), status  # not 9.193096 seconds, nor 1.000000
    assert status.startswith("pilot: 1 run, 2 raters per item, 10% of each rater's items (at least one) shown twice") and "Dr A" in status
    # Dr B has rated nothing: no median time and no consistency yet, written "–" as every table's gap (it read "None").
    assert "None" not in status and re.search(r"Dr B .* none rated yet +no check done yet$", status, re.MULTILINE), status
    assert main(["study", "export", "--study", "pilot", "--out", str(tmp_path / "r.csv"), "--db", str(db)]) == 0
    assert token not in (tmp_path / "r.csv").read_text() and links[0][0] in (tmp_path / "r.csv").read_text()
    assert main(["study", "revoke", "--rater", links[0][0], "--db", str(db)]) == 0
    assert main(["study", "revoke", "--rater", links[0][0], "--db", str(db)]) == 2
    assert main(["study", "status", "--study", "nope", "--db", str(db)]) == 2
    assert "No study 'nope'" in capsys.readouterr().err


def test_a_study_is_deleted_with_its_links_and_answers_after_asking_and_then_its_runs_can_go(tmp_path, capsys,
                                                                                            monkeypatch):
    """A run a study uses could not be deleted "while the study does", and nothing deleted a study: a trial study kept
    its runs, its name and its links for ever."""
    from fwsapp.cli import main

    db = tmp_path / "delete.duckdb"
    run_id = imported_qa_db(db, 8)
    store = Store(db)
    _, (invite,) = study.create(store, "pilot", [run_id], items_per_run=4, raters_per_item=1, attention_share=0.25,
                                raters=["Dr A"])
    rate_all(store, invite.rater_id)
    store.close()
    assert main(["runs", "--delete", run_id, "--yes", "--db", str(db)]) == 2
    assert "`python -m fwsapp study delete --study NAME`" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["study", "delete", "--study", "pilot", "--db", str(db)]) == 2  # nobody to ask
    assert "no terminal to confirm on; add --yes" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "pilot?")
    assert main(["study", "delete", "--study", "pilot", "--db", str(db)]) == 1
    assert "Not deleted." in capsys.readouterr().out
    assert asked == ["Delete the study 'pilot'? 1 rater loses their link, and 4 ratings and the raters' other answers "
                     "are deleted with it (export them first: they cannot be brought back). Its runs stay. Type pilot to "
                     "confirm: "]
    assert main(["study", "delete", "--study", "pilot", "--yes", "--db", str(db)]) == 0
    assert capsys.readouterr().out.startswith("Deleted the study 'pilot': human_ratings 4, attention_ratings 1, ")
    store = Store(db)
    assert study.rater_for(store, invite.token) is None and store.studies().empty
    left = store.row("SELECT (SELECT count(*) FROM human_ratings) + (SELECT count(*) FROM attention_ratings) + "
                     "(SELECT count(*) FROM raters) + (SELECT count(*) FROM study_assignments) + "
                     "(SELECT count(*) FROM study_items)")[0]
    assert left == 0 and store.runs().run_id.tolist() == [run_id]
    study.create(store, "pilot", [run_id], items_per_run=1, raters_per_item=1)  # the name is free again
    store.close()
    assert main(["study", "delete", "--study", "pilot", "--yes", "--db", str(db)]) == 0
    assert main(["study", "delete", "--study", "pilot", "--yes", "--db", str(db)]) == 2  # gone: one clear line
    assert "No study 'pilot'" in capsys.readouterr().err
    assert main(["runs", "--delete", run_id, "--yes", "--db", str(db)]) == 0


def test_the_status_of_a_study_with_no_rater_says_how_to_invite_one(tmp_path, capsys):
    from fwsapp.cli import main

    db = tmp_path / "cli.duckdb"
    run_id = imported_qa_db(db, 8)
    assert main(["study", "create", "--name", "QA pilot", "--runs", run_id, "--items-per-run", "4", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["study", "status", "--study", "QA pilot", "--db", str(db)]) == 0
    status = capsys.readouterr().out
    assert "No rater yet: `python -m fwsapp study invite --study 'QA pilot' --rater NAME`" in status
    assert "Empty DataFrame" not in status  # pandas' repr of the empty table, as it was printed


@pytest.mark.parametrize("url", ["javascript:alert(1)", "not a url", "localhost:8501", "https://study.example/?a=1",
                                 "http://:8501", "http://host:99999"])
def test_an_address_raters_cannot_open_is_refused_before_a_study_or_an_invite_is_made(tmp_path, capsys, url):
    """The links are shown once: one made on a wrong address would be lost with its study's invites."""
    from fwsapp.cli import main

    db = tmp_path / "cli.duckdb"
    run_id = imported_qa_db(db, 8)
    assert main(["study", "create", "--name", "pilot", "--runs", run_id, "--items-per-run", "4", "--rater", "Dr A",
                 "--url", url, "--db", str(db)]) == 2
    assert f"--url: The app's address {url!r}" in capsys.readouterr().err
    assert main(["study", "create", "--name", "pilot", "--runs", run_id, "--items-per-run", "4", "--db", str(db)]) == 0
    assert main(["study", "invite", "--study", "pilot", "--rater", "Dr B", "--url", url, "--db", str(db)]) == 2
    store = Store(db)
    assert store.studies().name.tolist() == ["pilot"] and store.raters().empty
    store.close()


@pytest.mark.parametrize("page_url, address", [
    ("http://10.0.0.5:8501/study", "http://10.0.0.5:8501"),
    ("https://wards.example/fwsapp/study?tab=raters#links", "https://wards.example/fwsapp"),  # served under a path
    ("http://localhost:8501/", "http://localhost:8501"),
    (None, "http://localhost:8501"),
])
def test_the_raters_address_is_the_admins_page_address_less_the_page(page_url, address):
    from fwsapp.human.access import app_address_of_page, invite_link

    assert app_address_of_page(page_url) == address
    assert invite_link(app_address_of_page(page_url), "t0k") == f"{address}/?invite=t0k"


def test_a_study_of_one_rater_per_item_says_so_in_the_singular():
    one = study.Study("s", "pilot", ("run-a",), 1, 0.25, True)
    assert one.describe() == ("1 run, 1 rater per item, 25% of each rater's items (at least one) shown twice as "
                              "attention checks, with the disease-name verdicts.")  # the page said "1 raters per item"
    assert study.Study("s", "pilot", ("run-a",), 2, 0.0, False).describe().endswith("per item, no attention checks.")
    # `study create --attention 0.125` read "12% of each rater's items", 0.005 "0%" beside "(at least one)"
    assert "12.5% of each rater's items" in study.Study("s", "pilot", ("run-a",), 2, 0.125, False).describe()
    assert "0.5% of each rater's items" in study.Study("s", "pilot", ("run-a",), 2, 0.005, False).describe()


def test_every_rater_gets_an_attention_check_where_the_share_is_above_0(tmp_path):
    """10 % of a rater's 4 items rounded to none: a pilot's raters were never checked, and the study said 10 %."""
    path = tmp_path / "small.duckdb"
    run_id = imported_qa_db(path, 8)
    store = Store(path)
    _, invites = study.create(store, "pilot", [run_id], items_per_run=8, raters_per_item=1, attention_share=0.1,
                              raters=["Dr A", "Dr B"])
    _, unchecked = study.create(store, "no checks", [run_id], items_per_run=8, raters_per_item=1, attention_share=0,
                                raters=["Dr C"])
    checks = {invite.name: int(store.assignments(invite.rater_id).attention.sum()) for invite in invites + unchecked}
    store.close()
    assert checks == {"Dr A": 1, "Dr B": 1, "Dr C": 0}


# -- the app: who gets which page ---------------------------------------------------------------------------------------
APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = sorted(str(page.relative_to(Path(APP).parent)) for page in (Path(APP).parent / "pages").glob("*.py"))
PAGE_TEXT = ("markdown", "caption", "title", "header", "subheader", "text", "info", "success", "warning", "error")


def page_text(app) -> str:
    """Everything the page shows as text, widget labels included."""
    parts = [element.value for kind in PAGE_TEXT for element in getattr(app, kind)]
    parts += [widget.label for kind in ("radio", "button", "text_area", "text_input") for widget in getattr(app, kind)]
    return "\n".join(str(part) for part in parts)


@pytest.fixture
def served_study(app_db):
    run_id = imported_qa_db(app_db, 8)
    store = Store(app_db)
    created, invites = study.create(store, "pilot", [run_id], items_per_run=4, raters_per_item=2,
                                    attention_share=0.25, raters=["Dr A", "Dr B"])
    store.close()
    return run_id, created, invites


def rater_app(token: str, path: str | None = None):
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["invite"] = token
    if path:
        app.switch_page(path)
    return app.run()


def test_an_invite_link_opens_the_raters_own_items_and_nothing_else(served_study, app_db):
    run_id, created, invites = served_study
    app = rater_app(invites[0].token)
    assert not app.exception and [title.value for title in app.title] == ["Rate answers"]
    assert len(app.sidebar) == 0  # no pages, no database path, no model panel
    text = page_text(app)
    for hidden in ("watermark", "Watermark", run_id, "KGW", str(app_db), invites[0].name, invites[1].rater_id):
        assert hidden not in text
    for radio in app.radio:
        radio.set_value(4)
    app.button[2].click().run()  # Submit
    assert not app.exception
    store = Store(app_db)
    rated = store.frame("SELECT rater, seconds FROM human_ratings")
    store.close()
    assert rated.rater.tolist() == [invites[0].rater_id] and rated.seconds.iloc[0] >= 0
    for path in PAGES:  # every page's URL with the link opens the rater view, and only that
        other = rater_app(invites[0].token, path)
        assert [title.value for title in other.title] == ["Rate answers"] and len(other.sidebar) == 0


def test_an_unknown_or_revoked_link_gets_one_line_and_nothing_else(served_study, app_db):
    _, _, invites = served_study
    store = Store(app_db)
    study.revoke(store, invites[1].rater_id)
    store.close()
    for token in ("made-up", invites[1].token):
        app = rater_app(token)
        assert not app.exception and [error.value for error in app.error] == [access.INVALID_LINK]
        assert not app.title and not app.radio and len(app.sidebar) == 0


def test_with_an_admin_token_every_page_asks_for_it_once_per_session(served_study, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(access.ADMIN_TOKEN_VARIABLE, "correct horse battery staple")
    for path in PAGES:  # a stranger on any page's URL sees the sign-in alone
        stranger = AppTest.from_file(APP, default_timeout=60)
        stranger.switch_page(path).run()
        assert [title.value for title in stranger.title] == ["fwsapp"] and len(stranger.sidebar) == 0, path
        assert [widget.label for widget in stranger.text_input] == ["Admin token"] and not stranger.dataframe, path
    app = AppTest.from_file(APP, default_timeout=60)
    app.switch_page("pages/study.py").run()
    app.text_input[0].set_value("wrong")
    app.button[0].click().run()
    assert app.error[0].value == "That is not the admin token." and not app.dataframe
    app.text_input[0].set_value("correct horse battery staple")
    app.button[0].click().run()
    assert not app.exception and len(app.sidebar) > 0  # the app, with its pages
    app.switch_page("pages/study.py").run()
    assert [title.value for title in app.title] == ["Study"] and app.dataframe  # once per session
    app.switch_page("pages/detect.py").run()
    assert [title.value for title in app.title][0] == "Detect"


def test_served_on_a_network_without_an_admin_token_no_page_is_shown(served_study, monkeypatch):
    from streamlit import config
    from streamlit.testing.v1 import AppTest

    monkeypatch.delenv(access.ADMIN_TOKEN_VARIABLE, raising=False)
    address = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        app = AppTest.from_file(APP, default_timeout=60)
        app.run()
        assert not app.title and "no admin token is set" in app.error[0].value and len(app.sidebar) == 0
        monkeypatch.setenv(access.ADMIN_TOKEN_VARIABLE, "Jq7vR2xLk9TzW4mNp8sDf3hGc6bYa1eU")
        app.run()
        assert "no admin token" not in page_text(app) and app.text_input[0].label == "Admin token"
    finally:
        config.set_option("server.address", address)


def test_the_study_page_creates_a_study_shows_its_links_once_and_follows_it(served_study, app_db):
    from streamlit.testing.v1 import AppTest

    run_id, created, invites = served_study
    app = AppTest.from_file(APP, default_timeout=60)
    app.switch_page("pages/study.py").run()
    assert not app.exception
    assert {invite.name for invite in invites} == set(app.dataframe[0].value.rater)  # the progress per rater
    app.text_input[0].set_value("second")
    app.multiselect[0].set_value([run_id])
    app.text_area[0].set_value("Dr X\nDr Y")
    app.button[0].click().run()
    assert not app.exception
    links = [code.value for code in app.code if "?invite=" in code.value]
    assert len(links) == 2
    # Two raters for items asked of three (the form's default): the study's progress says it is short of raters.
    assert ("1 item has fewer than 3 raters (of 1): invite at least 1 more rater; each new rater takes the items still "
            "short of raters.") in [shown(warning.value) for warning in app.warning]
    store = Store(app_db)
    assert study.rater_for(store, links[0].split("=", 1)[1]) is not None
    store.close()
    next(button for button in app.button if button.label == "I have sent the links").click().run()
    assert not [code for code in app.code if "?invite=" in code.value]  # shown once


def test_a_second_study_not_yet_rated_opens_and_exports_while_the_first_has_ratings(served_study, app_db, tmp_path):
    """Its ratings are the database's filtered to none, dated columns and all: the export's test for list cells asked
    `any()` of an empty datetime column, and the admin's Study page and `study export` failed with a TypeError."""
    from streamlit.testing.v1 import AppTest

    from fwsapp.cli import main

    run_id, _, invites = served_study
    store = Store(app_db)
    rate_all(store, invites[0].rater_id)
    study.create(store, "second", [run_id], items_per_run=2, raters_per_item=1, attention_share=0.0, raters=["Dr X"])
    store.close()
    app = AppTest.from_file(APP, default_timeout=60)
    app.switch_page("pages/study.py").run()
    app.selectbox[0].set_value(next(option for option in app.selectbox[0].options if "second" in option)).run()
    assert not app.exception
    assert [button.disabled for button in app.get("download_button")] == [True, True]  # nothing to download yet
    out = tmp_path / "second.csv"
    assert main(["study", "export", "--study", "second", "--out", str(out), "--db", str(app_db)]) == 0
    assert pd.read_csv(out).empty and list(pd.read_csv(out).columns)[:2] == ["rater", "run_id"]


def test_the_study_page_deletes_a_study_once_its_name_is_typed(served_study, app_db):
    from streamlit.testing.v1 import AppTest

    _, created, invites = served_study
    app = AppTest.from_file(APP, default_timeout=60)
    app.switch_page("pages/study.py").run()
    delete = next(button for button in app.button if button.label == "Delete this study")
    assert delete.disabled and any("2 raters lose their links, and 0 ratings" in html.unescape(warning.value)
                                   for warning in app.warning)
    app.text_input(key=f"study-delete-{created.study_id}").set_value("pilot").run()
    next(button for button in app.button if button.label == "Delete this study").click().run()
    assert not app.exception and any("Deleted the study 'pilot'" in html.unescape(note.value) for note in app.success)
    assert "No study yet: create one above." in [info.value for info in app.info]
    store = Store(app_db)
    assert store.studies().empty and study.rater_for(store, invites[0].token) is None
    store.close()


def test_the_entity_task_asks_the_rater_for_verdicts_on_introduced_names_filed_under_their_id(app_db):
    from fwsapp.entities.introduced import VERDICTS
    from tests.conftest import hostile_entity_db

    run_id = hostile_entity_db(app_db)
    store = Store(app_db)
    _, (invite,) = study.create(store, "names", [run_id], items_per_run=1, raters_per_item=1, attention_share=0,
                                entity_task=True, raters=["Dr E"])
    store.close()
    app = rater_app(invite.token)
    assert not app.exception and "Disease names in the answers" in [header.value for header in app.subheader]
    verdicts = [radio for radio in app.radio if radio.options == list(VERDICTS.values())]
    assert verdicts and "watermark" not in page_text(app).lower()
    verdicts[0].set_value(VERDICTS["hallucinated"]).run()
    store = Store(app_db)
    filed = store.frame("SELECT rater, text_kind, verdict FROM entity_verdicts")
    store.close()
    assert set(filed.rater) == {invite.rater_id} and set(filed.verdict) == {"hallucinated"}
    assert set(filed.text_kind) <= {"watermarked", "unwatermarked"}


def test_a_submitted_rating_survives_a_restart(study_db):
    store, _, invites = study_db
    task = study.StudyRater(invites[0].rater_id).queue(store).upcoming
    study.StudyRater(invites[0].rater_id).submit(store, task, *SCORES, seconds=1.5)
    path = store.path
    store.close()
    reopened = Store(path)  # a new process would open the file the same way
    done = study.StudyRater(invites[0].rater_id).queue(reopened).done
    assert len(done) == 1 and done[0].handle == task.handle
    reopened.close()


def test_a_run_a_study_uses_is_not_deleted_and_nothing_is_lost(study_db):
    from fwsapp.store import StoreError

    store, created, invites = study_db
    run_id = created.runs[0]
    before = {table: store.row(f"SELECT count(*) FROM {table}")[0] for table in ("study_items", "study_assignments")}
    with pytest.raises(StoreError, match=f"Run {run_id} is in the study 'pilot'"):
        store.delete_run(run_id)
    assert store.run(run_id) and {table: store.row(f"SELECT count(*) FROM {table}")[0] for table in before} == before
    study.create(store, "audit", [run_id], items_per_run=2)
    with pytest.raises(StoreError, match=f"Run {run_id} is in the studies 'audit' and 'pilot': "):  # "the study 'pilot', 'audit'"
        store.delete_run(run_id)


def test_the_study_pages_agreement_names_the_judge_its_correlations_read(app_db):
    """The FWS page names the judge whose verdicts a correlation reads ("judge (gpt-4o)"); the Study page's agreement
    tab said "judge" alone, whichever judge (or none) had given verdicts."""
    from streamlit.testing.v1 import AppTest

    run_id = imported_qa_db(app_db, 12)
    store = Store(app_db)
    _, invites = study.create(store, "named", [run_id], items_per_run=6, raters_per_item=2, attention_share=0,
                              raters=["Dr A", "Dr B"])
    for invite, scores in zip(invites, (([5, 4, 4], [2, 2, 1]), ([4, 4, 5], [1, 2, 2]))):
        rate_all(store, invite.rater_id, scores)
    store.close()
    app = AppTest.from_file(APP, default_timeout=60)
    app.switch_page("pages/study.py").run()
    assert not app.exception
    correlations = next(frame.value for frame in app.dataframe if "Auto-FWS mapping" in frame.value.columns)
    assert "judge (no verdicts yet)" in correlations.columns and "judge" not in correlations.columns
