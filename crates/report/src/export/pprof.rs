//! The session's stacks as a pprof profile: a gzip-compressed
//! `perftools.profiles.Profile` (profile.proto of google/pprof), which
//! `go tool pprof`, Grafana Pyroscope and Parca read.
//!
//! ```text
//! on-CPU stacks (samples) ─┐
//!                          ├─► one Sample per (thread, stack): values
//! off-CPU stacks (µs→ns) ──┘   [samples, off_cpu ns], labels thread/pid/tid/role
//!      frames ──► Location (one per distinct folded frame) ──► Line ──► Function
//!                 (name; file and line for Python frames)
//!      all strings ──► string_table ("" first) ──► Profile ──► gzip
//! ```
//!
//! Two sample types: `samples`/`count` (on-CPU, the default shown) and
//! `off_cpu`/`nanoseconds`; a stack seen only on CPU has 0 off-CPU time
//! and the other way round. The thread's comm is a label, not a frame. No
//! mappings or addresses: the frames are symbolized already.
use std::{collections::BTreeMap, io::Write};

use flate2::{Compression, write::GzEncoder};

use super::{
    ExportError, Frame, Stack, StackThread, ThreadRoles, exporter, micros_to_nanos, parse_frame,
    protobuf::Message, stacks,
};
use storprof_session::load::Session;

const FORMAT: &str = "pprof";

/// Field numbers of profile.proto.
mod field {
    pub mod profile {
        pub const SAMPLE_TYPE: u32 = 1;
        pub const SAMPLE: u32 = 2;
        pub const LOCATION: u32 = 4;
        pub const FUNCTION: u32 = 5;
        pub const STRING_TABLE: u32 = 6;
        pub const TIME_NANOS: u32 = 9;
        pub const DURATION_NANOS: u32 = 10;
        pub const PERIOD_TYPE: u32 = 11;
        pub const PERIOD: u32 = 12;
        pub const COMMENT: u32 = 13;
        pub const DEFAULT_SAMPLE_TYPE: u32 = 14;
    }
    pub mod value_type {
        pub const TYPE: u32 = 1;
        pub const UNIT: u32 = 2;
    }
    pub mod sample {
        pub const LOCATION_ID: u32 = 1;
        pub const VALUE: u32 = 2;
        pub const LABEL: u32 = 3;
    }
    pub mod label {
        pub const KEY: u32 = 1;
        pub const STR: u32 = 2;
        pub const NUM: u32 = 3;
    }
    pub mod location {
        pub const ID: u32 = 1;
        pub const LINE: u32 = 4;
    }
    pub mod line {
        pub const FUNCTION_ID: u32 = 1;
        pub const LINE: u32 = 2;
    }
    pub mod function {
        pub const ID: u32 = 1;
        pub const NAME: u32 = 2;
        pub const SYSTEM_NAME: u32 = 3;
        pub const FILENAME: u32 = 4;
    }
}

/// The string table: index 0 is "", each string stored once.
#[derive(Default)]
struct Strings<'a> {
    index: BTreeMap<&'a str, i64>,
    table: Vec<&'a str>,
}

impl<'a> Strings<'a> {
    fn new() -> Self {
        let mut s = Self::default();
        s.id("");
        s
    }

    fn id(&mut self, s: &'a str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s);
        self.index.insert(s, i);
        i
    }
}

/// Ids (from 1, in order of first use) of distinct keys.
struct Ids<K: Ord> {
    ids: BTreeMap<K, u64>,
    order: Vec<K>,
}

