//! `prune`: retention.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::store::prune::UndoHistory;
use clap::Args;
use std::path::PathBuf;

/// `ckpt-mount prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Keep only this many of the newest turns (the current turn always stays)
    #[arg(long)]
    pub keep_turns: Option<usize>,
    /// Drop the oldest turns until the store fits in this size (K, M, G suffixes)
    #[arg(long, value_parser = super::parse_size)]
    pub max_size: Option<u64>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

impl PruneArgs {
    /// The usage errors no folder is needed to know (see [`super::Cli::check`]).
    pub fn check(&self) -> CliResult {
        if self.keep_turns.is_none() && self.max_size.is_none() {
            return Err(CliError::usage(
                "prune needs --keep-turns N and/or --max-size SIZE",
            ));
        }
        if self.keep_turns == Some(0) {
            return Err(CliError::usage("--keep-turns must be at least 1"));
        }
        Ok(())
    }
}

/// Runs `prune` (after [`PruneArgs::check`]).
pub fn run(a: PruneArgs) -> CliResult {
    // A spinner on a terminal (silent otherwise): a prune that rewrites packs can take a while.
    let spinner =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    spinner.set_message("pruning");
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let v = match super::target(a.dir)? {
        Target::Mounted(folder) => {
            let resp = super::call(
                &folder,
                &Request::Prune {
                    keep_turns: a.keep_turns,
                    max_size: a.max_size,
                    undo: UndoHistory::Drop,
                    dry_run: false,
                    expect: None,
                },
            )?;
            if !resp.ok {
                return Err(CliError::fail(resp.error.unwrap_or_default()));
            }
            resp.data
        }
        Target::Offline(folder) => {
            let req = Request::Prune {
                keep_turns: a.keep_turns,
                max_size: a.max_size,
                undo: UndoHistory::Drop,
                dry_run: false,
                expect: None,
            };
            super::query_offline(&folder, &req)?
                .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?
        }
    };
    spinner.finish_and_clear();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        let list = |k: &str| {
            v[k].as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        let size = |k: &str| crate::units::human_size(v[k].as_u64().unwrap_or(0));
        let removed = v["removed_blobs"].as_u64().unwrap_or(0);
        println!(
            "pruned turns [{}]; kept [{}]; removed {removed} {}, freed {}; the store is {}",
            list("dropped_turns"),
            list("kept_turns"),
            if removed == 1 { "blob" } else { "blobs" },
            size("freed_bytes"),
            size("store_bytes")
        );
        let lost = list("lost_ops");
        if !lost.is_empty() {
            println!("operations that can no longer be undone or redone: {lost}");
        }
        let rewound = list("lost_rewound_turns");
        if !rewound.is_empty() {
            println!("rewound turns no undo can bring back any more: [{rewound}]");
        }
    }
    Ok(())
}
