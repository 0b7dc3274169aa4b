//! `--thresholds FILE`, read strictly, and `storprof thresholds`.
//!
//! ```text
//! FILE (JSON object) ──parse──► every key known (else: did you mean ...),
//!                               every value a number in its range
//!                    ──► Thresholds (what differs from the defaults is
//!                        recorded in verdict.json by storprof_report::diagnosis)
//! ```
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use storprof_analysis::{Thresholds, thresholds::valid_range};

use storprof_report::diagnosis::{threshold_overrides, threshold_values};

/// Why a thresholds file was refused. All are usage errors (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ThresholdsError {
    #[error("cannot read thresholds file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a JSON object of thresholds ({reason})")]
    NotAnObject { path: PathBuf, reason: String },
    #[error("{path}: unknown threshold `{key}`{hint} (`storprof thresholds` lists them)")]
    UnknownKey {
        path: PathBuf,
        key: String,
        hint: String,
    },
    #[error("{path}: `{key}` must be a number{what}, not {value}")]
    NotANumber {
        path: PathBuf,
        key: String,
        what: &'static str,
        value: String,
    },
    #[error("{path}: `{key}` = {value}, but it must be {range}")]
    OutOfRange {
        path: PathBuf,
        key: String,
        value: f64,
        /// "within 0..=1", or "≥ 0" for a range without an upper end.
        range: String,
    },
}

/// The defaults as a JSON object (key → value), in the struct's order.
fn defaults() -> Map<String, Value> {
    threshold_values(&Thresholds::default())
}

