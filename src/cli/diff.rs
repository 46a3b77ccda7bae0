//! `diff`: what changed since the start of a turn.

use super::{CliError, CliResult, Target};
use crate::diff::{self, FileChange};
use crate::ipc::Request;
use clap::Args;
use clap::builder::{PathBufValueParser, TypedValueParser};
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// `ckpt-mount diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The turn whose start to compare with (default: the current turn)
    pub turn: Option<u64>,
    /// Only a summary per path
    #[arg(long)]
    pub stat: bool,
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
}

/// A path given after the turn, not after `--`. A bare number there is refused rather than
/// taken as a path: `diff 2 3` reads as a range of turns, which diff does not take, and a
/// silently empty diff of a file named `3` would say nothing changed.
fn path_not_turn(p: PathBuf) -> Result<PathBuf, String> {
    let b = p.as_os_str().as_bytes();
    if !b.is_empty() && b.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "diff takes one turn (it compares the start of that turn with now); a path named {} goes after --",
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
    let (t, paths) = super::target_with_paths(a.dir, &given)?;
    let changes: Vec<FileChange> = match t {
        Target::Mounted(folder) => {
            let resp = super::call(
                &folder,
                &Request::Diff {
                    turn: a.turn,
                    paths,
                },
            )?;
            if !resp.ok {
                return Err(CliError::fail(resp.error.unwrap_or_default()));
            }
            serde_json::from_value(resp.data).map_err(|e| CliError::fail(e.to_string()))?
        }
        Target::Offline(folder) => {
            let req = Request::Diff {
                turn: a.turn,
                paths,
            };
            let v = super::query_offline(&folder, &req)?.map_err(CliError::fail)?;
            serde_json::from_value(v).map_err(|e| CliError::fail(e.to_string()))?
        }
    };
    if a.stat {
        print!("{}", diff::stat(&changes));
        return Ok(());
    }
    let tty = std::io::stdout().is_terminal();
    for c in &changes {
        let header = format!("{} {}\n", c.change, c.path);
        let body = c.text.clone();
        if tty {
            print!("\x1b[1;33m{header}\x1b[0m{}", colour(&body));
        } else {
            print!("{header}{body}");
        }
    }
    Ok(())
}
