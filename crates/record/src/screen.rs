//! Where the live view goes: a status block pinned to the bottom rows of
//! the terminal on stderr, under a scroll region that holds everything
//! else (the workload's own output scrolls above it), or one line per
//! update, or nothing.
use std::{
    fmt::Write as _,
    io::{IsTerminal, Write},
};

use super::live::{LiveStatus, LiveThread, LiveView};

/// Where live updates go.
pub struct Screen {
    mode: ScreenMode,
    /// Terminal rows when the scroll region was set (0: not set).
    rows: u16,
    drawn: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScreenMode {
    Block,
    Lines,
    Off,
}

impl Screen {
    /// `Auto` picks the block when stderr is a terminal that can move the
    /// cursor (not TERM=dumb) and has room for it.
    pub fn new(view: LiveView) -> Self {
        let tty = std::io::stderr().is_terminal()
            && std::env::var("TERM").is_ok_and(|t| !t.is_empty() && t != "dumb");
        let mode = match view {
            LiveView::Off => ScreenMode::Off,
            LiveView::Lines => ScreenMode::Lines,
            LiveView::Block if tty => ScreenMode::Block,
            LiveView::Auto if tty && terminal_size().is_some_and(|(r, _)| r > BLOCK_ROWS + 3) => {
                ScreenMode::Block
            }
            _ => ScreenMode::Lines,
        };
        Self {
            mode,
            rows: 0,
            drawn: false,
        }
    }

    pub fn show(&mut self, s: &LiveStatus) {
        match self.mode {
            ScreenMode::Off => {}
            ScreenMode::Lines => eprintln!("{}", render_line(s)),
            ScreenMode::Block => self.draw_block(&render_block(s)),
        }
    }

    /// The block sits in the last BLOCK_ROWS rows, under a scroll region
    /// that holds everything else: output of the workload scrolls above it.
    fn draw_block(&mut self, lines: &[String]) {
        let Some((rows, cols)) = terminal_size() else {
            return;
        };
        let mut out = String::new();
        if rows != self.rows {
            if self.rows == 0 {
                // Room for the block: scroll what is on screen up.
                out.push_str(&"\n".repeat(BLOCK_ROWS as usize));
                let _ = write!(out, "\x1b[{}A", BLOCK_ROWS);
            }
            // Save the cursor, set the region (which homes it), restore.
            let _ = write!(out, "\x1b7\x1b[1;{}r\x1b8", rows - BLOCK_ROWS);
            self.rows = rows;
        }
        out.push_str("\x1b7");
        for (i, line) in lines.iter().take(BLOCK_ROWS as usize).enumerate() {
            let text: String = line.chars().take(cols as usize).collect();
            let _ = write!(
                out,
                "\x1b[{};1H\x1b[2K{text}",
                rows - BLOCK_ROWS + 1 + i as u16
            );
        }
        out.push_str("\x1b8");
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(out.as_bytes());
        let _ = err.flush();
        self.drawn = true;
    }

    /// Gives the terminal back: the region reset, the last block left
    /// on screen under the workload's output.
    pub fn finish(&mut self) {
        if self.mode != ScreenMode::Block || !self.drawn {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "\x1b7\x1b[r\x1b8\x1b[{BLOCK_ROWS}B");
        let _ = err.flush();
        self.rows = 0;
        self.drawn = false;
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.finish();
    }
}

/// (rows, columns) of the terminal on stderr.
fn terminal_size() -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the valid pointer given.
    let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// The verdict part of a status as shown: the steady verdict, the
/// analysis's own when it differs ("changing to"), or "too early".
fn verdict_text(s: &LiveStatus) -> String {
    match (s.shown, &s.too_early) {
        (None, Some(why)) => why.clone(),
        (None, None) if s.inconclusive => "no clear verdict yet".to_string(),
        (None, None) => format!("settling ({}?)", s.verdict),
        (Some(shown), _) if shown != s.verdict => {
            format!("{shown} (changing to {}?)", s.verdict)
        }
        (Some(shown), _) => shown.to_string(),
    }
}

/// Lines of the status block (no colours; the screen truncates them).
pub fn render_block(s: &LiveStatus) -> Vec<String> {
    let mut lines = Vec::new();
    let au = s.au.map_or_else(
        || "AU —".to_string(),
        |a| format!("AU {a:.1}% (data wait {:.1}%)", 100.0 - a),
    );
    lines.push(format!(
        "storprof live  {}  phase {}  {au}",
        clock(s.elapsed_s),
        s.phase
    ));
    if s.confidence_label.is_empty() {
        // Before the first analysis: nothing to qualify.
        lines.push(format!("verdict {}", verdict_text(s)));
    } else {
        lines.push(format!(
            "verdict {}{}  confidence {} {:.2}",
            verdict_text(s),
            if s.inconclusive {
                " (inconclusive)"
            } else {
                ""
            },
            s.confidence_label,
            s.confidence
        ));
    }
    lines.push(format!("  {}", s.headline));
    lines.push(format!(
        "I/O (last {:.0} s)  device {:.1} MiB/s  read syscalls {:.1} MiB/s",
        s.recent_s, s.device_mib_per_s, s.read_mib_per_s
    ));
    let mut threads = String::from("busiest");
    if s.busiest.is_empty() {
        threads.push_str("  (no thread seen yet)");
    }
    for t in &s.busiest {
        let _ = write!(threads, "  {}", t.label());
    }
    lines.push(threads);
    lines.push(format!(
        "would help  {}",
        s.help.as_deref().unwrap_or(if s.shown.is_some() {
            "(no projection)"
        } else {
            "(with the verdict)"
        })
    ));
    lines
}

/// Rows of the status block ([`render_block`]'s lines).
pub const BLOCK_ROWS: u16 = 6;

/// One status line (when stderr is not a terminal).
pub fn render_line(s: &LiveStatus) -> String {
    let au = s.au.map_or_else(String::new, |a| format!(" AU {a:.1}%"));
    let busiest: Vec<String> = s.busiest.iter().map(LiveThread::label).collect();
    let confidence = if s.confidence_label.is_empty() {
        String::new()
    } else {
        format!(" ({} {:.2})", s.confidence_label, s.confidence)
    };
    format!(
        "storprof: live {} {}{au} verdict {}{}{confidence} device {:.1} MiB/s read {:.1} MiB/s busiest {}{}",
        clock(s.elapsed_s),
        s.phase,
        verdict_text(s),
        if s.inconclusive && s.shown.is_some() {
            "?"
        } else {
            ""
        },
        s.device_mib_per_s,
        s.read_mib_per_s,
        if busiest.is_empty() {
            "-".to_string()
        } else {
            busiest.join(", ")
        },
        s.help
            .as_deref()
            .map_or(String::new(), |h| format!(" would help {h}"))
    )
}

pub(super) fn clock(s: f64) -> String {
    let s = s.max(0.0) as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
