//! Flamegraph SVGs from folded stacks, with inferno as a library.
//!
//! ```text
//! FoldedStacks ──► sorted lines ──► inferno::flamegraph::from_lines ──► SVG
//! (before, after) ──► inferno::differential::from_readers ──► 2-column folded
//!                 ──► inferno::flamegraph (red = grew, blue = shrank) ──► SVG
//! ```
//!
//! Empty input gives a small SVG that says so, not an error: a session where
//! a probe did not run still gets its report.
use std::io::{self, Write};

use inferno::{
    differential,
    flamegraph::{self, Palette, color::BasicPalette},
};

use storprof_session::load::FoldedStacks;

/// Which folded file a flamegraph shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Kind {
    /// CPU samples (`oncpu.folded`), count name "samples".
    #[default]
    OnCpu,
    /// Blocked time (`offcpu.folded`), count name "us".
    OffCpu,
}

impl Kind {
    pub fn count_name(self) -> &'static str {
        match self {
            Kind::OnCpu => "samples",
            Kind::OffCpu => "us",
        }
    }

    pub fn file_stem(self) -> &'static str {
        match self {
            Kind::OnCpu => "oncpu",
            Kind::OffCpu => "offcpu",
        }
    }
}

/// Options of one flamegraph. Defaults: on-CPU, title from the kind, no
/// subtitle, not deterministic, compact XML.
#[derive(Clone, Debug, Default)]
pub struct FlamegraphOptions {
    pub kind: Kind,
    /// Default: "On-CPU flamegraph" / "Off-CPU flamegraph (blocked time)".
    pub title: Option<String>,
    pub subtitle: Option<String>,
    /// Stable colours and layout, pretty-printed XML without JavaScript:
    /// for golden tests and diffs.
    pub deterministic: bool,
}

impl FlamegraphOptions {
    pub fn new(kind: Kind) -> Self {
        Self {
            kind,
            ..Self::default()
        }
    }

    fn inferno(&self, differential: bool) -> flamegraph::Options<'static> {
        let mut o = flamegraph::Options::default();
        o.title = self.title.clone().unwrap_or_else(|| {
            match (self.kind, differential) {
                (Kind::OnCpu, false) => "On-CPU flamegraph",
                (Kind::OffCpu, false) => "Off-CPU flamegraph (blocked time)",
                (Kind::OnCpu, true) => {
                    "Differential on-CPU flamegraph (red: more in the second session)"
                }
                (Kind::OffCpu, true) => {
                    "Differential off-CPU flamegraph (red: more in the second session)"
                }
            }
            .to_string()
        });
        o.subtitle = self.subtitle.clone();
        o.count_name = self.kind.count_name().to_string();
        if self.kind == Kind::OffCpu && !differential {
            o.colors = Palette::Basic(BasicPalette::Io);
        }
        if self.deterministic {
            o.deterministic = true;
            o.pretty_xml = true;
            o.no_javascript = true;
        }
        o
    }
}

fn sorted_lines(stacks: &FoldedStacks) -> Vec<String> {
    let mut lines = stacks.lines();
    // inferno's from_lines wants sorted input (it merges adjacent stacks).
    lines.sort();
    lines
}

/// Writes a placeholder SVG saying why there is no flamegraph.
fn write_empty(title: &str, message: &str, mut w: impl Write) -> io::Result<()> {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    write!(
        w,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"1200\" height=\"80\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#eeeeee\"/>\n\
         <text x=\"600\" y=\"28\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"17\">{}</text>\n\
         <text x=\"600\" y=\"58\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"12\">{}</text>\n\
         </svg>\n",
        esc(title),
        esc(message)
    )
}

/// Writes the flamegraph of `stacks` to `w`.
pub fn write(stacks: &FoldedStacks, options: &FlamegraphOptions, w: impl Write) -> io::Result<()> {
    let mut o = options.inferno(false);
    if stacks.is_empty() {
        return write_empty(
            &o.title,
            &format!("no {} stacks were recorded", options.kind.file_stem()),
            w,
        );
    }
    let lines = sorted_lines(stacks);
    flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), w)
}

/// Writes a differential flamegraph: frames sized by `after`, red where they
/// grew from `before`, blue where they shrank. Counts are normalized so
/// sessions of different lengths compare.
pub fn write_diff(
    before: &FoldedStacks,
    after: &FoldedStacks,
    options: &FlamegraphOptions,
    w: impl Write,
) -> io::Result<()> {
    let mut o = options.inferno(true);
    if before.is_empty() && after.is_empty() {
        return write_empty(&o.title, "neither session has stacks of this kind", w);
    }
    let before_text = sorted_lines(before).join("\n");
    let after_text = sorted_lines(after).join("\n");
    let mut diff = Vec::new();
    let d = differential::Options {
        normalize: true,
        ..differential::Options::default()
    };
    differential::from_readers(d, before_text.as_bytes(), after_text.as_bytes(), &mut diff)?;
    let text = String::from_utf8_lossy(&diff);
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    lines.sort_unstable();
    flamegraph::from_lines(&mut o, lines, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(text: &str) -> FoldedStacks {
        FoldedStacks::parse(text, "t").0
    }

    #[test]
    fn renders_frames_and_count_name() {
        let f = folded("w;main;PyUnicode_FromFormatV 45\nw;main;read;filemap_read_[k] 5\n");
        let mut out = Vec::new();
        write(
            &f,
            &FlamegraphOptions {
                deterministic: true,
                ..FlamegraphOptions::new(Kind::OffCpu)
            },
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("PyUnicode_FromFormatV"));
        assert!(svg.contains("filemap_read"));
        assert!(svg.contains(" us"), "off-CPU count name: {svg}");
    }

    #[test]
    fn empty_input_gives_a_placeholder() {
        let mut out = Vec::new();
        write(
            &FoldedStacks::default(),
            &FlamegraphOptions::default(),
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("no oncpu stacks were recorded"));
    }

    #[test]
    fn differential_marks_both_sessions() {
        let before = folded("w;main;format_global_index_map 90\nw;main;decode 10\n");
        let after = folded("w;main;decode 100\n");
        let mut out = Vec::new();
        write_diff(
            &before,
            &after,
            &FlamegraphOptions {
                deterministic: true,
                ..Default::default()
            },
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("decode"));
        assert!(svg.contains("Differential"));
    }
}
