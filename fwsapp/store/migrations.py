"""The database schema: its version, and the migrations that bring an older file up to it."""

SCHEMA_VERSION = 21

# Each entry migrates the schema from version i to i + 1; append, never edit.
MIGRATIONS = [
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        config_hash VARCHAR NOT NULL,
        config JSON NOT NULL,
        model VARCHAR,
        task VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        params JSON NOT NULL,
        seed BIGINT,
        n INTEGER NOT NULL,
        imported BOOLEAN NOT NULL DEFAULT FALSE,
        score_direction VARCHAR NOT NULL DEFAULT 'higher',
        status VARCHAR NOT NULL,
        created TIMESTAMP NOT NULL
    );
    CREATE TABLE generations (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        prompt VARCHAR NOT NULL,
        reference VARCHAR,
        unwatermarked_text VARCHAR,
        watermarked_text VARCHAR,
        unwatermarked_ids INTEGER[],
        watermarked_ids INTEGER[],
        unwatermarked_entropy FLOAT[],
        watermarked_entropy FLOAT[],
        unwatermarked_seconds DOUBLE,
        watermarked_seconds DOUBLE,
        PRIMARY KEY (run_id, sample_idx)
    );
    CREATE TABLE detections (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        detector VARCHAR NOT NULL,
        score DOUBLE,
        z DOUBLE,
        p DOUBLE,
        num_tokens_scored INTEGER,
        PRIMARY KEY (run_id, sample_idx, text_kind, detector)
    );
    """,
    # 2: per-sample quality metrics, and judge verdicts (raw output always kept, with its parse status).
    """
    CREATE TABLE metrics (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        value DOUBLE,
        PRIMARY KEY (run_id, sample_idx, text_kind, metric, config)
    );
    CREATE TABLE judgments (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        judge_model VARCHAR NOT NULL,
        prompt_version VARCHAR NOT NULL,
        watermarked_first BOOLEAN NOT NULL,
        texts_hash VARCHAR NOT NULL,
        backend VARCHAR,
        raw_output VARCHAR,
        status VARCHAR NOT NULL,
        reason VARCHAR,
        scores_watermarked DOUBLE[],
        scores_unwatermarked DOUBLE[],
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        seconds DOUBLE,
        created TIMESTAMP,
        PRIMARY KEY (run_id, sample_idx, judge_model, prompt_version, watermarked_first, texts_hash)
    );
    """,
    # 3: human evaluation: the sampled items (with their stored A/B order), ratings, and skips.
    """
    CREATE TABLE human_items (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        watermarked_first BOOLEAN NOT NULL,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, sample_idx)
    );
    CREATE TABLE human_ratings (
        rater VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        scores_watermarked DOUBLE[] NOT NULL,
        scores_unwatermarked DOUBLE[] NOT NULL,
        comment VARCHAR,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (rater, run_id, sample_idx)
    );
    CREATE TABLE human_skips (
        rater VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (rater, run_id, sample_idx)
    );
    """,
    # 4: why factuality degrades: teacher-forced entropies of texts the generator did not write (references,
    # imports), disease entities per text with the introduced/hallucinated verdicts, and clinicians' verdicts.
    """
    CREATE TABLE entropies (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        token_ids INTEGER[],
        token_spans INTEGER[][],
        entropy FLOAT[],
        PRIMARY KEY (run_id, sample_idx, text_kind, model)
    );
    CREATE TABLE entities (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        start_char INTEGER NOT NULL,
        end_char INTEGER NOT NULL,
        entity VARCHAR NOT NULL,
        normalized VARCHAR NOT NULL,
        introduced BOOLEAN NOT NULL,
        hallucinated BOOLEAN NOT NULL,
        closest_reference VARCHAR,
        similarity DOUBLE,
        token_indices INTEGER[],
        entropy DOUBLE,
        PRIMARY KEY (run_id, sample_idx, text_kind, config, start_char)
    );
    CREATE TABLE entity_analyses (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        config VARCHAR NOT NULL,
        token_counts INTEGER[],
        PRIMARY KEY (run_id, sample_idx, config)
    );
    CREATE TABLE entity_verdicts (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        start_char INTEGER NOT NULL,
        rater VARCHAR NOT NULL,
        verdict VARCHAR NOT NULL,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, sample_idx, text_kind, start_char, rater)
    );
    """,
    # 5: runs generated before the green-list generator became a parameter used the CPU one; re-detection
    # sets: a run's texts scored again under a method, its parameters and a tokenizer, beside what is stored.
    """
    UPDATE runs SET params = json_merge_patch(params, '{"rng": "cpu"}')
    WHERE method IN ('KGW', 'SWEET', 'DiPmark') AND NOT imported AND json_extract(params, '$.rng') IS NULL;
    CREATE TABLE detection_sets (
        set_id VARCHAR PRIMARY KEY,
        run_id VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        params JSON NOT NULL,
        tokenizer VARCHAR NOT NULL,
        score_direction VARCHAR NOT NULL,
        created TIMESTAMP NOT NULL
    );
    CREATE TABLE redetections (
        set_id VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        score DOUBLE,
        z DOUBLE,
        p DOUBLE,
        num_tokens_scored INTEGER,
        PRIMARY KEY (set_id, sample_idx, text_kind)
    );
    """,
    # 6: token counts per text kind stored by name, not by position in a list.
    """
    ALTER TABLE entity_analyses ADD COLUMN reference_tokens INTEGER;
    ALTER TABLE entity_analyses ADD COLUMN unwatermarked_tokens INTEGER;
    ALTER TABLE entity_analyses ADD COLUMN watermarked_tokens INTEGER;
    UPDATE entity_analyses SET reference_tokens = token_counts[1], unwatermarked_tokens = token_counts[2],
                               watermarked_tokens = token_counts[3];
    ALTER TABLE entity_analyses DROP COLUMN token_counts;
    """,
    # 7: the unwatermarked text's SimCSE was stored as 1.0, its similarity to itself: a definition, not a
    # measurement, that showed as "best" and lifted the unwatermarked Auto-FWS. Dropped; nothing is lost.
    """
    DELETE FROM metrics WHERE metric = 'simcse' AND text_kind = 'unwatermarked';
    """,
    # 8: why a run failed (a grid unit that failed for good), beside its status.
    """
    ALTER TABLE runs ADD COLUMN status_reason VARCHAR;
    """,
    # 9: robustness: attack sets (a run's watermarked texts edited by one attack, its parameters and seed), the
    # attacked texts with how much they changed and which disease mentions survived, and detection sets that score
    # attacked texts, or texts normalised before tokenising. An attacked text's ROUGE-L and encoder similarity to
    # its clean text are measured after its detection.
    """
    CREATE TABLE attack_sets (
        attack_set_id VARCHAR PRIMARY KEY,
        run_id VARCHAR NOT NULL,
        attack VARCHAR NOT NULL,
        params JSON NOT NULL,
        seed INTEGER NOT NULL,
        model VARCHAR,
        created TIMESTAMP NOT NULL
    );
    CREATE TABLE attacked_texts (
        attack_set_id VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text VARCHAR NOT NULL,
        spans INTEGER[][],
        note VARCHAR,
        words_changed DOUBLE,
        rouge_l DOUBLE,
        similarity DOUBLE,
        mentions_clean INTEGER,
        mentions_kept INTEGER,
        mentions_introduced VARCHAR[],
        PRIMARY KEY (attack_set_id, sample_idx)
    );
    ALTER TABLE detection_sets ADD COLUMN attack_set_id VARCHAR;
    ALTER TABLE detection_sets ADD COLUMN normalize VARCHAR;
    """,
    # 10: an attacked text's disease mentions are compared by concept (MeSH heading), as the entity analysis
    # compares them, not by name: a synonym the attack wrote counted as lost and introduced. They are counted with
    # ROUGE-L and similarity after detection; the counts by name are cleared, and the next run of the same attack
    # counts them again. The attacked texts stay.
    """
    UPDATE attacked_texts SET mentions_clean = NULL, mentions_kept = NULL, mentions_introduced = NULL;
    """,
    # 11: studies served to a team. A study names its runs and items; each rater has an invite link, of which only
    # the hash is stored, and their own items in their own random order, some marked to be shown again as an
    # attention check. A rater's ratings are stored under their rater id in human_ratings, beside ratings under
    # typed names (legacy raters), which stay. Each rating records the seconds the rater spent on it.
    """
    CREATE TABLE studies (
        study_id VARCHAR PRIMARY KEY,
        name VARCHAR NOT NULL UNIQUE,
        runs VARCHAR[] NOT NULL,
        raters_per_item INTEGER NOT NULL,
        attention_share DOUBLE NOT NULL,
        entity_task BOOLEAN NOT NULL,
        seed INTEGER NOT NULL,
        created TIMESTAMP NOT NULL
    );
    CREATE TABLE study_items (
        study_id VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        PRIMARY KEY (study_id, run_id, sample_idx)
    );
    CREATE TABLE raters (
        rater_id VARCHAR PRIMARY KEY,
        study_id VARCHAR NOT NULL,
        name VARCHAR NOT NULL,
        token_hash VARCHAR NOT NULL UNIQUE,
        created TIMESTAMP NOT NULL,
        revoked TIMESTAMP
    );
    CREATE TABLE study_assignments (
        rater_id VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        position INTEGER NOT NULL,
        attention BOOLEAN NOT NULL,
        PRIMARY KEY (rater_id, run_id, sample_idx)
    );
    CREATE TABLE attention_ratings (
        rater VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        scores_watermarked DOUBLE[] NOT NULL,
        scores_unwatermarked DOUBLE[] NOT NULL,
        seconds DOUBLE,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (rater, run_id, sample_idx)
    );
    ALTER TABLE human_ratings ADD COLUMN seconds DOUBLE;
    """,
    # 12: each text's test statistic after every token (fwsapp.detection.length), kept beside its score so reports need no second
    # detection; a detection set may score the best window of each text (WinMax) instead of the whole.
    """
    ALTER TABLE detections ADD COLUMN prefix_statistics DOUBLE[];
    ALTER TABLE redetections ADD COLUMN prefix_statistics DOUBLE[];
    ALTER TABLE detection_sets ADD COLUMN window_tokens INTEGER;
    """,
    # 13: an attention check's second showing can be skipped (no scores) and revised, and a rating says when it was
    # last revised (the export's analysis of revisions).
    """
    ALTER TABLE attention_ratings ALTER COLUMN scores_watermarked DROP NOT NULL;
    ALTER TABLE attention_ratings ALTER COLUMN scores_unwatermarked DROP NOT NULL;
    ALTER TABLE attention_ratings ADD COLUMN revised TIMESTAMP;
    ALTER TABLE human_ratings ADD COLUMN revised TIMESTAMP;
    """,
    # 14: a detection set may score each repeated (context, token) pair once (fwsapp.detection.deduplication).
    """
    ALTER TABLE detection_sets ADD COLUMN deduplicate BOOLEAN DEFAULT FALSE;
    """,
    # 15: a semantic watermark's answer records the candidate sentences it rejected (fwsapp.generation.sentences).
    """
    ALTER TABLE generations ADD COLUMN watermarked_rejections INTEGER;
    """,
    # 16: what a method fitted on a run's references (k-SemStamp's clusters), part of the run's key, kept with the run.
    """
    CREATE TABLE run_fits (
        run_id VARCHAR PRIMARY KEY,
        fitted JSON NOT NULL,
        created TIMESTAMP NOT NULL
    );
    """,
    # 17: clinicians' verdicts on the clinical facts of a text (fwsapp.entities.fact_review), any kind of fact, with
    # whether the automatic comparison flagged the fact (the reference does not state it so) when it was judged.
    """
    CREATE TABLE fact_verdicts (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        fact_kind VARCHAR NOT NULL,
        start_char INTEGER NOT NULL,
        end_char INTEGER NOT NULL,
        fact_text VARCHAR NOT NULL,
        flagged BOOLEAN NOT NULL,
        rater VARCHAR NOT NULL,
        verdict VARCHAR NOT NULL,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, sample_idx, text_kind, fact_kind, start_char, rater)
    );
    """,
    # 18: each text's clinical facts, and its changes against the run's other texts (fwsapp.entities.fact_analysis),
    # per configuration of the recognizers; a sample's done-marker makes the analysis resumable.
    """
    CREATE TABLE facts (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        start_char INTEGER NOT NULL,
        end_char INTEGER NOT NULL,
        text VARCHAR NOT NULL,
        value VARCHAR NOT NULL,
        assertion VARCHAR NOT NULL,
        PRIMARY KEY (run_id, sample_idx, text_kind, config, kind, start_char, end_char)
    );
    CREATE TABLE fact_changes (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        against VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        position INTEGER NOT NULL,
        kind VARCHAR NOT NULL,
        start_char INTEGER NOT NULL,
        end_char INTEGER NOT NULL,
        was VARCHAR NOT NULL,
        now VARCHAR NOT NULL,
        PRIMARY KEY (run_id, sample_idx, text_kind, against, config, position)
    );
    CREATE TABLE fact_analyses (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        config VARCHAR NOT NULL,
        PRIMARY KEY (run_id, sample_idx, config)
    );
    ALTER TABLE attacked_texts ADD COLUMN fact_survival JSON;
    """,
    # 19: a re-detected text's evidence record (fwsapp.detection.verdicts): what a regulator needs to check its
    # verdict again, holding neither the text nor the key.
    """
    ALTER TABLE redetections ADD COLUMN evidence JSON;
    """,
    # 20: each watermarked answer's statistic after every token as its entropy predicts it, under a model
    # (fwsapp.detection.predicted_length).
    """
    CREATE TABLE length_predictions (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        model VARCHAR NOT NULL,
        tokens INTEGER NOT NULL,
        predicted_statistics DOUBLE[] NOT NULL,
        PRIMARY KEY (run_id, sample_idx, model)
    );
    """,
    # 21: the A/B order each study rater sees an item in (fwsapp.human.study: counterbalanced across its raters); NULL
    # for the assignments made before, which were shown in the item's own order.
    """
    ALTER TABLE study_assignments ADD COLUMN watermarked_first BOOLEAN;
    """,
]