impl<K: Ord + Clone> Ids<K> {
    fn new() -> Self {
        Self {
            ids: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    fn id(&mut self, key: K) -> u64 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        self.order.push(key.clone());
        let id = self.order.len() as u64;
        self.ids.insert(key, id);
        id
    }
}

/// Sample values of one (thread, stack): on-CPU samples, off-CPU ns.
type Values = [u64; 2];

fn value_type(strings: &mut Strings<'_>, kind: &'static str, unit: &'static str) -> Message {
    let mut m = Message::new();
    m.int(field::value_type::TYPE, strings.id(kind))
        .int(field::value_type::UNIT, strings.id(unit));
    m
}

fn to_i64(value: u64, what: &str) -> Result<i64, ExportError> {
    i64::try_from(value).map_err(|_| ExportError::TooLarge {
        format: FORMAT,
        what: what.to_string(),
        value,
    })
}

/// The gzip-compressed profile of `session`; `roles` label the threads.
pub fn render(session: &Session, roles: &ThreadRoles) -> Result<Vec<u8>, ExportError> {
    let encoded = encode(session, roles)?;
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&encoded)
        .and_then(|()| gz.finish())
        .map_err(|source| ExportError::Encode {
            format: FORMAT,
            source,
        })
}

/// The profile of `session` before compression.
fn encode(session: &Session, roles: &ThreadRoles) -> Result<Vec<u8>, ExportError> {
    // (thread, frames outermost first) → values, in a stable order.
    let mut samples: BTreeMap<(StackThread<'_>, Vec<&str>), Values> = BTreeMap::new();
    let oncpu = stacks(&session.oncpu_threads, &session.oncpu);
    let offcpu = stacks(&session.offcpu_threads, &session.offcpu);
    for (slot, list) in [(0, oncpu), (1, offcpu)] {
        for Stack {
            thread,
            mut frames,
            count,
        } in list
        {
            let value = if slot == 1 {
                micros_to_nanos(count, FORMAT)?
            } else {
                count
            };
            // A stack of the comm alone (no frame resolved): the comm
            // stands in, so the time still shows under some function.
            if frames.is_empty() {
                frames.push(thread.comm);
            }
            let values = samples.entry((thread, frames)).or_default();
            values[slot] =
                values[slot]
                    .checked_add(value)
                    .ok_or_else(|| ExportError::TooLarge {
                        format: FORMAT,
                        what: "a stack's total".to_string(),
                        value,
                    })?;
        }
    }

    let mut strings = Strings::new();
    let mut functions: Ids<(&str, Option<&str>)> = Ids::new();
    let mut locations: Ids<&str> = Ids::new();
    let mut profile = Message::new();
    let sample_types = [("samples", "count"), ("off_cpu", "nanoseconds")];
    for (kind, unit) in sample_types {
        let vt = value_type(&mut strings, kind, unit);
        profile.message(field::profile::SAMPLE_TYPE, &vt);
    }
    let [thread_key, pid_key, tid_key, role_key] =
        ["thread", "pid", "tid", "role"].map(|k| strings.id(k));
    for ((thread, frames), values) in &samples {
        let mut sample = Message::new();
        // Leaf first, as profile.proto orders location ids.
        let ids: Vec<u64> = frames.iter().rev().map(|f| locations.id(f)).collect();
        sample.packed(field::sample::LOCATION_ID, ids);
        let values = [
            to_i64(values[0], "an on-CPU sample count")?,
            to_i64(values[1], "an off-CPU time")?,
        ];
        sample.packed(field::sample::VALUE, values.map(|v| v as u64));
        let mut labels = vec![(thread_key, Some(strings.id(thread.comm)), None)];
        if let Some((pid, tid)) = thread.ids {
            labels.push((pid_key, None, Some(i64::from(pid))));
            labels.push((tid_key, None, Some(i64::from(tid))));
            if let Some(role) = roles.get(&(pid, tid)) {
                labels.push((role_key, Some(strings.id(role)), None));
            }
        }
        for (key, text, number) in labels {
            let mut label = Message::new();
            label.int(field::label::KEY, key);
            if let Some(text) = text {
                label.int(field::label::STR, text);
            }
            if let Some(number) = number {
                label.int(field::label::NUM, number);
            }
            sample.message(field::sample::LABEL, &label);
        }
        profile.message(field::profile::SAMPLE, &sample);
    }
    for (i, raw) in locations.order.iter().enumerate() {
        let Frame {
            function,
            file,
            line,
        } = parse_frame(raw);
        let mut l = Message::new();
        l.uint(field::line::FUNCTION_ID, functions.id((function, file)));
        if let Some(line) = line {
            l.int(field::line::LINE, to_i64(line, "a line number")?);
        }
        let mut location = Message::new();
        location
            .uint(field::location::ID, i as u64 + 1)
            .message(field::location::LINE, &l);
        profile.message(field::profile::LOCATION, &location);
    }
    for (i, (name, file)) in functions.order.iter().enumerate() {
        let mut f = Message::new();
        let name = strings.id(name);
        f.uint(field::function::ID, i as u64 + 1)
            .int(field::function::NAME, name)
            .int(field::function::SYSTEM_NAME, name);
        if let Some(file) = file {
            f.int(field::function::FILENAME, strings.id(file));
        }
        profile.message(field::profile::FUNCTION, &f);
    }

    let info = &session.info;
    let comment = format!(
        "{} export of {}; off_cpu: blocked time of offcpu.folded (recorded in µs)",
        exporter(),
        session.dir.display()
    );
    let comment = strings.id(&comment);
    let default_type = strings.id("samples");
    let period_type = value_type(&mut strings, "cpu", "nanoseconds");
    profile
        .int(
            field::profile::TIME_NANOS,
            to_i64(info.start_unix_ns, "the start time")?,
        )
        .int(
            field::profile::DURATION_NANOS,
            to_i64(
                info.end_unix_ns.saturating_sub(info.start_unix_ns),
                "the duration",
            )?,
        )
        .message(field::profile::PERIOD_TYPE, &period_type)
        .int(
            field::profile::PERIOD,
            to_i64(
                1_000_000_000u64.checked_div(info.freq_hz).unwrap_or(0),
                "the sampling period",
            )?,
        )
        .packed(field::profile::COMMENT, [comment as u64])
        .int(field::profile::DEFAULT_SAMPLE_TYPE, default_type);
    for s in &strings.table {
        profile.string(field::profile::STRING_TABLE, s);
    }
    Ok(profile.into_bytes())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use storprof_session::load::FoldedStacks;

    fn session() -> Session {
        let folded = |lines: &[(&str, u64)]| FoldedStacks {
            stacks: lines.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
        };
        Session {
            oncpu: folded(&[("py;main (a.py:3);work (a.py:9)", 5), ("py", 1)]),
            offcpu: folded(&[
                ("py;main (a.py:3);work (a.py:9)", 2),
                ("py;main (a.py:3);read_[k]", 7),
            ]),
            ..Session::default()
        }
    }

    #[test]
    fn the_output_is_gzip_and_stacks_share_locations_and_functions() {
        let gz = render(&session(), &ThreadRoles::new()).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(raw, encode(&session(), &ThreadRoles::new()).unwrap());
        let text = String::from_utf8_lossy(&raw);
        // Each string once: "main" is one function although two stacks hold it.
        assert_eq!(text.matches("main").count(), 1, "{text}");
        assert_eq!(text.matches("a.py").count(), 1, "{text}");
        assert!(text.contains("off_cpu") && text.contains("nanoseconds"));
    }

    #[test]
    fn on_and_off_cpu_of_one_stack_make_one_sample() {
        let raw = encode(&session(), &ThreadRoles::new()).unwrap();
        // Three distinct (thread, stack) keys: the shared stack, the
        // comm-only one, and the off-CPU-only one; samples are field 2.
        let mut samples = 0;
        let mut i = 0;
        while i < raw.len() {
            let key = raw[i];
            i += 1;
            let (len, used) = {
                let mut v = 0u64;
                let mut shift = 0;
                let mut n = 0;
                loop {
                    let b = raw[i + n];
                    v |= u64::from(b & 0x7f) << shift;
                    shift += 7;
                    n += 1;
                    if b < 0x80 {
                        break;
                    }
                }
                (v as usize, n)
            };
            i += used;
            match key & 7 {
                2 => {
                    if key >> 3 == 2 {
                        samples += 1;
                    }
                    i += len;
                }
                // A varint's value was read as the "length": nothing more to skip.
                0 => {}
                other => panic!("unexpected wire type {other}"),
            }
        }
        assert_eq!(samples, 3);
    }
}
