//! The two backends behind one small interface: SQLite (a file, the default) and PostgreSQL
//! (a team's shared server, through the synchronous `postgres` crate).
//!
//! Every query of the store is written once, in the SQL both understand, with `?N`
//! placeholders (SQLite's); for PostgreSQL they become `$N`. Values cross as [`Val`], four
//! kinds that both map exactly (integers are 64-bit on both sides: the PostgreSQL schema
//! declares `BIGINT` wherever SQLite says `INTEGER`). A dozen queries do not justify an ORM
//! or `sqlx` (which would bring an async runtime into a tool that has none).

use std::cell::RefCell;
use std::error::Error as StdError;

use postgres_types::{to_sql_checked, IsNull, ToSql, Type};
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::StoreError;

/// One value passed to or read from either backend.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(v)
    }
}
impl From<u32> for Val {
    fn from(v: u32) -> Val {
        Val::Int(i64::from(v))
    }
}
impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::Real(v)
    }
}
impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Text(v.to_string())
    }
}
impl From<&String> for Val {
    fn from(v: &String) -> Val {
        Val::Text(v.clone())
    }
}
impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Text(v)
    }
}
impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Val {
        v.map_or(Val::Null, Into::into)
    }
}

/// `vals![a, b, …]`: a parameter list of [`Val`]s.
macro_rules! vals {
    ($($v:expr),* $(,)?) => { &[$($crate::db::Val::from($v)),*][..] };
}
pub(crate) use vals;

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Val::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Val::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Val::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
        })
    }
}

/// Encodes by the type PostgreSQL inferred for the parameter, so one `Val::Int` serves an
/// `int4` expression as well as a `bigint` column.
impl ToSql for Val {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Val::Null => Ok(IsNull::Yes),
            Val::Int(v) => match *ty {
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => v.to_string().to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Val::Real(v) => match *ty {
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Val::Text(v) => v.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// One result row, its columns in the order the query named them.
#[derive(Debug)]
pub(crate) struct Row(Vec<Val>);

impl Row {
    fn at(&self, i: usize) -> &Val {
        self.0.get(i).unwrap_or(&Val::Null)
    }

    /// Column `i` as an integer; a NULL or a text there is a schema mismatch.
    pub(crate) fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_int(i)?.ok_or_else(|| bad_column(i, "NULL"))
    }

    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.at(i) {
            Val::Null => Ok(None),
            Val::Int(v) => Ok(Some(*v)),
            other => Err(bad_column(i, &format!("{other:?}"))),
        }
    }

    /// Column `i` as a `u32` (counts, pids, sequence numbers).
    pub(crate) fn u32(&self, i: usize) -> Result<u32, StoreError> {
        let v = self.int(i)?;
        u32::try_from(v).map_err(|_| bad_column(i, &v.to_string()))
    }

    pub(crate) fn real(&self, i: usize) -> Result<f64, StoreError> {
        self.opt_real(i)?.ok_or_else(|| bad_column(i, "NULL"))
    }

    pub(crate) fn opt_real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        match self.at(i) {
            Val::Null => Ok(None),
            Val::Real(v) => Ok(Some(*v)),
            Val::Int(v) => Ok(Some(*v as f64)),
            other => Err(bad_column(i, &format!("{other:?}"))),
        }
    }

    pub(crate) fn text(&self, i: usize) -> Result<String, StoreError> {
        self.opt_text(i)?.ok_or_else(|| bad_column(i, "NULL"))
    }

    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.at(i) {
            Val::Null => Ok(None),
            Val::Text(v) => Ok(Some(v.clone())),
            other => Err(bad_column(i, &format!("{other:?}"))),
        }
    }
}

fn bad_column(i: usize, found: &str) -> StoreError {
    StoreError::Schema(format!("column {i} holds an unexpected value {found}"))
}

/// A connection to either backend. PostgreSQL's client needs `&mut` for every call while
/// the store's readers take `&self`, hence the `RefCell` (a `Store` is used by one thread at
/// a time, like a rusqlite `Connection`).
pub(crate) enum Conn {
    Sqlite(rusqlite::Connection),
    Pg(RefCell<postgres::Client>),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conn::Sqlite(_) => f.write_str("Conn::Sqlite"),
            Conn::Pg(_) => f.write_str("Conn::Pg"),
        }
    }
}

