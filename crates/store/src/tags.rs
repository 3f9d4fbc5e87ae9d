//! Tags: `KEY=VALUE` pairs stored with a run (`--tag`, `$VIRTPERF_TAGS`), so a fleet's runs
//! say where they ran in the fleet's own words (campaign, group, host, instance type,
//! kernel) and can be selected by them (`runs --where tag.rack=b12`), exported as columns
//! and grouped in a report (`report --group-by TAG`).

use std::collections::BTreeMap;

use crate::db::{vals, Conn};
use crate::StoreError;

/// A run's tags, by key; one value per key (a later `--tag` with the same key wins).
pub type Tags = BTreeMap<String, String>;

/// The longest tag key or value accepted: a tag names a place, it is not a document.
const MAX_LEN: usize = 200;

/// Parses one `KEY=VALUE` tag. The key is letters, digits, `_`, `-` and `.` (it becomes a
/// column name in `export` and a `--where tag.KEY` filter); the value is any printable
/// text without a comma (commas separate tags in `$VIRTPERF_TAGS`), possibly empty.
pub fn parse_tag(s: &str) -> Result<(String, String), String> {
    let Some((k, v)) = s.split_once('=') else {
        return Err(format!("tag {s:?} is not KEY=VALUE (e.g. --tag rack=b12)"));
    };
    let (k, v) = (k.trim(), v.trim());
    if k.is_empty() || k.len() > MAX_LEN {
        return Err(format!(
            "tag {s:?}: the key must be 1 to {MAX_LEN} characters"
        ));
    }
    if let Some(c) = k
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "tag {s:?}: key character {c:?} is not allowed (letters, digits, _ - . only)"
        ));
    }
    if v.len() > MAX_LEN || v.chars().any(|c| c.is_control() || c == ',') {
        return Err(format!(
            "tag {s:?}: the value must be at most {MAX_LEN} printable characters without commas"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

/// Parses a comma-separated list of tags (the form of `$VIRTPERF_TAGS`:
/// `campaign=c7,group=amd,host=h1`); empty items are ignored.
pub fn parse_tag_list(s: &str) -> Result<Tags, String> {
    s.split(',')
        .filter(|t| !t.trim().is_empty())
        .map(parse_tag)
        .collect()
}

/// Writes `tags` for run `run_id` (inside the caller's transaction).
pub(crate) fn insert_tags(conn: &Conn, run_id: i64, tags: &Tags) -> Result<(), StoreError> {
    for (k, v) in tags {
        conn.execute(
            "INSERT INTO run_tags (run_id, key, value) VALUES (?1, ?2, ?3)",
            vals![run_id, k, v],
        )?;
    }
    Ok(())
}

/// Run `run_id`'s tags.
pub(crate) fn read_tags(conn: &Conn, run_id: i64) -> Result<Tags, StoreError> {
    conn.query(
        "SELECT key, value FROM run_tags WHERE run_id = ?1 ORDER BY key",
        vals![run_id],
    )?
    .iter()
    .map(|r| Ok((r.text(0)?, r.text(1)?)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_parse_and_bad_ones_say_why() {
        assert_eq!(parse_tag("rack=b12"), Ok(("rack".into(), "b12".into())));
        assert_eq!(parse_tag("k="), Ok(("k".into(), String::new())));
        assert_eq!(
            parse_tag(" a.b-c_1 = x y "),
            Ok(("a.b-c_1".into(), "x y".into()))
        );
        for bad in ["rack", "=v", "ra ck=v", "k=a,b", "k=a\nb", "k'=v"] {
            let e = parse_tag(bad).unwrap_err();
            assert!(e.contains("tag"), "{bad}: {e}");
        }
        let long = format!("k={}", "x".repeat(MAX_LEN + 1));
        assert!(parse_tag(&long).is_err());
        let list = parse_tag_list("campaign=c7, host=h1,,campaign=c8").unwrap();
        assert_eq!(list.get("campaign").map(String::as_str), Some("c8"));
        assert_eq!(list.len(), 2);
        assert!(parse_tag_list("a=1,b").is_err());
    }
}
