//! The database schema as a list of migrations, written twice: once in SQLite's dialect
//! ([`MIGRATIONS`]) and once in PostgreSQL's ([`PG_MIGRATIONS`]). Both lists give the same
//! tables, columns, keys and indexes at every version, so every query of the store runs
//! unchanged on either; only the spelling of types differs (PostgreSQL's `BIGINT` identity
//! for SQLite's `INTEGER PRIMARY KEY`, `BIGINT` for `INTEGER`, `DOUBLE PRECISION` for
//! `REAL`).
//!
//! `PRAGMA user_version` holds how many entries of [`MIGRATIONS`] a file has had applied;
//! on PostgreSQL the `meta` row `schema_version` does.
//! To change the schema, append one SQL batch; never edit an entry that has shipped, because
//! files in the field were built by it. `Store::open` applies each missing entry in its own
//! transaction together with the `user_version` bump, so a crash leaves a file at a whole
//! version, never half-way.

/// Key and value of the `meta` row that marks a file as ours. A file with tables but
/// without this row belongs to someone else and is never modified.
pub(crate) const APP_KEY: &str = "app";
/// See [`APP_KEY`].
pub(crate) const APP_VALUE: &str = "virtperf";

/// Migration `i` (0-based) takes a file from `user_version` `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('app', 'virtperf');

-- One invocation of a benchmark plan. `status` is what the writer last said; readers use
-- RunRow::effective_status to spot a `running` run whose process has died.
CREATE TABLE runs (
    id             INTEGER PRIMARY KEY,
    name           TEXT NOT NULL,
    started_at     TEXT NOT NULL,          -- RFC 3339 UTC
    finished_at    TEXT,                   -- NULL while running
    status         TEXT NOT NULL
                   CHECK (status IN ('running', 'complete', 'incomplete', 'failed')),
    host           TEXT NOT NULL,          -- where the writing process runs
    pid            INTEGER NOT NULL,       -- the writing process, to detect it was killed
    tool_version   TEXT NOT NULL,
    git_commit     TEXT,
    spec_text      TEXT NOT NULL,          -- the plan exactly as the user wrote it
    env_json       TEXT NOT NULL,          -- virtperf_wire::Env of the client machine
    planned_trials INTEGER NOT NULL
);
CREATE INDEX runs_started_at ON runs (started_at);

-- One measurement of one sweep point. Failed and skipped trials are kept so a report can
-- say what is missing and why.
CREATE TABLE trials (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,          -- order within the run
    config      TEXT NOT NULL,
    workload    TEXT NOT NULL,             -- rr, crr, stream, bulk, http
    point_json  TEXT NOT NULL,             -- sweep parameters, a JSON object
    point_label TEXT NOT NULL,
    repetition  INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    error       TEXT,
    result_json TEXT,                      -- the whole TestResult, HDR histogram included
    metric      REAL,                      -- the trial's primary number, for quick queries
    metric_name TEXT NOT NULL,
    started_at  TEXT NOT NULL,             -- RFC 3339 UTC
    duration_s  REAL NOT NULL
);
CREATE INDEX trials_run_seq ON trials (run_id, seq);

-- Tuning knobs a run changed, with the value to restore.
CREATE TABLE knobs (
    id       INTEGER PRIMARY KEY,
    run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    config   TEXT NOT NULL,
    name     TEXT NOT NULL,
    original TEXT,                         -- NULL when the knob did not exist before
    applied  TEXT NOT NULL,
    UNIQUE (run_id, config, name)
);
"#,
    // 2: capture analyses (`virtperf pcap --store`).
    r#"
CREATE TABLE captures (
    id           INTEGER PRIMARY KEY,
    path         TEXT NOT NULL,            -- the capture file as given
    analyzed_at  TEXT NOT NULL,            -- RFC 3339 UTC
    summary_json TEXT NOT NULL             -- the analyzer's summary, a JSON object
);

