//! `op log`, `undo` and `redo`: the operation log and moving along it.

use super::{CliError, CliResult, Target};
use crate::engine::Query;
use crate::ipc::Request;
use crate::rewind::ReportJson;
use crate::store::ops::OpRow;
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::path::PathBuf;

/// `ckpt-mount op`.
#[derive(Debug, Args)]
pub struct OpArgs {
    /// What to do with the operation log.
    #[command(subcommand)]
    pub command: OpCommand,
}

/// `ckpt-mount op` subcommands.
#[derive(Debug, Subcommand)]
pub enum OpCommand {
    /// List the operations, newest first: turn switches, rewinds, undos, redos, relabels, prunes
    ///
    /// Example: ckpt-mount op log
    /// Example: ckpt-mount op log --json
    #[command(verbatim_doc_comment)]
    Log(OpLogArgs),
}

/// `ckpt-mount op log`.
#[derive(Debug, Args)]
pub struct OpLogArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Show times in UTC (default: local time)
    #[arg(long)]
    pub utc: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `ckpt-mount undo` and `ckpt-mount redo`.
#[derive(Debug, Args)]
pub struct UndoArgs {
    /// Print what it would change in the folder as it is now, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Do not ask before changing the folder (asked only when stdin and stdout are a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// List every path it changed (on a terminal the first 30 are listed, then a count; into a
    /// pipe or a file every path is)
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Runs `op …`.
pub fn op(a: OpArgs) -> CliResult {
    match a.command {
        OpCommand::Log(a) => log(a),
    }
}

fn log(a: OpLogArgs) -> CliResult {
    let rows: Vec<OpRow> = super::query(super::target(a.dir)?, Query::OpLog, |folder, e| {
        CliError::fail(format!("{}: {e}", folder.display()))
    })?;
    if a.json {
        super::print_json(&rows);
        return Ok(());
    }
    for row in &rows {
        println!("{}", op_line(row, a.utc));
    }
    Ok(())
}

/// One line of `op log`: `#7 2026-12-02 11:40 rewind to turn 3 (restored 4, deleted 2)`, with
/// its state when it is not simply done.
fn op_line(row: &OpRow, utc: bool) -> String {
    let unix = crate::units::unix_seconds(row.time);
    let when = if utc {
        crate::units::CivilTime::utc(unix).to_minute()
    } else {
        crate::units::CivilTime::local(unix).to_minute()
    };
    let mut line = format!("#{:<4} {when}  {}", row.id, row.text);
    match row.state.as_str() {
        "undone" => match row.undone_by {
            Some(by) => line += &format!("  [undone by #{by}]"),
            None => line += "  [undone]",
        },
        "unfinished" => line += "  [cut off: the next mount, rewind, undo or redo completes it]",
        _ => {}
    }
    if row.next_undo {
        line += "  <- undo";
    }
    if row.next_redo {
        line += "  <- redo";
    }
    line
}

/// Runs `undo` (or, with `redo`, `redo`).
pub fn undo(a: UndoArgs, redo: bool) -> CliResult {
    let t = super::target(a.dir.clone())?;
    let ask = !a.yes
        && !a.json
        && !a.dry_run
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal();
    let mut held = Held::open(t)?;
    if ask {
        let preview = held.run(redo, true)?;
        if !super::rewind::confirm(&preview)? {
            return Err(CliError::fail("cancelled: nothing changed"));
        }
    }
    // A dry run changes nothing, so Ctrl-C may end it as it ends any command.
    let keep_going = (!a.dry_run).then(|| {
        let what = if redo { "redo" } else { "undo" };
        let running = super::interrupt::Running::new(what, &held.folder, held.in_daemon());
        super::interrupt::KeepGoing::start(running, indicatif::ProgressBar::hidden())
    });
    let r = held.run(redo, a.dry_run)?;
    drop(keep_going);
    super::rewind::print_report(&r, a.json, super::rewind::listed(a.verbose));
    if let Some(line) = super::rewind::no_room(&r) {
        return Err(CliError::fail(line));
    }
    let failed = r.failed.len();
    if failed > 0 {
        return Err(CliError::fail(if a.dry_run {
            format!("{failed} paths cannot be restored")
        } else {
            "some paths could not be restored".to_string()
        }));
    }
    Ok(())
}

/// The folder an undo or redo acts on: through its daemon, or its store held open (and
/// locked) between the preview and the run.
struct Held {
    folder: PathBuf,
    how: Via,
}

/// How [`Held`] reaches the folder.
enum Via {
    Daemon,
    Store(std::os::fd::OwnedFd, Box<crate::store::Store>),
}

impl Held {
    fn open(t: Target) -> Result<Self, CliError> {
        Ok(match t {
            Target::Mounted(folder) => Self {
                folder,
                how: Via::Daemon,
            },
            Target::Offline(folder) => {
                let (root, store) = super::open_offline(&folder)?;
                Self {
                    folder,
                    how: Via::Store(root, Box::new(store)),
                }
            }
        })
    }

    fn in_daemon(&self) -> bool {
        matches!(self.how, Via::Daemon)
    }

    /// The report of the run (a preview with `dry_run`), or the one line of error.
    fn run(&mut self, redo: bool, dry_run: bool) -> Result<ReportJson, CliError> {
        match &mut self.how {
            Via::Daemon => {
                let answer = super::call(&self.folder, &Request::Undo { redo, dry_run })?;
                // A report comes with its failures (not ok): printed, then failed on.
                answer
                    .data
                    .ok_or_else(|| CliError::fail(answer.error.unwrap_or_default()))
            }
            Via::Store(root, store) => {
                let way = crate::rewind::Direction::from_redo(redo);
                let mode = crate::rewind::Mode::from_dry_run(dry_run);
                crate::rewind::undo_redo(root.as_fd(), store, way, mode, &|_, _| {})
                    .map(ReportJson::from)
                    .map_err(|e| CliError::fail(e.to_string()))
            }
        }
    }
}
