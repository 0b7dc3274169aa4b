//! tracefs: mounting it when missing (aya never does), checking that
//! tracepoints exist and that their record layout matches the offsets the
//! probes read.
use std::{collections::BTreeMap, path::Path};

/// Where storprof mounts and looks for tracefs.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Makes sure tracefs is mounted at [`TRACEFS`]; mounts it when not.
/// Returns a line saying what was found or done.
pub fn ensure_mounted() -> Result<String, String> {
    let events = Path::new(TRACEFS).join("events");
    if events.is_dir() {
        return Ok(format!("mounted at {TRACEFS}"));
    }
    let target = c"/sys/kernel/tracing";
    // SAFETY: all pointers are valid NUL-terminated strings; data is null.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        return Err(format!(
            "not mounted and `mount -t tracefs nodev {TRACEFS}` failed: {err}"
        ));
    }
    if events.is_dir() {
        Ok(format!("mounted it at {TRACEFS}"))
    } else {
        Err(format!("mounted {TRACEFS} but it has no events/ directory"))
    }
}

/// True when `events/<cat>/<event>/id` exists.
pub fn tracepoint_exists(category: &str, event: &str) -> bool {
    Path::new(TRACEFS)
        .join("events")
        .join(category)
        .join(event)
        .join("id")
        .exists()
}

/// The category of tracepoint `event` (`sched` for `sched_waking`), for a
/// raw tracepoint, which is attached by event name alone.
pub fn event_category(event: &str) -> Option<String> {
    std::fs::read_dir(Path::new(TRACEFS).join("events"))
        .ok()?
        .flatten()
        .find(|dir| dir.path().join(event).join("id").exists())
        .and_then(|dir| dir.file_name().into_string().ok())
}

/// Field name → offset, parsed from a tracepoint `format` file.
pub fn parse_format_offsets(format: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in format.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';');
        let decl = parts.next().unwrap_or("").trim();
        let offset = parts
            .map(str::trim)
            .find_map(|p| p.strip_prefix("offset:"))
            .and_then(|o| o.trim().parse::<usize>().ok());
        // "char rwbs[10]" → "rwbs"; "__data_loc char[] cmd" → "cmd".
        let name = decl
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .split('[')
            .next()
            .unwrap_or("");
        if let (false, Some(offset)) = (name.is_empty(), offset) {
            out.insert(name.to_string(), offset);
        }
    }
    out
}

/// Checks each `(category, event, field, offset)`; returns one
/// `"cat:event.field: ..."` line per mismatch (missing events are left to
/// [`tracepoint_exists`]).
pub fn check_fields(fields: &[(&str, &str, &str, usize)]) -> Vec<String> {
    let mut problems = Vec::new();
    for &(cat, event, field, offset) in fields {
        let path = Path::new(TRACEFS)
            .join("events")
            .join(cat)
            .join(event)
            .join("format");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        match parse_format_offsets(&text).get(field) {
            Some(&found) if found == offset => {}
            Some(&found) => problems.push(format!(
                "{cat}:{event}.{field}: expected offset {offset}, kernel has {found}"
            )),
            None => problems.push(format!("{cat}:{event}.{field}: field missing")),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_format_file() {
        let format = "name: block_rq_issue\nID: 1234\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n\
\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n\nprint fmt: \"%d\"\n";
        let offsets = parse_format_offsets(format);
        assert_eq!(offsets.get("common_type"), Some(&0));
        assert_eq!(offsets.get("dev"), Some(&8));
        assert_eq!(offsets.get("rwbs"), Some(&34));
        assert_eq!(offsets.get("cmd"), Some(&60));
    }
}
