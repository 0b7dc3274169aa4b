//! `storprof doctor`: checks what the probes need, one line per check, and
//! loads and attaches every probe. Exit 0 only when all of it works.
//!
//! Data flow: root → BTF → tracefs (mounted when missing) → each tracepoint
//! and its record layout → raw tracepoints → perf_event; then
//! `probes::ProbeSet` loads the object and attaches every family (nothing is
//! traced: the traced set stays empty) and detaches on drop.
use std::path::Path;

use storprof_record::probes::{self, Attach, PROGRAMS, ProbeOptions, ProbeSet, tracefs};

/// Result of one check.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mark = if self.ok { "ok  " } else { "FAIL" };
        write!(f, "[{mark}] {:<44} {}", self.name, self.detail)
    }
}

fn check(name: impl Into<String>, result: Result<String, String>) -> Check {
    match result {
        Ok(detail) => Check {
            name: name.into(),
            ok: true,
            detail,
        },
        Err(detail) => Check {
            name: name.into(),
            ok: false,
            detail,
        },
    }
}

/// Runs every check, calling `report` as each finishes. Returns all checks.
pub fn run(mut report: impl FnMut(&Check)) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut push = |c: Check, checks: &mut Vec<Check>| {
        report(&c);
        checks.push(c);
    };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    push(
        check(
            "root",
            if root {
                Ok("running as root".into())
            } else {
                Err("not root: run `sudo storprof doctor`".into())
            },
        ),
        &mut checks,
    );
    let facts = storprof_record::kernel::running_kernel_facts();
    push(
        check("kernel 5.17 or later", kernel_release_check(&facts.release)),
        &mut checks,
    );
    push(
        check(
            "BTF (/sys/kernel/btf/vmlinux)",
            if facts.btf {
                // What the CPython 3.10 thread match reads.
                probes::btf::task_fsbase_offset()
                    .map(|offset| format!("present; task_struct.thread.fsbase at byte {offset}"))
                    .map_err(|err| {
                        format!(
                            "present, but {err}: CPython 3.10 threads get the GIL holder's frames"
                        )
                    })
            } else {
                Err("missing: the kernel lacks CONFIG_DEBUG_INFO_BTF".into())
            },
        ),
        &mut checks,
    );
    let tracefs_ok = tracefs::ensure_mounted();
    let tracefs_up = tracefs_ok.is_ok();
    push(check("tracefs", tracefs_ok), &mut checks);
    if tracefs_up {
        let layout = tracefs::check_fields(probes::TRACEPOINT_FIELDS);
        for &(_, _, attach) in PROGRAMS {
            match attach {
                Attach::TracePoint(cat, event) => {
                    let name = format!("tracepoint {cat}:{event}");
                    let prefix = format!("{cat}:{event}.");
                    let result = if !tracefs::tracepoint_exists(cat, event) {
                        Err("not found".to_string())
                    } else if let Some(bad) = layout.iter().find(|l| l.starts_with(&prefix)) {
                        Err(bad.clone())
                    } else {
                        Ok("present, layout as expected".to_string())
                    };
                    push(check(name, result), &mut checks);
                }
                Attach::RawTracePoint(tp) => {
                    let result = match tracefs::event_category(tp) {
                        Some(category) => Ok(format!("present ({category}:{tp})")),
                        None => Err("event not found".to_string()),
                    };
                    push(check(format!("raw tracepoint {tp}"), result), &mut checks);
                }
                Attach::PerfCpuClock => {}
            }
        }
    }
    let perf = Path::new("/proc/sys/kernel/perf_event_paranoid").exists();
    push(
        check(
            "perf_event",
            if perf {
                Ok("perf_event_open available (attached below)".into())
            } else {
                Err("no /proc/sys/kernel/perf_event_paranoid: kernel without perf events".into())
            },
        ),
        &mut checks,
    );
    if !root {
        return checks;
    }
    match ProbeSet::load(&ProbeOptions::default()) {
        Err(err) => push(
            check("load probe object", Err(err.to_string())),
            &mut checks,
        ),
        Ok(mut set) => {
            push(
                check("load probe object", Ok("maps created".into())),
                &mut checks,
            );
            set.attach_all();
            for status in &set.status {
                let result = if status.attached {
                    Ok(status.note.clone())
                } else {
                    Err(status.note.clone())
                };
                push(
                    check(format!("attach {}", status.name), result),
                    &mut checks,
                );
            }
        }
    }
    checks
}

/// Whether kernel `release` (`uname -r`) has what the probes use: their
/// loops are `bpf_loop` callbacks (5.17).
fn kernel_release_check(release: &str) -> Result<String, String> {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) if (major, minor) >= (5, 17) => Ok(release.to_string()),
        (Some(_), Some(_)) => Err(format!(
            "{release}: the probes need 5.17 or later (bpf_loop)"
        )),
        _ => Err(format!("cannot read the kernel release {release:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_from_5_17_pass() {
        assert!(kernel_release_check("6.18.44-fc-v1272").is_ok());
        assert!(kernel_release_check("5.17.0").is_ok());
        assert!(kernel_release_check("5.15.0-91-generic").is_err());
        assert!(kernel_release_check("4.19.0").is_err());
        assert!(kernel_release_check("").is_err());
    }
}
