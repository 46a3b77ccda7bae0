//! `turn`: print the current turn, or begin a new one.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::store::journal::Record;
use clap::Args;
use std::path::PathBuf;

/// `ckpt-mount turn`.
#[derive(Debug, Args)]
pub struct TurnArgs {
    /// The turn to begin (greater than the current one); omit to print the current turn
    pub turn: Option<u64>,
    /// A label for the new turn
    #[arg(short = 'm', long = "message")]
    pub label: Option<String>,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

impl TurnArgs {
    /// The usage errors no folder is needed to know (see [`super::Cli::check`]).
    pub fn check(&self) -> CliResult {
        if self
            .turn
            .is_some_and(|n| n == 0 || n > crate::capture::MAX_TURN)
        {
            return Err(CliError::usage("a turn is a whole number from 1 to 2^53-1"));
        }
        if self.label.is_some() && self.turn.is_none() {
            return Err(CliError::usage("--message needs a turn number"));
        }
        Ok(())
    }
}

/// Runs `turn` (after [`TurnArgs::check`]).
pub fn run(a: TurnArgs) -> CliResult {
    match super::target(a.dir)? {
        Target::Mounted(folder) => {
            let resp = super::call(
                &folder,
                &Request::Turn {
                    set: a.turn,
                    label: a.label,
                },
            )?;
            if !resp.ok {
                return Err(CliError::fail(resp.error.unwrap_or_default()));
            }
            println!("{}", resp.data["turn"].as_u64().unwrap_or(0));
            Ok(())
        }
        Target::Offline(folder) => {
            let (_root, mut store) = super::open_offline(&folder)?;
            let current = store.index().current_turn().0;
            match a.turn {
                None => println!("{current}"),
                Some(n) if n == current && a.label.is_none() => println!("{current}"),
                Some(n) if n <= current => {
                    return Err(CliError::fail(format!(
                        "a new turn must be greater than the current turn {current}"
                    )));
                }
                Some(n) => {
                    store
                        .append(Record::Turn {
                            turn: crate::ids::Turn(n),
                            label: a.label,
                        })
                        .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
                    println!("{n}");
                }
            }
            Ok(())
        }
    }
}
