//! `storprof doctor`: runs [`crate::doctor::run`]'s checks, one line each
//! (or one JSON object with `--json`).
use crate::cli::{DoctorArgs, exit};

/// Runs `storprof doctor`: prints one line per check (or JSON); 0 when
/// all pass.
pub fn run(args: &DoctorArgs) -> anyhow::Result<i32> {
    let checks = crate::doctor::run(|c| {
        if !args.json {
            println!("{c}");
        }
    });
    let failed = checks.iter().filter(|c| !c.ok).count();
    if args.json {
        let out = serde_json::json!({ "ok": failed == 0, "checks": checks });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if failed == 0 {
        println!("all {} checks passed", checks.len());
    } else {
        println!("{failed} of {} checks failed", checks.len());
    }
    if failed == 0 {
        Ok(exit::OK)
    } else {
        // SAFETY: geteuid has no preconditions.
        Ok(if unsafe { libc::geteuid() } != 0 {
            exit::USAGE
        } else {
            exit::ERROR
        })
    }
}
