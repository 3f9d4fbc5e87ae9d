//! Capture analyses (`virtperf pcap --store`): one `captures` row per analysis and one
//! `capture_connections` row per connection.

use serde::{Deserialize, Serialize};

use crate::db::vals;
use crate::{now_rfc3339, Store, StoreError};

/// A capture analysis to store (`virtperf pcap --store`). The analyzer's types stay out of
/// the store: summary and connections travel as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewCapture {
    /// The capture file as given.
    pub path: String,
    /// The analyzer's summary.
    pub summary: serde_json::Value,
    /// Every connection.
    pub connections: Vec<CaptureConn>,
}

/// One analyzed connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureConn {
    /// Opening endpoint, `ip:port`.
    pub a: String,
    /// Other endpoint.
    pub b: String,
    /// First to last packet, seconds.
    pub duration_s: f64,
    /// Payload bytes both ways.
    pub bytes: u64,
    /// Every field, as the analyzer reports it.
    pub detail: serde_json::Value,
}

/// A stored capture analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureRow {
    /// Id.
    pub id: i64,
    /// File analyzed.
    pub path: String,
    /// When.
    pub analyzed_at: String,
    /// Connections stored.
    pub connections: u64,
}

impl Store {
    /// Stores one capture analysis with all its connections, in one transaction, and returns
    /// its id.
    pub fn add_capture(&mut self, c: &NewCapture) -> Result<i64, StoreError> {
        let summary = serde_json::to_string(&c.summary)?;
        self.conn.write_tx(|db| {
            let id = db
                .query_opt(
                    "INSERT INTO captures (path, analyzed_at, summary_json) VALUES (?1, ?2, ?3) RETURNING id",
                    vals![&c.path, now_rfc3339(), summary.clone()],
                )?
                .ok_or_else(|| StoreError::Schema("INSERT … RETURNING gave no id".into()))?
                .int(0)?;
            for (i, k) in c.connections.iter().enumerate() {
                db.execute(
                    "INSERT INTO capture_connections (capture_id, seq, a, b, duration_s, bytes, conn_json)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    vals![
                        id,
                        i64::try_from(i).unwrap_or(i64::MAX),
                        &k.a,
                        &k.b,
                        k.duration_s,
                        i64::try_from(k.bytes).unwrap_or(i64::MAX),
                        serde_json::to_string(&k.detail)?
                    ],
                )?;
            }
            Ok(id)
        })
    }

    /// Stored captures, newest first: id, path, time of analysis, number of connections.
    pub fn captures(&self) -> Result<Vec<CaptureRow>, StoreError> {
        self.conn
            .query(
                "SELECT c.id, c.path, c.analyzed_at,
                        (SELECT COUNT(*) FROM capture_connections k WHERE k.capture_id = c.id)
                 FROM captures c ORDER BY c.id DESC",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(CaptureRow {
                    id: r.int(0)?,
                    path: r.text(1)?,
                    analyzed_at: r.text(2)?,
                    connections: r.int(3)?.max(0) as u64,
                })
            })
            .collect()
    }
}
