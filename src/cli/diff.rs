//! `diff`: what changed since the start of a turn.

use super::{CliError, CliResult};
use crate::diff::{self, FileChange};
use crate::engine::{DiffQuery, Query};
use crate::moment::{Moment, Spec, Use};
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
    /// start of turn N against the start of turn M; any moment (N, N#K, -K, @TIME, /TEXT: see
    /// `ckpt-mount help rewind`) on either side
    #[arg(value_name = "N|N..M", value_parser = parse_turns, allow_negative_numbers = true)]
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
    /// The turn (default: the current turn): N, N#K (a turn a rewind retired, as `log` lists
    /// it), -K, @TIME or /TEXT
    #[arg(value_name = "N", value_parser = super::moment::parse, allow_negative_numbers = true)]
    pub turn: Option<Spec>,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSpan {
    /// The first turn.
    pub from: Spec,
    /// The later turn whose start ends the span (`None`: now).
    pub to: Option<Spec>,
}

fn parse_turns(s: &str) -> Result<TurnSpan, String> {
    // A number that names no turn (0, say) is the resolution's to refuse, as for every
    // command. A label's text may hold `..` itself: `/a..b` is a span only when `b` is a
    // moment, else the one label `a..b`.
    let moment = super::moment::parse;
    let span = s
        .split_once("..")
        .filter(|(_, b)| !s.starts_with('/') || moment(b).is_ok());
    match span {
        None => Ok(TurnSpan {
            from: moment(s)?,
            to: None,
        }),
        Some((a, b)) => {
            let (from, to) = (moment(a)?, moment(b)?);
            if let (Spec::Turn(f), Spec::Turn(t)) = (&from, &to)
                && t <= f
            {
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
    let changes = fetch(a.dir, &given, |t| {
        let history = super::moment::History::new(t);
        let from = history.resolve(span.as_ref().map(|s| &s.from), Use::Read)?;
        let to = history.resolve(span.as_ref().and_then(|s| s.to.as_ref()), Use::Read)?;
        Ok((from, to, false))
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
    let changes = fetch(a.dir, &a.paths, |t| {
        let turn = super::moment::resolve(t, a.turn.as_ref(), Use::Read)?;
        Ok((turn, None, true))
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
/// The moments a diff compares, resolved in the folder: from, to, and whether it is a `show`.
type Ends = (Option<Moment>, Option<Moment>, bool);

fn fetch(
    dir: Option<PathBuf>,
    given: &[PathBuf],
    ends: impl FnOnce(&super::Target) -> Result<Ends, CliError>,
) -> Result<Vec<FileChange>, CliError> {
    let (t, paths) = super::target_with_paths(dir, given)?;
    let (turn, to, show) = ends(&t)?;
    let req = DiffQuery {
        turn,
        to,
        show,
        paths,
    };
    super::query(t, Query::Diff(req), |_, e| CliError::fail(e.to_string()))
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
