//! `turn`: print the current turn, or begin a new one.

use super::{CliError, CliResult, Target};
use crate::capture::{MAX_TURN, TurnError};
use crate::ids::Turn;
use crate::ipc::{Request, TurnAnswer};
use crate::store::journal::{Conversation, Record};
use clap::Args;
use std::path::{Path, PathBuf};

/// `ckpt-mount turn`.
#[derive(Debug, Args)]
pub struct TurnArgs {
    /// The turn to begin (greater than the current one, at most 4294967295), or N.S to begin
    /// step S of the current turn N; omit to print the current turn
    pub turn: Option<Turn>,
    /// Begin the next step of the current turn (5 -> 5.1, 5.1 -> 5.2): what an agent's hook
    /// does at each tool call with `hooks install --steps`
    #[arg(long, conflicts_with_all = ["turn", "offline"])]
    pub step: bool,
    /// A label for the new turn or step
    #[arg(short = 'm', long = "message")]
    pub label: Option<String>,
    /// Relabel turn N (an operation: `undo` takes it back); an empty TEXT removes the label
    #[arg(long = "label", num_args = 2, value_names = ["N", "TEXT"], conflicts_with_all = ["turn", "label", "offline"])]
    pub relabel: Option<Vec<String>>,
    /// Begin the turn even though the folder is not mounted (recovery: nothing is captured)
    #[arg(long, requires = "turn")]
    pub offline: bool,
    /// The folder, or any path inside it (default: the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

impl TurnArgs {
    /// The usage errors no folder is needed to know (see [`super::Cli::check`]).
    pub fn check(&self) -> CliResult {
        if self
            .turn
            .is_some_and(|n| n.whole() == Turn::new(0) || n.whole() > MAX_TURN)
        {
            return Err(CliError::usage(TurnError::OutOfRange.to_string()));
        }
        if let Some(r) = &self.relabel {
            self.relabel_target(r)?;
        }
        if self.label.is_some() && self.turn.is_none() && !self.step {
            return Err(CliError::usage("--message needs a turn number, or --step"));
        }
        Ok(())
    }
}

impl TurnArgs {
    /// The turn and label of `--label N TEXT` (an empty TEXT: no label).
    fn relabel_target(&self, r: &[String]) -> Result<(Turn, Option<String>), CliError> {
        let n = r
            .first()
            .and_then(|n| n.parse::<Turn>().ok())
            .filter(|n| (Turn::new(1)..=MAX_TURN).contains(&n.whole()))
            .ok_or_else(|| CliError::usage("--label N TEXT: N is a turn (or a step N.S)"))?;
        let text = r.get(1).cloned().unwrap_or_default();
        Ok((n, (!text.is_empty()).then_some(text)))
    }
}

/// Runs `turn --label N TEXT`.
fn relabel(a: &TurnArgs, r: &[String]) -> CliResult {
    let (n, label) = a.relabel_target(r)?;
    match super::target(a.dir.clone())? {
        Target::Mounted(folder) => {
            let _: TurnAnswer = super::ask_daemon(&folder, &Request::Relabel { turn: n, label })?;
        }
        Target::Offline(folder) => {
            let (_root, mut store) = super::open_offline(&folder)?;
            store
                .relabel(n, label)
                .map_err(|e| CliError::fail(e.to_string()))?;
        }
    }
    println!("{n}");
    Ok(())
}

/// The one line said when a turn would begin on a folder that is not mounted: an agent's hook
/// that "works" there marks turns while nothing is captured.
pub fn not_mounted_line(folder: &Path) -> String {
    let f = folder.display();
    format!(
        "{f} is not mounted: changes are not being captured; mount it with: ckpt-mount mount {f}"
    )
}

/// Runs `turn` (after [`TurnArgs::check`]).
pub fn run(a: TurnArgs) -> CliResult {
    if let Some(r) = &a.relabel {
        return relabel(&a, r);
    }
    if a.step {
        let folder = match a.dir {
            Some(d) => d,
            None => std::env::current_dir()
                .map_err(|e| CliError::fail(format!("no working directory: {e}")))?,
        };
        let turn = begin_next(&folder, Next::Step, a.label, None, None)?.ok_or_else(|| {
            CliError::fail(format!(
                "{} is not in a folder ckpt-mount mounts",
                folder.display()
            ))
        })?;
        println!("{turn}");
        return Ok(());
    }
    match super::target(a.dir)? {
        Target::Mounted(folder) => {
            let turn = through_daemon(&folder, a.turn, a.label)?;
            println!("{turn}");
            Ok(())
        }
        Target::Offline(folder) => {
            let (_root, mut store) = super::open_offline(&folder)?;
            let current = store.index().current_turn();
            match a.turn {
                None => println!("{current}"),
                Some(_) if !a.offline => return Err(CliError::fail(not_mounted_line(&folder))),
                Some(n) if n == current && a.label.is_none() => println!("{current}"),
                Some(n) if n <= current => {
                    return Err(CliError::fail(TurnError::NotAfter { current }.to_string()));
                }
                Some(n) if n.is_step() && n.get() != current.get() => {
                    return Err(CliError::fail(
                        TurnError::StepOutsideTurn { current }.to_string(),
                    ));
                }
                Some(n) => {
                    store
                        .append(Record::Turn {
                            turn: n,
                            label: a.label,
                            by: None,
                            conversation: None,
                        })
                        .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
                    println!("{n}");
                }
            }
            Ok(())
        }
    }
}

/// Reads the current turn (`set` none) or begins turn `set` on a mounted folder; returns the
/// turn the daemon reports.
fn through_daemon(
    folder: &Path,
    set: Option<Turn>,
    label: Option<String>,
) -> Result<Turn, CliError> {
    begin_through_daemon(folder, set, label, None, None)
}

/// [`through_daemon`], for a turn the agent `by` begins, its conversation where `conversation`
/// says.
fn begin_through_daemon(
    folder: &Path,
    set: Option<Turn>,
    label: Option<String>,
    by: Option<String>,
    conversation: Option<Conversation>,
) -> Result<Turn, CliError> {
    let request = Request::Turn {
        set,
        label,
        by,
        conversation,
    };
    let answer: TurnAnswer = super::ask_daemon(folder, &request)?;
    Ok(answer.turn)
}

/// What a hook begins: the next turn (a prompt) or the next step of the current turn (a tool
/// call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The turn after the current one: `5.3` -> `6`.
    Turn,
    /// The step after the current one in its turn: `5` -> `5.1`, `5.1` -> `5.2`.
    Step,
}

