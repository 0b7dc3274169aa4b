//! The layering rule of the crate, checked on its own sources: a module may
//! import (`crate::x` paths, in `use` lines or inline) only from modules of
//! a lower layer. The ranks below are the stack drawn in the crate docs;
//! modules of one rank do not import each other.
//!
//! ```text
//!  src/<module>/**.rs ─► comments stripped ─► every `crate::NAME` (also inside
//!  `crate::{a, b::c}`) ─► rank(NAME) < rank(<module>), else a violation
//! ```
use std::path::{Path, PathBuf};

/// Layer of each top-level module (lower is more basic).
const RANKS: &[(&str, u32)] = &[
    ("error", 0),
    ("storage", 1),
    ("format", 2),
    ("config", 3),
    ("metrics", 3),
    ("reader", 4),
    ("engine", 5),
    ("output", 5),
    ("run", 6),
    ("cli", 7),
];

fn rank(module: &str) -> Option<u32> {
    // `crate::BenchError` is the root's re-export of `error::BenchError`.
    let module = if module == "BenchError" {
        "error"
    } else {
        module
    };
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

/// The text of `src` without `//` comments (doc comments included: they
/// name other layers freely).
fn strip_comments(src: &str) -> String {
    src.lines()
        .map(|l| {
            // The first `//` outside a string literal ("s3://") starts a comment.
            let cut = l
                .match_indices("//")
                .map(|(i, _)| i)
                .find(|&i| l[..i].matches('"').count() % 2 == 0);
            cut.map_or(l, |i| &l[..i])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `src` refers to through `crate::`.
fn crate_imports(src: &str) -> Vec<String> {
    let text = strip_comments(src);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        // `storprof_bench::crate::` cannot occur, but `xcrate::` could.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::x, b, c::{..}}`: the first name of each item at depth 1.
            let mut depth = 1;
            let mut item_start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    c if depth == 1 && item_start && (c.is_alphanumeric() || c == '_') => {
                        name.push(c);
                        continue;
                    }
                    _ => {}
                }
                if !name.is_empty() {
                    out.push(std::mem::take(&mut name));
                    item_start = false;
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `(file, imported module)` pairs that break the rule.
fn violations(src_dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src_dir).unwrap_or(&f);
        let top = rel
            .components()
            .next()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string()
            })
            .unwrap_or_default();
        if matches!(top.as_str(), "lib" | "layers") {
            continue;
        }
        let Some(own) = rank(&top) else {
            bad.push((rel.display().to_string(), format!("<{top} has no layer>")));
            continue;
        };
        let src = std::fs::read_to_string(&f).unwrap_or_default();
        for m in crate_imports(&src) {
            if m == top {
                continue;
            }
            if rank(&m).is_none_or(|r| r >= own) {
                bad.push((rel.display().to_string(), m));
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_layer_imports_upward() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let bad = violations(&src);
        assert!(
            bad.is_empty(),
            "upward or sideways imports (file, module): {bad:?}; see the layers in src/lib.rs"
        );
    }

    #[test]
    fn finds_grouped_inline_and_root_imports() {
        let src = "use crate::{error::BenchError, format::{npz, parquet}, storage::Storage};\n\
                   // use crate::run::bench;\n\
                   let d = \"s3://x\"; let x = crate::engine::run_rank(); // crate::cli\n\
                   fn f() -> crate::BenchError {}";
        assert_eq!(
            crate_imports(src),
            ["error", "format", "storage", "engine", "BenchError"]
        );
        assert_eq!(rank("BenchError"), rank("error"));
    }

    #[test]
    fn an_upward_import_is_reported() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("engine")).unwrap();
        std::fs::write(
            d.path().join("engine/mod.rs"),
            "use crate::{metrics::RankEpoch, output::ts};\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("output.rs"),
            "use crate::metrics::RankEpoch;\n",
        )
        .unwrap();
        std::fs::write(d.path().join("metrics.rs"), "fn f() { crate::run::go() }\n").unwrap();
        assert_eq!(
            violations(d.path()),
            [
                ("engine/mod.rs".to_string(), "output".to_string()),
                ("metrics.rs".to_string(), "run".to_string()),
            ]
        );
    }
}
