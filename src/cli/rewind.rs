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
    /// Rewind only these paths (and what is below them), relative to the folder or absolute
    /// inside it; other paths and the turn history stay as they are
    #[arg(last = true, conflicts_with = "undo")]
    pub paths: Vec<PathBuf>,
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

/// A bar on stderr when it is a terminal; drawing nothing otherwise.
fn progress_bar() -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("rewinding {bar:40} {pos}/{len} paths")
    {
        bar.set_style(style);
    }
    bar
}

impl RewindArgs {
    /// The usage errors no folder is needed to know (see [`super::Cli::check`]).
    pub fn check(&self) -> CliResult {
        if self.turn == Some(0) {
            return Err(CliError::usage("turns start at 1"));
        }
        Ok(())
    }
}

/// Runs `rewind` (after [`RewindArgs::check`]).
pub fn run(a: RewindArgs) -> CliResult {
    let (t, paths) = super::target_with_paths(a.dir, &a.paths)?;
    match t {
        Target::Mounted(folder) => {
            let req = Request::Rewind {
                to: a.turn,
                dry_run: a.dry_run,
                undo: a.undo,
                paths,
            };
            let bar = progress_bar();
            let resp = crate::ipc::call_with_progress(&folder, &req, &mut |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            })
            .map_err(|e| {
                CliError::fail(format!(
                    "{} is mounted but its daemon does not answer: {e}",
                    folder.display()
                ))
            })?;
            bar.finish_and_clear();
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
            let to = a
                .turn
                .map_or_else(|| store.index().current_turn(), crate::ids::Turn);
            let root = std::os::fd::AsFd::as_fd(&root);
            let bar = progress_bar();
            let progress = |done: usize, total: usize| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            };
            let report: Report = if paths.is_empty() {
                let req = rewind::Request {
                    to,
                    dry_run: a.dry_run,
                    undo: a.undo,
                };
                rewind::rewind(root, &mut store, req, &progress)
            } else {
                let only: Vec<crate::relpath::RelPath> = paths
                    .iter()
                    .filter_map(|p| crate::relpath::RelPath::new(p.as_bytes()).ok())
                    .collect();
                rewind::rewind_paths(
                    root,
                    &mut store,
                    to,
                    &only,
                    a.dry_run,
                    crate::capture::DEFAULT_MAX_BLOB,
                    &progress,
                )
            }
            .map_err(|e| CliError::fail(e.to_string()))?;
            bar.finish_and_clear();
            print_report(&serde_json::to_value(&report).unwrap_or_default(), a.json);
            if report.ok() {
                Ok(())
            } else {
                Err(CliError::fail("some paths could not be restored"))
            }
        }
    }
}