fn did_you_mean<'a>(key: &str, known: impl Iterator<Item = &'a String>) -> String {
    known
        .map(|k| (strsim::levenshtein(key, k), k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min()
        .map_or(String::new(), |(_, k)| format!("; did you mean `{k}`?"))
}

/// Parses a thresholds file's text: every key must be a threshold and
/// every value a number in its range.
pub fn parse(text: &str, path: &Path) -> Result<Thresholds, ThresholdsError> {
    let not_object = |reason: String| ThresholdsError::NotAnObject {
        path: path.to_path_buf(),
        reason,
    };
    let given: Map<String, Value> = match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        Ok(other) => return Err(not_object(format!("found {}", json_kind(&other)))),
        Err(e) => return Err(not_object(e.to_string())),
    };
    let defaults = defaults();
    let mut merged = defaults.clone();
    for (key, value) in given {
        let Some(default) = defaults.get(&key) else {
            return Err(ThresholdsError::UnknownKey {
                path: path.to_path_buf(),
                hint: did_you_mean(&key, defaults.keys()),
                key,
            });
        };
        let integer = default.is_u64();
        let number = if integer {
            value.as_u64().map(|n| n as f64)
        } else {
            value.as_f64().filter(|x| x.is_finite())
        };
        let Some(number) = number else {
            return Err(ThresholdsError::NotANumber {
                path: path.to_path_buf(),
                key,
                what: if integer {
                    " (a whole number ≥ 0)"
                } else {
                    ""
                },
                value: value.to_string(),
            });
        };
        let range = valid_range(&key);
        if !range.contains(&number) {
            return Err(ThresholdsError::OutOfRange {
                path: path.to_path_buf(),
                key,
                value: number,
                range: if *range.end() == f64::MAX {
                    range_text(&range)
                } else {
                    format!("within {}", range_text(&range))
                },
            });
        }
        merged.insert(key, value);
    }
    serde_json::from_value(Value::Object(merged)).map_err(|e| not_object(e.to_string()))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A range as users read it: "0..=1", or "≥ 0" without an upper end.
fn range_text(r: &std::ops::RangeInclusive<f64>) -> String {
    if *r.end() == f64::MAX {
        format!("≥ {}", r.start())
    } else {
        format!("{}..={}", r.start(), r.end())
    }
}

/// Reads `--thresholds FILE` (None: the defaults, no overrides).
pub fn load(path: Option<&Path>) -> Result<Thresholds, ThresholdsError> {
    let Some(p) = path else {
        return Ok(Thresholds::default());
    };
    let text = std::fs::read_to_string(p).map_err(|source| ThresholdsError::Read {
        path: p.to_path_buf(),
        source,
    })?;
    parse(&text, p)
}

/// `storprof thresholds [--thresholds FILE] [--json]`: every key, its
/// value, default, range and where the value came from.
pub fn render(thresholds: &Thresholds, file: Option<&Path>, json: bool) -> String {
    let overrides = threshold_overrides(thresholds);
    let values = threshold_values(thresholds);
    let defaults = defaults();
    let source = |key: &str| match file {
        Some(f) if overrides.iter().any(|o| o.key == key) => f.display().to_string(),
        _ => "default".to_string(),
    };
    if json {
        let rows: Vec<Value> = values
            .iter()
            .map(|(k, v)| {
                let r = valid_range(k);
                serde_json::json!({
                    "key": k,
                    "value": v,
                    "default": defaults.get(k),
                    "min": r.start(),
                    "max": (*r.end() < f64::MAX).then(|| *r.end()),
                    "source": source(k),
                })
            })
            .collect();
        return serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n";
    }
    let width = values.keys().map(String::len).max().unwrap_or(0);
    let mut out = format!(
        "{:<width$}  {:>12}  {:>12}  {:<14}  source\n",
        "key", "value", "default", "range"
    );
    for (k, v) in &values {
        let r = valid_range(k);
        let d = defaults.get(k).map_or(String::new(), Value::to_string);
        out.push_str(&format!(
            "{k:<width$}  {:>12}  {d:>12}  {:<14}  {}\n",
            v.to_string(),
            range_text(&r),
            source(k)
        ));
    }
    out.push_str("\nWhat each one means: THRESHOLDS.md (profiler/THRESHOLDS.md in the source).\n");
    out
}

/// `storprof thresholds`.
pub fn run(args: &crate::cli::ThresholdsArgs) -> anyhow::Result<i32> {
    let file = args.thresholds.thresholds.as_deref();
    let thresholds = super::load_thresholds(file)?;
    print!("{}", render(&thresholds, file, args.json));
    Ok(crate::cli::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("t.json")
    }

    #[test]
    fn unknown_keys_are_refused_with_the_nearest_known_one() {
        let e = parse(r#"{"compute_bound_au_percentag": 70}"#, p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.json: unknown threshold `compute_bound_au_percentag`; did you mean \
             `compute_bound_au_percentage`? (`storprof thresholds` lists them)"
        );
        let e = parse(r#"{"zzz": 1}"#, p()).unwrap_err();
        assert!(!e.to_string().contains("did you mean"), "{e}");
    }

    #[test]
    fn values_out_of_range_or_of_the_wrong_kind_are_refused() {
        let e = parse(r#"{"lock_futex_share": -0.2}"#, p()).unwrap_err();
        assert!(matches!(e, ThresholdsError::OutOfRange { .. }), "{e}");
        let e = parse(r#"{"lock_futex_share": 1.5}"#, p()).unwrap_err();
        assert!(e.to_string().contains("must be within 0..=1"), "{e}");
        let e = parse(r#"{"compute_bound_au_percentage": 120}"#, p()).unwrap_err();
        assert!(e.to_string().contains("must be within 0..=100"), "{e}");
        let e = parse(r#"{"stall_s": "60"}"#, p()).unwrap_err();
        assert!(matches!(e, ThresholdsError::NotANumber { .. }), "{e}");
        let e = parse(r#"{"consumer_min_wakes": 2.5}"#, p()).unwrap_err();
        assert!(e.to_string().contains("whole number"), "{e}");
        let e = parse("[1]", p()).unwrap_err();
        assert!(e.to_string().contains("found an array"), "{e}");
    }

    #[test]
    fn overrides_are_listed_with_their_defaults() {
        let t = parse(r#"{"compute_bound_au_percentage": 70, "stall_s": 60}"#, p()).unwrap();
        let o = threshold_overrides(&t);
        assert_eq!(t.compute_bound_au_percentage, 70.0);
        // stall_s is given at its default: not an override.
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].key, "compute_bound_au_percentage");
        assert_eq!(
            o[0].default,
            Thresholds::default().compute_bound_au_percentage
        );
        let t = parse("{}", p()).unwrap();
        assert_eq!(t, Thresholds::default());
        assert!(threshold_overrides(&t).is_empty());
    }

    /// Every default lies in its own range.
    #[test]
    fn defaults_are_in_range() {
        for (k, v) in defaults() {
            let x = v.as_f64().unwrap();
            assert!(valid_range(&k).contains(&x), "{k} = {x}");
        }
    }
}