impl Next {
    /// The turn or step to begin after `current`, if there is a number for it.
    fn after(self, current: Turn) -> Option<Turn> {
        match self {
            Self::Turn => current.checked_next().filter(|n| *n <= MAX_TURN),
            // Before the first turn there is no turn to hold a step.
            Self::Step if current == Turn::new(0) => None,
            Self::Step => current.next_step(),
        }
    }
}

/// Begins the turn (or step, `next`) after the current one, labelled, on the mounted folder
/// containing `path`, for the agent `by` whose conversation stood where `conversation` says:
/// what an agent's hook does for each prompt (and, with steps, each tool call). Refuses a
/// folder that is not mounted, with [`not_mounted_line`]; `Ok(None)` when no ckpt-mount
/// folder contains `path` at all (the agent works in a project that does not use ckpt-mount).
/// Another agent's hook may begin a turn between the two requests: then the next number after
/// that one is tried.
pub fn begin_next(
    path: &Path,
    next: Next,
    label: Option<String>,
    by: Option<String>,
    conversation: Option<Conversation>,
) -> Result<Option<Turn>, CliError> {
    if crate::mounts::find_folder(path).is_none() {
        return Ok(None);
    }
    let folder = match super::target(Some(path.to_path_buf()))? {
        Target::Offline(folder) => return Err(CliError::fail(not_mounted_line(&folder))),
        Target::Mounted(folder) => folder,
    };
    let mut current = through_daemon(&folder, None, None)?;
    for _ in 0..8 {
        let to = next.after(current).ok_or_else(|| {
            CliError::fail(match next {
                Next::Turn => format!(
                    "the turn numbers are used up: the current turn is {current}, and a turn is at most {MAX_TURN}"
                ),
                Next::Step => format!("no step can begin after {current}"),
            })
        })?;
        let (l, b, c) = (label.clone(), by.clone(), conversation.clone());
        match begin_through_daemon(&folder, Some(to), l, b, c) {
            Ok(turn) => return Ok(Some(turn)),
            Err(e) => {
                let now = through_daemon(&folder, None, None)?;
                if now < to {
                    return Err(e);
                }
                current = now;
            }
        }
    }
    Err(CliError::fail(format!(
        "no turn was begun: other turns kept beginning first (the current turn is {current})"
    )))
}
