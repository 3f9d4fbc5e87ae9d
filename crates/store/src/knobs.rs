//! Knobs: the tuning knobs each configuration of a run changed, with their original values.

use serde::{Deserialize, Serialize};

use crate::db::{vals, Conn};
use crate::runs::ensure_run;
use crate::{Store, StoreError};

/// A tuning knob one configuration of a run changed, with the value it had before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobRecord {
    /// Configuration that set it.
    pub config: String,
    /// Knob name, e.g. `net.core.busy_poll`.
    pub name: String,
    /// Value before the run changed it; `None` when the knob did not exist or was unreadable.
    pub original: Option<String>,
    /// Value the run set.
    pub applied: String,
}

impl Store {
    /// Records the knobs a run changed. Knobs are keyed by (config, name) and merged with
    /// what is already stored, so this may be called once per configuration or once with all
    /// of them. Setting a knob again updates `applied` but keeps the first `original`, because
    /// that is the value to restore.
    pub fn set_knobs(&mut self, run_id: i64, knobs: &[KnobRecord]) -> Result<(), StoreError> {
        let path = &self.path;
        self.conn.write_tx(|c| {
            ensure_run(c, path, run_id)?;
            insert_knobs(c, run_id, knobs)
        })
    }

    /// The knobs of run `run_id` in the order they were first set, or
    /// [`StoreError::NotFound`] if there is no such run.
    pub fn knobs(&self, run_id: i64) -> Result<Vec<KnobRecord>, StoreError> {
        ensure_run(&self.conn, &self.path, run_id)?;
        self.conn
            .query(
                "SELECT config, name, original, applied FROM knobs WHERE run_id = ?1 ORDER BY id",
                vals![run_id],
            )?
            .iter()
            .map(|row| {
                Ok(KnobRecord {
                    config: row.text(0)?,
                    name: row.text(1)?,
                    original: row.opt_text(2)?,
                    applied: row.text(3)?,
                })
            })
            .collect()
    }
}

/// Merges `knobs` into run `run_id`'s (inside the caller's transaction).
pub(crate) fn insert_knobs(c: &Conn, run_id: i64, knobs: &[KnobRecord]) -> Result<(), StoreError> {
    for k in knobs {
        c.execute(
            "INSERT INTO knobs (run_id, config, name, original, applied)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (run_id, config, name) DO UPDATE
             SET applied = excluded.applied,
                 original = COALESCE(knobs.original, excluded.original)",
            vals![run_id, &k.config, &k.name, k.original.as_ref(), &k.applied],
        )?;
    }
    Ok(())
}
