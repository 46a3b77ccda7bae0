//! `op log`, `op show`, `op restore`, `undo` and `redo`: the operation log and moving along
//! it.

use super::{CliError, CliResult, Target};
use crate::engine::Query;
use crate::info::op_show::OpShow;
use crate::ipc::Request;
use crate::quote::quote_path;
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
    /// Show what an operation changed: the paths it restored, created and deleted (-p: the diffs)
    ///
    /// A turn switch or a relabel changed no path: it says what the operation did to the turns.
    /// An operation from before a prune cannot be shown (only its words are kept).
    ///
    /// Example: ckpt-mount op show 4
    /// Example: ckpt-mount op show '#4' -p
    /// Example: ckpt-mount op show 4 --json
    #[command(verbatim_doc_comment)]
    Show(OpShowArgs),
    /// Give the folder back as it was just after an operation (itself an operation: undo takes it back)
    ///
    /// Every path changed since the operation ended gets the state it had then, in one step;
    /// the current turn and the turns stay as they are. On a terminal it shows what it would do
    /// and asks first (--yes: no question), as rewind does.
    ///
    /// Example: ckpt-mount op restore 2 --dry-run
    /// Example: ckpt-mount op restore '#2' --yes
    #[command(verbatim_doc_comment)]
    Restore(OpRestoreArgs),
}

/// An operation's id as `op log` prints it: `#7`, or `7`.
fn op_id(s: &str) -> Result<u64, String> {
    let digits = s.strip_prefix('#').unwrap_or(s);
    match digits.parse::<u64>() {
        Ok(id) if id > 0 && digits.bytes().all(|b| b.is_ascii_digit()) => Ok(id),
        _ => Err(format!(
            "{s:?} is not an operation id: give the number `ckpt-mount op log` shows, as 7 or #7"
        )),
    }
}

/// `ckpt-mount op show`.
#[derive(Debug, Args)]
pub struct OpShowArgs {
    /// The operation, as `op log` lists it (`7` or `#7`)
    #[arg(value_name = "ID", value_parser = op_id)]
    pub id: u64,
    /// Show the diff of each path, as `diff` does
    #[arg(short = 'p', long = "patch")]
    pub patch: bool,
    /// Print JSON (every path with its diff)
    #[arg(long)]
    pub json: bool,
    /// Show times in UTC (default: local time)
    #[arg(long)]
    pub utc: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `ckpt-mount op restore`.
#[derive(Debug, Args)]
pub struct OpRestoreArgs {
    /// The operation, as `op log` lists it (`7` or `#7`): the folder is given back as it was
    /// just after it
    #[arg(value_name = "ID", value_parser = op_id)]
    pub id: u64,
    #[command(flatten)]
    pub run: UndoArgs,
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
        OpCommand::Show(a) => show(a),
        OpCommand::Restore(a) => change(a.run, Step::Restore(a.id)),
    }
}

/// `op show ID`.
fn show(a: OpShowArgs) -> CliResult {
    let shown: OpShow = super::query(
        super::target(a.dir)?,
        Query::OpShow { id: a.id },
        |folder, e| CliError::fail(format!("{}: {e}", folder.display())),
    )?;
    if a.json {
        super::print_json(&shown);
        return Ok(());
    }
    let when = when(shown.time, a.utc);
    let mut head = format!("#{} {when}  {}", shown.id, shown.text);
    if shown.state != "done" {
        head += &format!("  [{}]", shown.state);
    }
    println!("{head}");
    println!("turns: {}", shown.turns);
    if shown.changes.is_empty() {
        println!("folder: nothing changed");
        return Ok(());
    }
    for c in &shown.changes {
        println!("{:<9} {}", c.change, quote_path(c.path.as_bytes()));
        if a.patch {
            print!("{}", c.text);
        }
    }
    Ok(())
}

/// A time as `op log` prints it, to the minute.
fn when(time: u64, utc: bool) -> String {
    let unix = crate::units::unix_seconds(time);
    if utc {
        crate::units::CivilTime::utc(unix).to_minute()
    } else {
        crate::units::CivilTime::local(unix).to_minute()
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
    let when = when(row.time, utc);
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

/// What [`change`] runs: an undo, a redo, or an `op restore`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Undo,
    Redo,
    Restore(u64),
}

impl Step {
    /// What a Ctrl-C says is running.
    pub(super) fn word(self) -> &'static str {
        match self {
            Self::Undo => "undo",
            Self::Redo => "redo",
            Self::Restore(_) => "op restore",
        }
    }
}