/// `?N` placeholders (SQLite's) as `$N` (PostgreSQL's). The store's SQL holds no `?` inside
/// a string literal, so a plain scan is exact.
pub(crate) fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

fn pg_params(params: &[Val]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

fn pg_row(row: &postgres::Row) -> Result<Row, StoreError> {
    let mut vals = Vec::with_capacity(row.len());
    for (i, col) in row.columns().iter().enumerate() {
        let v = match *col.type_() {
            Type::INT2 => row
                .try_get::<_, Option<i16>>(i)?
                .map(|v| Val::Int(v.into())),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(i)?
                .map(|v| Val::Int(v.into())),
            Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Val::Int),
            Type::FLOAT4 => row
                .try_get::<_, Option<f32>>(i)?
                .map(|v| Val::Real(v.into())),
            Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Val::Real),
            // What `SELECT pg_advisory_xact_lock(…)` returns: nothing to read.
            Type::VOID => None,
            _ => row.try_get::<_, Option<String>>(i)?.map(Val::Text),
        };
        vals.push(v.unwrap_or(Val::Null));
    }
    Ok(Row(vals))
}

fn sqlite_row(row: &rusqlite::Row<'_>, n: usize) -> rusqlite::Result<Row> {
    let mut vals = Vec::with_capacity(n);
    for i in 0..n {
        vals.push(match row.get_ref(i)? {
            ValueRef::Null => Val::Null,
            ValueRef::Integer(v) => Val::Int(v),
            ValueRef::Real(v) => Val::Real(v),
            ValueRef::Text(t) | ValueRef::Blob(t) => Val::Text(String::from_utf8_lossy(t).into()),
        });
    }
    Ok(Row(vals))
}

impl Conn {
    /// Runs a statement; returns how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute(sql, rusqlite::params_from_iter(params))? as u64),
            Conn::Pg(c) => Ok(c
                .borrow_mut()
                .execute(pg_sql(sql).as_str(), &pg_params(params))?),
        }
    }

    /// Every row a query returns.
    pub(crate) fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, StoreError> {
        match self {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare(sql)?;
                let n = stmt.column_count();
                let rows = stmt
                    .query_map(rusqlite::params_from_iter(params), |r| sqlite_row(r, n))?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(rows)
            }
            Conn::Pg(c) => {
                let rows = c
                    .borrow_mut()
                    .query(pg_sql(sql).as_str(), &pg_params(params))?;
                rows.iter().map(pg_row).collect()
            }
        }
    }

    /// The first row a query returns, if any.
    pub(crate) fn query_opt(&self, sql: &str, params: &[Val]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs a batch of statements without parameters (a migration).
    pub(crate) fn batch(&self, sql: &str) -> Result<(), StoreError> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Conn::Pg(c) => Ok(c.borrow_mut().batch_execute(sql)?),
        }
    }

    /// Runs `f` in a write transaction: committed when it returns `Ok`, rolled back
    /// otherwise. SQLite takes the write lock at once (`IMMEDIATE`), so two writers never
    /// deadlock upgrading read locks; PostgreSQL locks rows, not the database, so writers of
    /// different runs never wait for one another.
    pub(crate) fn write_tx<T>(
        &self,
        f: impl FnOnce(&Conn) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.batch(match self {
            Conn::Sqlite(_) => "BEGIN IMMEDIATE",
            Conn::Pg(_) => "BEGIN",
        })?;
        match f(self) {
            Ok(v) => {
                if let Err(e) = self.batch("COMMIT") {
                    let _ = self.batch("ROLLBACK");
                    return Err(e);
                }
                Ok(v)
            }
            Err(e) => {
                // The rollback's own error (e.g. the connection is gone) says nothing new.
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// True for a PostgreSQL connection the server or the network closed.
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Conn::Sqlite(_) => false,
            Conn::Pg(c) => c.borrow().is_closed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars() {
        assert_eq!(
            pg_sql("SELECT 1 FROM t WHERE a = ?1 AND b = ?12 AND c = '?'"),
            "SELECT 1 FROM t WHERE a = $1 AND b = $12 AND c = '?'"
        );
    }
}