CREATE TABLE capture_connections (
    id          INTEGER PRIMARY KEY,
    capture_id  INTEGER NOT NULL REFERENCES captures (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    a           TEXT NOT NULL,             -- endpoint that opened it, ip:port
    b           TEXT NOT NULL,
    duration_s  REAL NOT NULL,
    bytes       INTEGER NOT NULL,          -- payload bytes both ways
    conn_json   TEXT NOT NULL              -- every field of the connection, a JSON object
);
CREATE INDEX capture_connections_by_capture ON capture_connections (capture_id, seq);
"#,
    // 3: measurements that are not a network test (`virtperf explain`'s wake-up and KVM
    // probes) keep their whole report here, as result_json keeps a TestResult.
    r#"
ALTER TABLE trials ADD COLUMN detail_json TEXT;  -- a probe's report, a JSON object
"#,
    // 4: a stable id per run, the same in every store the run is pushed to (`virtperf
    // push`), so pushing twice finds it; runs stored before get one now.
    r#"
ALTER TABLE runs ADD COLUMN uid TEXT;
UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL;
CREATE UNIQUE INDEX runs_uid ON runs (uid);
CREATE INDEX runs_host_started_at ON runs (host, started_at);
"#,
    // 5: tags (`--tag KEY=VALUE`, `$VIRTPERF_TAGS`): where a run ran, in a fleet's words
    // (campaign, group, host, instance type); one row per key, filtered by `runs --where
    // tag.KEY=VALUE`.
    r#"
CREATE TABLE run_tags (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX run_tags_key_value ON run_tags (key, value);
"#,
];

/// [`MIGRATIONS`] in PostgreSQL's dialect, entry for entry.
pub(crate) const PG_MIGRATIONS: &[&str] = &[
    // 1
    r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('app', 'virtperf');
CREATE TABLE runs (
    id             BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name           TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    finished_at    TEXT,
    status         TEXT NOT NULL
                   CHECK (status IN ('running', 'complete', 'incomplete', 'failed')),
    host           TEXT NOT NULL,
    pid            BIGINT NOT NULL,
    tool_version   TEXT NOT NULL,
    git_commit     TEXT,
    spec_text      TEXT NOT NULL,
    env_json       TEXT NOT NULL,
    planned_trials BIGINT NOT NULL
);
CREATE INDEX runs_started_at ON runs (started_at);
CREATE TABLE trials (
    id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id      BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    config      TEXT NOT NULL,
    workload    TEXT NOT NULL,
    point_json  TEXT NOT NULL,
    point_label TEXT NOT NULL,
    repetition  BIGINT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    error       TEXT,
    result_json TEXT,
    metric      DOUBLE PRECISION,
    metric_name TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    duration_s  DOUBLE PRECISION NOT NULL
);
CREATE INDEX trials_run_seq ON trials (run_id, seq);
CREATE TABLE knobs (
    id       BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id   BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    config   TEXT NOT NULL,
    name     TEXT NOT NULL,
    original TEXT,
    applied  TEXT NOT NULL,
    UNIQUE (run_id, config, name)
);
"#,
    // 2
    r#"
CREATE TABLE captures (
    id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    path         TEXT NOT NULL,
    analyzed_at  TEXT NOT NULL,
    summary_json TEXT NOT NULL
);
CREATE TABLE capture_connections (
    id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    capture_id  BIGINT NOT NULL REFERENCES captures (id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    a           TEXT NOT NULL,
    b           TEXT NOT NULL,
    duration_s  DOUBLE PRECISION NOT NULL,
    bytes       BIGINT NOT NULL,
    conn_json   TEXT NOT NULL
);
CREATE INDEX capture_connections_by_capture ON capture_connections (capture_id, seq);
"#,
    // 3
    r#"
ALTER TABLE trials ADD COLUMN detail_json TEXT;
"#,
    // 4
    r#"
ALTER TABLE runs ADD COLUMN uid TEXT;
UPDATE runs SET uid = md5(random()::text || id::text) WHERE uid IS NULL;
CREATE UNIQUE INDEX runs_uid ON runs (uid);
CREATE INDEX runs_host_started_at ON runs (host, started_at);
"#,
    // 5
    r#"
CREATE TABLE run_tags (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX run_tags_key_value ON run_tags (key, value);
"#,
];

/// The `user_version` this code writes and the newest it can read.
pub(crate) fn supported_version() -> i64 {
    // A list of schema migrations never gets anywhere near i64::MAX entries.
    i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX)
}
