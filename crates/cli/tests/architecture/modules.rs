//! The module graph of one crate, file by file, read from its sources: which files name
//! which through `crate::`, `super::`, `self::` and child-module paths, with re-exports
//! (`pub use a::B` in a file) followed to the file that defines the name. Not
//! cargo-modules: that builds rust-analyzer's crates, minutes on every clean CI run, for a
//! graph this reads in milliseconds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path → the module paths it names.
pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// The module path of a source file (`roles/rr.rs` → `roles::rr`, `guest/mod.rs` →
/// `guest`, `lib.rs` → ``).
fn module_path(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// Every `.rs` file under `src`, by module path, its text without the unit-test module
/// (`#[cfg(test)] mod tests`, whose `use super::*` is the file naming itself) and without
/// comment lines.
pub fn sources(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("src readable").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("source readable");
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
                let kept: Vec<&str> = code
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect();
                out.insert(module_path(src, &p), kept.join("\n"));
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths written in `line` (`a::b::C`, `crate::{x, y::z}` → `crate::x`, `crate::y::z`),
/// each as its segments.
fn paths_in(line: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts =
            is_ident(chars[i]) && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':'));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() && (is_ident(chars[j]) || chars[j] == ':') {
            j += 1;
        }
        let head: String = chars[i..j].iter().collect();
        if head.ends_with("::") && chars.get(j) == Some(&'{') {
            let (mut depth, mut k, mut items, mut cur) = (0, j + 1, Vec::new(), String::new());
            while k < chars.len() {
                match chars[k] {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(std::mem::take(&mut cur)),
                    c => cur.push(c),
                }
                k += 1;
            }
            items.push(cur);
            for it in items {
                let first: String = it
                    .trim()
                    .chars()
                    .take_while(|c| is_ident(*c) || *c == ':')
                    .collect();
                out.push(format!("{head}{first}"));
            }
            j = k;
        } else if head.ends_with("::") && chars.get(j) == Some(&'*') {
            // A glob (`use super::*`) names the module itself.
            out.push(format!("{head}*"));
            j += 1;
        } else if head.contains("::") {
            out.push(head);
        }
        i = j.max(i + 1);
    }
    out.into_iter()
        .map(|p| {
            p.split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .filter(|v: &Vec<String>| v.len() > 1)
        .collect()
}

/// The module a path starts from, written in module `from` whose child modules are
/// `children`, and the segments left: `None` for a path into another crate or `std`.
fn start(
    from: &str,
    path: &[String],
    children: &BTreeSet<String>,
) -> Option<(Vec<String>, Vec<String>)> {
    let here: Vec<String> = from
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    match path[0].as_str() {
        "crate" => Some((Vec::new(), path[1..].to_vec())),
        "self" => Some((here, path[1..].to_vec())),
        "super" => {
            let mut base = here;
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            Some((base, rest.to_vec()))
        }
        c if children.contains(c) => Some((here, path.to_vec())),
        _ => None,
    }
}

/// The deepest module of `modules` a path reaches, a re-exported name followed to where it
/// is defined; with it, the module that re-exported the name (a file that names
/// `crate::a::Thing` depends on `a`'s `pub use`, not only on where `Thing` lives).
fn resolve(
    modules: &BTreeSet<String>,
    aliases: &BTreeMap<(String, String), String>,
    mut cur: Vec<String>,
    rest: &[String],
) -> (String, Option<String>) {
    for s in rest {
        let mut next = cur.clone();
        next.push(s.clone());
        if modules.contains(&next.join("::")) {
            cur = next;
            continue;
        }
        // A glob names the module itself, not what its own globs re-export.
        if let Some(a) = aliases
            .get(&(cur.join("::"), s.clone()))
            .filter(|_| s != "*")
        {
            return (a.clone(), Some(cur.join("::")));
        }
        break;
    }
    (cur.join("::"), None)
}

/// Whether module `a` encloses module `b` (the crate root encloses every module): a child
/// naming its parent's re-export is the parent's façade, not a circle.
fn encloses(a: &str, b: &str) -> bool {
    a.is_empty() || b.starts_with(&format!("{a}::"))
}

/// The child modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn children(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.to_string())
        })
        .collect()
}

/// The re-export statements of a text (`pub use …;`, `pub(crate) use …;`) and the text
/// without them.
fn split_reexports(text: &str) -> (Vec<String>, String) {
    let (mut found, mut rest, mut at) = (Vec::new(), String::new(), 0);
    while let Some(i) = ["pub use ", "pub(crate) use ", "pub(super) use "]
        .iter()
        .filter_map(|k| text[at..].find(k))
        .min()
    {
        let begin = at + i;
        let end = text[begin..].find(';').map_or(text.len(), |e| begin + e);
        rest.push_str(&text[at..begin]);
        found.push(text[begin..end].replace('\n', " "));
        at = (end + 1).min(text.len());
    }
    rest.push_str(&text[at..]);
    (found, rest.replace('\n', " "))
}

/// The crate's file graph: each module, the other modules it names.
pub fn edges(sources: &BTreeMap<String, String>) -> Edges {
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    let kids: BTreeMap<&String, BTreeSet<String>> =
        sources.iter().map(|(m, t)| (m, children(t))).collect();
    // A re-export `pub use a::B` in module M: a path reaching M then naming B goes where
    // `a` leads. Statements are joined so a re-export over several lines reads whole.
    let split: BTreeMap<&String, (Vec<String>, String)> = sources
        .iter()
        .map(|(m, t)| (m, split_reexports(t)))
        .collect();
    let mut aliases = BTreeMap::new();
    for (m, (reexports, _)) in &split {
        for p in reexports.iter().flat_map(|r| paths_in(r)) {
            let Some((base, rest)) = start(m, &p, &kids[m]) else {
                continue;
            };
            let Some((name, pre)) = rest.split_last() else {
                continue;
            };
            let (target, _) = resolve(&modules, &BTreeMap::new(), base, pre);
            aliases.insert(((*m).clone(), name.clone()), target);
        }
    }
    let mut out = Edges::new();
    for (m, (_, code)) in &split {
        let to = out.entry((*m).clone()).or_default();
        for p in paths_in(code) {
            let Some((base, rest)) = start(m, &p, &kids[m]) else {
                continue;
            };
            let (t, via) = resolve(&modules, &aliases, base, &rest);
            for t in std::iter::once(t).chain(via.filter(|v| !encloses(v, m))) {
                if &t != *m {
                    to.insert(t);
                }
            }
        }
    }
    out
}
