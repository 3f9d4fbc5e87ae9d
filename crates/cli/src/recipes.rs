//! The recipes in `recipes/`, built into the binary: `virtperf run` without a spec runs
//! the quickstart, `virtperf run NAME` any of them by name (so a binary copied into a guest
//! or onto a host without the repository has them), and `virtperf run --list` names them.

use std::path::Path;

use anyhow::{Context, Result};
use virtperf_experiment::spec::{self, Spec};

/// Each recipe's name (its file name without `.toml`) and text. A test checks that every
/// file in `recipes/` is here.
pub const RECIPES: &[(&str, &str)] = &[
    (
        "quickstart",
        include_str!("../../../recipes/quickstart.toml"),
    ),
    ("flows", include_str!("../../../recipes/flows.toml")),
    (
        "halt-polling",
        include_str!("../../../recipes/halt-polling.toml"),
    ),
    (
        "rr-under-load",
        include_str!("../../../recipes/rr-under-load.toml"),
    ),
    (
        "seed0-http-downloads",
        include_str!("../../../recipes/seed0-http-downloads.toml"),
    ),
    (
        "seed1-bandwidth",
        include_str!("../../../recipes/seed1-bandwidth.toml"),
    ),
    (
        "seed2-bulk-1gib",
        include_str!("../../../recipes/seed2-bulk-1gib.toml"),
    ),
    (
        "seed2-virtio-rings",
        include_str!("../../../recipes/seed2-virtio-rings.toml"),
    ),
    (
        "seed3-netperf-sweep",
        include_str!("../../../recipes/seed3-netperf-sweep.toml"),
    ),
    (
        "seed4-tickless-guest",
        include_str!("../../../recipes/seed4-tickless-guest.toml"),
    ),
];

/// The spec `path` names: a file, else a built-in recipe of that name; without a path,
/// the quickstart. A spec's error is a usage error (exit 2) naming where it is.
pub fn load(path: Option<&Path>) -> Result<Spec> {
    let (text, name) = match path {
        None => (RECIPES[0].1.to_string(), "built-in quickstart spec".to_string()),
        Some(p) if p.exists() => (
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read spec {}", p.display()))?,
            p.display().to_string(),
        ),
        Some(p) => match RECIPES.iter().find(|(n, _)| p.as_os_str() == *n) {
            Some((n, text)) => (text.to_string(), format!("built-in recipe {n}")),
            None => {
                return Err(crate::signals::exit(
                    crate::signals::code::USAGE,
                    format!(
                        "spec {} does not exist: give a spec file (examples in recipes/), or a built-in recipe by name (`virtperf run --list`)",
                        p.display()
                    ),
                ))
            }
        },
    };
    spec::parse(&text)
        .map_err(|e| crate::signals::exit(crate::signals::code::USAGE, format!("{name}: {e}")))
}

/// `virtperf run --list`: each built-in recipe with its description.
pub fn list() -> Result<()> {
    for (name, text) in RECIPES {
        let what = spec::parse(text)
            .ok()
            .and_then(|s| s.description)
            .unwrap_or_default();
        println!("{name:<22} {what}");
    }
    println!("\nrun one with `virtperf run NAME`; its text is recipes/NAME.toml in the repository");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file in recipes/ is built in (a new recipe cannot be forgotten here), and
    /// every built-in recipe parses.
    #[test]
    fn every_recipe_file_is_built_in_and_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("recipes/")
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_string_lossy()
                    .strip_suffix(".toml")
                    .map(str::to_string)
            })
            .collect();
        files.sort();
        let mut built: Vec<String> = RECIPES.iter().map(|(n, _)| n.to_string()).collect();
        built.sort();
        assert_eq!(files, built);
        for (name, text) in RECIPES {
            assert!(spec::parse(text).is_ok(), "{name}");
        }
    }
}
