//! `storprof doctor`: runs [`crate::doctor::run`]'s checks, one line each.
use crate::cli::{DoctorArgs, exit};

/// Runs `storprof doctor`: prints one line per check; 0 when all pass.
pub fn run(_args: &DoctorArgs) -> anyhow::Result<i32> {
    let checks = crate::doctor::run(|c| println!("{c}"));
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed == 0 {
        println!("all {} checks passed", checks.len());
        Ok(exit::OK)
    } else {
        println!("{failed} of {} checks failed", checks.len());
        // SAFETY: geteuid has no preconditions.
        Ok(if unsafe { libc::geteuid() } != 0 {
            exit::USAGE
        } else {
            exit::ERROR
        })
    }
}
