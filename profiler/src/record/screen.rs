//! Where the live view goes: a status block pinned to the bottom rows of
//! the terminal on stderr, under a scroll region that holds everything
//! else (the workload's own output scrolls above it), or one line per
//! update, or nothing.
use std::{
    fmt::Write as _,
    io::{IsTerminal, Write},
};

use super::live::{BLOCK_ROWS, LiveStatus, LiveView, render_block, render_line};

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
