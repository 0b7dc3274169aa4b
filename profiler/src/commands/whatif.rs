//! `storprof whatif DIR|BUNDLE [--lever NAME[=K]]... [--json]`: loads a
//! session, analyses it, fits the pipeline model of
//! `storprof_analysis::whatif` and prints one projection per lever (a
//! table, or a JSON list).
use std::fmt::Write as _;

use super::load_thresholds;
use crate::cli::{WhatifArgs, exit};
use storprof_analysis::whatif::{self, Lever, LeverKind, Projection, REPORT_LEVERS, Today};

/// Parses `NAME` or `NAME=K`; Err: the usage error, in words.
pub fn parse_lever(text: &str) -> Result<Lever, String> {
    let (name, factor) = match text.split_once('=') {
        Some((n, k)) => (n, Some(k)),
        None => (text, None),
    };
    let Some(kind) = LeverKind::parse(name) else {
        let names: Vec<&str> = LeverKind::ALL.iter().map(|k| k.name()).collect();
        return Err(format!(
            "--lever {text}: unknown lever {name:?} (one of {})",
            names.join(", ")
        ));
    };
    let factor = match (kind, factor) {
        (LeverKind::Cache | LeverKind::Lock, None) => 1.0,
        (LeverKind::Cache | LeverKind::Lock, Some(_)) => {
            return Err(format!(
                "--lever {text}: {name} takes no factor (it removes a cost)"
            ));
        }
        (_, None) => 2.0,
        (_, Some(k)) => match k.parse::<f64>() {
            Ok(k) if k.is_finite() && k > 0.0 => k,
            _ => {
                return Err(format!(
                    "--lever {text}: the factor must be a number above 0 (× today's value)"
                ));
            }
        },
    };
    Ok(Lever { kind, factor })
}

/// The projections from `today` as a table.
pub fn render_table(today: &Today, projections: &[Projection]) -> String {
    let mut out = String::new();
    let p = today;
    let _ = writeln!(
        out,
        "what would help (a model, docs/src/whatif.md): today a step of {:.3} s = compute {:.3} s + the consumer's own {:.3} s + data wait {:.3} s (AU {:.1}% as compute / step), {:.2} steps/s",
        p.step_s, p.compute_s, p.overhead_s, p.wait_s, p.au_percentage, p.steps_per_s
    );
    let _ = writeln!(
        out,
        "{:<18} {:>9} {:>13} {:>9}  why",
        "lever", "AU", "range", "steps/s"
    );
    for p in projections {
        match (p.projected_au_percentage, p.projected_steps_per_s) {
            (Some(au), Some(rate)) => {
                let _ = writeln!(
                    out,
                    "{:<18} {:>8.1}% {:>13} {:>9.2}  {}",
                    p.label(),
                    au,
                    p.range_text(),
                    rate,
                    p.reason
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{:<18} {:>9} {:>13} {:>9}  {}",
                    p.label(),
                    "—",
                    "—",
                    "—",
                    p.reason
                );
            }
        }
    }
    out
}

/// Runs `storprof whatif`.
pub fn run(args: &WhatifArgs) -> anyhow::Result<i32> {
    let thresholds = load_thresholds(args.thresholds.thresholds.as_deref())?;
    let mut levers = Vec::new();
    for text in &args.levers {
        match parse_lever(text) {
            Ok(l) => levers.push(l),
            Err(why) => {
                eprintln!("storprof: error: {why}");
                return Ok(exit::USAGE);
            }
        }
    }
    if levers.is_empty() {
        levers = REPORT_LEVERS.to_vec();
    }
    let session = match super::load_session_arg(&args.dir)? {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let analysis = storprof_analysis::analyze(&session, &thresholds);
    let table = whatif::table(&session, &analysis, &levers);
    let (Some(today), None) = (&table.today, &table.none) else {
        let why = table.none.as_deref().unwrap_or("no projection");
        eprintln!("storprof: {why}");
        return Ok(exit::ERROR);
    };
    let projections = &table.projections;
    if args.json {
        println!("{}", serde_json::to_string_pretty(projections)?);
    } else {
        print!("{}", render_table(today, projections));
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levers_parse_with_or_without_a_factor_and_bad_ones_are_refused() {
        assert_eq!(
            parse_lever("storage=4"),
            Ok(Lever {
                kind: LeverKind::Storage,
                factor: 4.0
            })
        );
        assert_eq!(parse_lever("read-threads").map(|l| l.factor), Ok(2.0));
        assert_eq!(parse_lever("cache").map(|l| l.kind), Ok(LeverKind::Cache));
        for bad in [
            "disk=2",
            "storage=0",
            "storage=-1",
            "storage=x",
            "cache=2",
            "computation=inf",
        ] {
            assert!(parse_lever(bad).is_err(), "{bad}");
        }
        assert!(parse_lever("disk").unwrap_err().contains("read-threads"));
    }
}
