//! `diff`: what changed since the start of a turn.

use super::{CliError, CliResult};
use crate::diff::{self, FileChange};
use crate::engine::{DiffQuery, Query};
use crate::ids::Turn;
use crate::quote::quote_path;
use clap::Args;
use clap::builder::{PathBufValueParser, TypedValueParser};
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// `ckpt-mount diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The turn whose start to compare with now (default: the current turn), or N..M for the
    /// start of turn N against the start of turn M
    #[arg(value_name = "N|N..M", value_parser = parse_turns)]
    pub turn: Option<TurnSpan>,
    /// Only a summary per path: lines changed, sizes of binary files, the programs that changed it
    #[arg(long)]
    pub stat: bool,
    /// Print the changes as JSON
    #[arg(long, conflicts_with = "stat")]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Only these paths (relative to the folder, or absolute inside it), after the turn; a path
    /// that starts with `-` or is a number goes after `--`
    #[arg(
        value_name = "PATHS",
        value_parser = PathBufValueParser::new().try_map(path_not_turn)
    )]
    pub paths: Vec<PathBuf>,
    /// The paths given after `--` (described with the ones above)
    #[arg(last = true, value_name = "PATHS", hide = true)]
    pub paths_after_dashes: Vec<PathBuf>,
    #[command(flatten)]
    pub agent: super::agent::AgentFilter,
    /// With --stat, list every path of a large tree (one line per directory with 50 changed
    /// paths or more otherwise, as `node_modules/  1,779 paths (1,779 created)  npm`)
    #[arg(long)]
    pub expand: bool,
}

/// `ckpt-mount show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The turn (default: the current turn)
    pub turn: Option<Turn>,
    /// Only a summary per path: lines changed, sizes of binary files, the programs that changed it
    #[arg(long)]
    pub stat: bool,
    /// Print the changes as JSON
    #[arg(long, conflicts_with = "stat")]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Only these paths (relative to the folder, or absolute inside it)
    #[arg(last = true, value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub agent: super::agent::AgentFilter,
    /// With --stat, list every path of a large tree (one line per directory with 50 changed
    /// paths or more otherwise)
    #[arg(long)]
    pub expand: bool,
}

/// The turns a diff spans: from the start of `from` to now, or to the start of `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnSpan {
    /// The first turn.
    pub from: Turn,
    /// The later turn whose start ends the span (`None`: now).
    pub to: Option<Turn>,
}

fn parse_turns(s: &str) -> Result<TurnSpan, String> {
    // A number that names no turn (0, say) is the engine's to refuse, as for every command.
    let turn = |t: &str| {
        t.parse::<Turn>()
            .map_err(|_| format!("not a turn: {t:?} (a turn is a whole number)"))
    };
    match s.split_once("..") {
        None => Ok(TurnSpan {
            from: turn(s)?,
            to: None,
        }),
        Some((a, b)) => {
            let (from, to) = (turn(a)?, turn(b)?);
            if to <= from {
                return Err(format!("in N..M, N must be before M (got {s})"));
            }
            Ok(TurnSpan { from, to: Some(to) })
        }
    }
}

/// A path given after the turn, not after `--`. A bare number there is refused rather than
/// taken as a path: `diff 2 3` reads as two turns, and a silently empty diff of a file named
/// `3` would say nothing changed.
fn path_not_turn(p: PathBuf) -> Result<PathBuf, String> {
    let b = p.as_os_str().as_bytes();
    if !b.is_empty() && b.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "diff takes one turn, or a span N..M; a path named {} goes after --",
            p.display()
        ));
    }
    Ok(p)
}

fn colour(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("+++") || l.starts_with("---") {
                format!("\x1b[1m{l}\x1b[0m")
            } else if l.starts_with('+') {
                format!("\x1b[32m{l}\x1b[0m")
            } else if l.starts_with('-') {
                format!("\x1b[31m{l}\x1b[0m")
            } else if l.starts_with("@@") {
                format!("\x1b[36m{l}\x1b[0m")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Runs `diff`.
pub fn run(a: DiffArgs) -> CliResult {
    let given: Vec<PathBuf> = a.paths.into_iter().chain(a.paths_after_dashes).collect();
    let span = a.turn;
    a.agent.check(a.dir.as_deref())?;
    let changes = fetch(a.dir, &given, |paths| DiffQuery {
        turn: span.map(|s| s.from),
        to: span.and_then(|s| s.to),
        show: false,
        paths,
    })?;
    let view = View {
        stat: a.stat,
        json: a.json,
        fold: fold(a.expand),
    };
    print_changes(&keep(changes, &a.agent), view);
    Ok(())
}

/// Runs `show`: what one turn alone changed.
pub fn show(a: ShowArgs) -> CliResult {
    a.agent.check(a.dir.as_deref())?;
    let changes = fetch(a.dir, &a.paths, |paths| DiffQuery {
        turn: a.turn,
        to: None,
        show: true,
        paths,
    })?;
    let view = View {
        stat: a.stat,
        json: a.json,
        fold: fold(a.expand),
    };
    print_changes(&keep(changes, &a.agent), view);
    Ok(())
}

/// How the changes are printed.
struct View {
    stat: bool,
    json: bool,
    fold: diff::Fold,
}

fn fold(expand: bool) -> diff::Fold {
    if expand {
        diff::Fold::Expanded
    } else {
        diff::Fold::Folded
    }
}

/// The changes `--agent` keeps.
fn keep(changes: Vec<FileChange>, agent: &super::agent::AgentFilter) -> Vec<FileChange> {
    changes
        .into_iter()
        .filter(|c| agent.keeps(&c.actors))
        .collect()
}

/// Asks the daemon (or, offline, the engine) for the changes of the request `req` builds from
/// the paths relative to the folder.
fn fetch(
    dir: Option<PathBuf>,
    given: &[PathBuf],
    req: impl FnOnce(Vec<crate::relpath::RelPath>) -> DiffQuery,
) -> Result<Vec<FileChange>, CliError> {
    let (t, paths) = super::target_with_paths(dir, given)?;
    super::query(t, Query::Diff(req(paths)), |_, e| {
        CliError::fail(e.to_string())
    })
}

fn print_changes(changes: &[FileChange], view: View) {
    let View { stat, json, fold } = view;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(changes).unwrap_or_default()
        );
        return;
    }
    if stat {
        print!("{}", diff::stat(changes, fold));
        return;
    }
    let tty = std::io::stdout().is_terminal();
    for c in changes {
        let header = format!("{} {}\n", c.change, quote_path(c.path.as_bytes()));
        if tty {
            print!("\x1b[1;33m{header}\x1b[0m{}", colour(&c.text));
        } else {
            print!("{header}{}", c.text);
        }
    }
}
