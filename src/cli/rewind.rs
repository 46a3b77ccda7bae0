//! `rewind`: restore the folder to the start of a turn.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::rewind::{self, Report};
use clap::Args;
use std::path::PathBuf;

/// `ckpt-mount rewind`.
#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The turn whose start to return to (default: the current turn)
    pub turn: Option<u64>,
    /// Print the plan and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Bring back the state from just before the last rewind
    #[arg(long, conflicts_with = "turn")]
    pub undo: bool,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

fn print_report(r: &serde_json::Value, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
        return;
    }
    let list = |k: &str| r[k].as_array().cloned().unwrap_or_default();
    if r["dry_run"].as_bool() == Some(true) {
        let plan = &r["plan"];
        for s in plan["remove"].as_array().cloned().unwrap_or_default() {
            println!("delete   {}", s["path"].as_str().unwrap_or("?"));
        }
        for s in plan["restore"].as_array().cloned().unwrap_or_default() {
            println!(
                "restore  {} ({})",
                s["path"].as_str().unwrap_or("?"),
                s["target"]["kind"].as_str().unwrap_or("?")
            );
        }
        println!(
            "dry run: nothing changed (rewind to the start of turn {})",
            r["to"]
        );
        return;
    }
    for p in list("restored") {
        println!("restored {}", p.as_str().unwrap_or("?"));
    }
    for p in list("deleted") {
        println!("deleted  {}", p.as_str().unwrap_or("?"));
    }
    for f in list("failed") {
        println!(
            "FAILED   {}: {}",
            f["path"].as_str().unwrap_or("?"),
            f["reason"].as_str().unwrap_or("?")
        );
    }
    if r["unfinished"].as_bool() == Some(true) {
        println!("the rewind is unfinished: fix what failed and run it again to complete it");
    }
    let what = if r["undo"].as_bool() == Some(true) {
        "undid the last rewind".to_string()
    } else {
        format!("rewound to the start of turn {}", r["to"])
    };
    println!(
        "{what}: {} restored, {} deleted, {} failed",
        list("restored").len(),
        list("deleted").len(),
        list("failed").len()
    );
}

/// Runs `rewind`.
pub fn run(a: RewindArgs) -> CliResult {
    if a.turn == Some(0) {
        return Err(CliError::usage("turns start at 1"));
    }
    match super::target(a.dir)? {
        Target::Mounted(folder) => {
            let resp = super::call(
                &folder,
                &Request::Rewind {
                    to: a.turn,
                    dry_run: a.dry_run,
                    undo: a.undo,
                },
            )?;
            if !resp.data.is_null() {
                print_report(&resp.data, a.json);
            }
            if resp.ok {
                Ok(())
            } else {
                Err(CliError::fail(resp.error.unwrap_or_default()))
            }
        }
        Target::Offline(folder) => {
            let (root, mut store) = super::open_offline(&folder)?;
            let to = a.turn.unwrap_or_else(|| store.index.current_turn());
            let req = rewind::Request {
                to,
                dry_run: a.dry_run,
                undo: a.undo,
            };
            let report: Report = rewind::rewind(std::os::fd::AsFd::as_fd(&root), &mut store, req)
                .map_err(|e| CliError::fail(e.to_string()))?;
            print_report(&serde_json::to_value(&report).unwrap_or_default(), a.json);
            if report.ok() {
                Ok(())
            } else {
                Err(CliError::fail("some paths could not be restored"))
            }
        }
    }
}
