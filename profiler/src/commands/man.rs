//! `storprof man DIR`: one roff man page per command, generated from the
//! clap definitions (so they cannot drift from `--help`).
use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;

/// Writes storprof.1 and storprof-COMMAND.1 for every subcommand into
/// `dir` (created if absent); returns how many were written.
pub fn write_pages(dir: &Path) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let top = Cli::command();
    let mut n = 0;
    let mut write = |name: String, cmd: clap::Command| -> anyhow::Result<()> {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .with_context(|| format!("cannot render {name}"))?;
        let path = dir.join(format!("{name}.1"));
        storprof_session::safe_path::write_file(&path, &page)
            .with_context(|| format!("cannot write {}", path.display()))?;
        n += 1;
        Ok(())
    };
    for sub in top.get_subcommands() {
        let name = format!("storprof-{}", sub.get_name());
        write(name.clone(), sub.clone().display_name(name))?;
    }
    write("storprof".to_string(), top.clone())?;
    Ok(n)
}
