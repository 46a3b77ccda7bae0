//! `fsck`: check a store, or (`--start-over`) set aside one whose journal or `VERSION` is lost
//! and begin a new history.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::store::fsck::{self, FsckReport, Severity};
use crate::store::layout::Contents;
use crate::store::start_over::StartOver;
use clap::Args;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// `ckpt-mount fsck`.
#[derive(Debug, Args)]
pub struct FsckArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// When the store's journal or VERSION is lost but its blobs remain (every other
    /// command refuses such a store): move the old store's files into
    /// `.ckpt/attic/<UTC time>/`, deleting nothing, and begin a new history at turn 1. Refused
    /// on a store that opens as it is, and on a mounted folder
    #[arg(long)]
    pub start_over: bool,
}

/// Runs `fsck`; exit code 1 when anything at error level is found.
pub fn run(a: FsckArgs) -> CliResult {
    if a.start_over {
        return start_over(a);
    }
    let (folder, report) = match super::target(a.dir)? {
        Target::Mounted(folder) => {
            let report: FsckReport = super::ask_daemon(&folder, &Request::Fsck)?;
            (folder, report)
        }
        Target::Offline(folder) => {
            let report = offline(&folder)?;
            (folder, report)
        }
    };
    if let Some(f) = report.findings.iter().find(|f| f.kind == "layout") {
        // Not laid out as a store (a symlink, blobs without a journal …): refused in one line,
        // as every other command refuses it.
        return Err(CliError::fail(format!(
            "{}: {}",
            folder.display(),
            f.detail
        )));
    }
    if let Some(f) = report.findings.iter().find(|f| f.kind == "version") {
        // Not a store of this format: nothing else in it was checked, so refuse in one line.
        return Err(CliError::fail(format!(
            "the store cannot be checked: {}",
            f.detail
        )));
    }
    print_report(&report, a.json)
}

/// The check of an unmounted folder's store, reached through descriptors: a `.ckpt` that is a
/// symlink is refused, never followed.
fn offline(folder: &Path) -> Result<FsckReport, CliError> {
    let root = super::open_folder(folder)?;
    let store = crate::store::open_store_dir(root.as_fd(), false)
        .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
    Ok(fsck::check(store.as_fd()))
}

/// Prints the findings (or the whole report as JSON); fails when one is an error.
fn print_report(report: &FsckReport, json: bool) -> CliResult {
    let findings = &report.findings;
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    if json {
        super::print_json(report);
    } else {
        for f in findings {
            let severity = match f.severity {
                Severity::Warn => "warn",
                Severity::Error => "error",
            };
            println!("{:<5} {:<18} {}", severity, f.kind, f.detail);
        }
        println!(
            "{} records, {} blobs: {} errors, {} warnings",
            report.records,
            report.blobs,
            errors,
            findings.len() - errors
        );
    }
    if errors == 0 {
        Ok(())
    } else {
        Err(CliError::fail(format!("the store has {errors} errors")))
    }
}

/// What `fsck --start-over --json` prints: where the old store went, what it held, and why.
#[derive(Debug, serde::Serialize)]
struct SetAside {
    /// The folder.
    folder: String,
    /// Where its old store's files are now, relative to the folder.
    set_aside: String,
    /// Blobs moved.
    blobs: usize,
    /// Their bytes.
    bytes: u64,
    /// Staged files moved.
    staged: usize,
    /// Why the store could not be opened.
    why: String,
}

/// `fsck --start-over`: only on an unmounted folder (the daemon holds the store, and a mount
/// over a store set aside would go on writing to it).
fn start_over(a: FsckArgs) -> CliResult {
    let folder = match super::target(a.dir)? {
        Target::Mounted(folder) => {
            return Err(CliError::fail(format!(
                "{} is mounted: unmount it first (ckpt-mount unmount {})",
                folder.display(),
                folder.display()
            )));
        }
        Target::Offline(folder) => folder,
    };
    let root = super::open_folder(&folder)?;
    let shown = folder.display();
    let done = crate::store::start_over::start_over(root.as_fd())
        .map_err(|e| CliError::fail(format!("{shown}: {e}")))?;
    match done {
        StartOver::SetAside { path, why, held } => {
            if a.json {
                super::print_json(&SetAside {
                    folder: shown.to_string(),
                    set_aside: path,
                    blobs: held.blobs,
                    bytes: held.bytes,
                    staged: held.staged,
                    why: why.to_string(),
                });
            } else {
                println!(
                    "set the old store aside in {shown}/{path}: {held}, deleting nothing; a new history begins at turn 1"
                );
            }
            Ok(())
        }
        StartOver::NotNeeded(Contents::History) => Err(CliError::fail(format!(
            "{shown}: the store opens as it is, its journal naming its history: nothing to start over (ckpt-mount fsck checks it, ckpt-mount prune forgets old turns)"
        ))),
        StartOver::NotNeeded(Contents::New) => Err(CliError::fail(format!(
            "{shown}: the store holds no history yet: nothing to start over"
        ))),
    }
}
