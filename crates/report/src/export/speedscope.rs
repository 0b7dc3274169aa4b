//! The session's stacks in speedscope's file format
//! (<https://www.speedscope.app/file-format-schema.json>): two `sampled`
//! profiles over one shared frame table.
//!
//! ```text
//! oncpu.folded  ──► profile "on-CPU"  (unit none: weights are samples)
//! offcpu.folded ──► profile "off-CPU" (unit nanoseconds: µs × 1000)
//!        frames ──► shared.frames (name; file and line for Python frames)
//! ```
//!
//! Each folded line is one sample, its stack outermost frame first with
//! the thread's comm at the root, as in storprof's flamegraph SVGs. The
//! samples keep the folded files' order, which is not time order:
//! speedscope's "Time Order" view is meaningless here, "Left Heavy" and
//! "Sandwich" are the views to use.
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{ExportError, exporter, micros_to_nanos, parse_frame, session_name};
use storprof_session::load::{FoldedStacks, Session};

const FORMAT: &str = "speedscope";

/// The schema URL every speedscope file names.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// Frame indices of distinct frame strings, in order of first use.
struct FrameTable<'a> {
    index: BTreeMap<&'a str, usize>,
    frames: Vec<Value>,
}

impl<'a> FrameTable<'a> {
    fn index(&mut self, raw: &'a str) -> usize {
        if let Some(&i) = self.index.get(raw) {
            return i;
        }
        let f = parse_frame(raw);
        let mut frame = json!({ "name": f.function });
        if let (Some(file), Some(map)) = (f.file, frame.as_object_mut()) {
            map.insert("file".into(), json!(file));
            if let Some(line) = f.line {
                map.insert("line".into(), json!(line));
            }
        }
        let i = self.frames.len();
        self.frames.push(frame);
        self.index.insert(raw, i);
        i
    }
}

/// One sampled profile of `folded`; `nanos` turns µs counts into ns.
fn sampled<'a>(
    frames: &mut FrameTable<'a>,
    folded: &'a FoldedStacks,
    name: &str,
    nanos: bool,
) -> Result<Value, ExportError> {
    let mut samples = Vec::new();
    let mut weights = Vec::new();
    let mut total = 0u64;
    for (line, count) in folded.stacks.iter().filter(|(_, n)| *n > 0) {
        let weight = if nanos {
            micros_to_nanos(*count, FORMAT)?
        } else {
            *count
        };
        total = total
            .checked_add(weight)
            .ok_or_else(|| ExportError::TooLarge {
                format: FORMAT,
                what: format!("the {name} total"),
                value: weight,
            })?;
        let stack: Vec<usize> = line.split(';').map(|f| frames.index(f)).collect();
        samples.push(stack);
        weights.push(weight);
    }
    Ok(json!({
        "type": "sampled",
        "name": name,
        "unit": if nanos { "nanoseconds" } else { "none" },
        "startValue": 0,
        "endValue": total,
        "samples": samples,
        "weights": weights,
    }))
}

/// The speedscope JSON of `session` (pretty-printed, with a final newline).
pub fn render(session: &Session) -> Result<Vec<u8>, ExportError> {
    let mut frames = FrameTable {
        index: BTreeMap::new(),
        frames: Vec::new(),
    };
    let oncpu = sampled(&mut frames, &session.oncpu, "on-CPU (samples)", false)?;
    let offcpu = sampled(&mut frames, &session.offcpu, "off-CPU (blocked time)", true)?;
    let name = match session.info.hostname.as_str() {
        "" => format!("storprof {}", session_name(session)),
        host => format!("storprof {} ({host})", session_name(session)),
    };
    let file = json!({
        "$schema": SCHEMA,
        "shared": { "frames": frames.frames },
        "profiles": [oncpu, offcpu],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": exporter(),
    });
    let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| ExportError::Encode {
        format: FORMAT,
        source: e.into(),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_shared_and_offcpu_weights_are_nanoseconds() {
        let folded = |lines: &[(&str, u64)]| FoldedStacks {
            stacks: lines.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
        };
        let session = Session {
            oncpu: folded(&[("py;main (a.py:3);work", 5), ("py;idle", 0)]),
            offcpu: folded(&[("py;main (a.py:3);read_[k]", 7)]),
            ..Session::default()
        };
        let v: Value = serde_json::from_slice(&render(&session).unwrap()).unwrap();
        assert_eq!(v["$schema"], SCHEMA);
        assert_eq!(
            v["shared"]["frames"],
            json!([{"name": "py"}, {"name": "main", "file": "a.py", "line": 3},
                   {"name": "work"}, {"name": "read_[k]"}])
        );
        assert_eq!(v["profiles"][0]["samples"], json!([[0, 1, 2]]));
        assert_eq!(v["profiles"][0]["endValue"], 5);
        assert_eq!(v["profiles"][1]["samples"], json!([[0, 1, 3]]));
        assert_eq!(v["profiles"][1]["weights"], json!([7000]));
        assert_eq!(v["profiles"][1]["unit"], "nanoseconds");
    }
}