/// `ckpt-mount undo`.
#[derive(Debug, Args)]
pub struct UndoCommandArgs {
    #[command(flatten)]
    pub run: UndoArgs,
    /// Undo too, in every other mounted folder, the rewind that `rewind --all-folders` made
    /// with this folder's last rewind (a folder whose last operation is not that rewind is left
    /// alone, and said so)
    #[arg(long)]
    pub all_folders: bool,
}

/// `ckpt-mount redo`.
#[derive(Debug, Args)]
pub struct RedoCommandArgs {
    #[command(flatten)]
    pub run: UndoArgs,
    /// Redo too, in every other mounted folder, the rewind that `undo --all-folders` undid
    /// with this folder's (a folder whose next redo is not that rewind is left alone, and said
    /// so)
    #[arg(long)]
    pub all_folders: bool,
}

/// Runs `undo`.
pub fn undo(a: UndoCommandArgs) -> CliResult {
    if a.all_folders {
        return super::together::revert(&a.run, Step::Undo);
    }
    change(a.run, Step::Undo)
}

/// Runs `redo`.
pub fn redo(a: RedoCommandArgs) -> CliResult {
    if a.all_folders {
        return super::together::revert(&a.run, Step::Redo);
    }
    change(a.run, Step::Redo)
}

/// Runs `undo`, `redo` or `op restore` (`step`): previewed and asked on a terminal, as a rewind.
fn change(a: UndoArgs, step: Step) -> CliResult {
    let t = super::target(a.dir.clone())?;
    let ask = !a.yes
        && !a.json
        && !a.dry_run
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal();
    let mut held = Held::open(t)?;
    if ask {
        let preview = held.run(step, true)?;
        if !super::rewind::confirm(&preview)? {
            return Err(CliError::fail("cancelled: nothing changed"));
        }
    }
    // A dry run changes nothing, so Ctrl-C may end it as it ends any command.
    let keep_going = (!a.dry_run).then(|| {
        let running = super::interrupt::Running::new(step.word(), &held.folder, held.in_daemon());
        super::interrupt::KeepGoing::start(running, indicatif::ProgressBar::hidden())
    });
    let r = held.run(step, a.dry_run)?;
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
pub(super) struct Held {
    folder: PathBuf,
    how: Via,
}

/// How [`Held`] reaches the folder.
enum Via {
    Daemon,
    Store(std::os::fd::OwnedFd, Box<crate::store::Store>),
}

impl Held {
    pub(super) fn open(t: Target) -> Result<Self, CliError> {
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

    pub(super) fn in_daemon(&self) -> bool {
        matches!(self.how, Via::Daemon)
    }

    /// The report of the run (a preview with `dry_run`), or the one line of error.
    pub(super) fn run(&mut self, step: Step, dry_run: bool) -> Result<ReportJson, CliError> {
        match &mut self.how {
            Via::Daemon => {
                let req = match step {
                    Step::Undo | Step::Redo => Request::Undo {
                        redo: matches!(step, Step::Redo),
                        dry_run,
                    },
                    Step::Restore(id) => Request::RestoreOp { id, dry_run },
                };
                let answer = super::call(&self.folder, &req)?;
                // A report comes with its failures (not ok): printed, then failed on.
                answer
                    .data
                    .ok_or_else(|| CliError::fail(answer.error.unwrap_or_default()))
            }
            Via::Store(root, store) => {
                let mode = crate::rewind::Mode::from_dry_run(dry_run);
                let none = |_: usize, _: usize| {};
                let run = match step {
                    Step::Undo | Step::Redo => {
                        let way = crate::rewind::Direction::from_redo(matches!(step, Step::Redo));
                        crate::rewind::undo_redo(root.as_fd(), store, way, mode, &none)
                    }
                    Step::Restore(id) => {
                        let req = crate::rewind::Request::RestoreOp { id, mode };
                        let max_blob = crate::capture::DEFAULT_MAX_BLOB;
                        crate::rewind::run(root.as_fd(), store, &req, max_blob, &none)
                    }
                };
                run.map(ReportJson::from)
                    .map_err(|e| CliError::fail(e.to_string()))
            }
        }
    }
}
