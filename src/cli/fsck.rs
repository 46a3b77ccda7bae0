//! `fsck`: check a store, or (`--start-over`) set aside one whose journal or `VERSION` is lost
//! and begin a new history.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::store::fsck;
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
    let (folder, value) = match super::target(a.dir)? {
        Target::Mounted(folder) => {
            let resp = super::call(&folder, &Request::Fsck)?;
            if !resp.ok {
                return Err(CliError::fail(resp.error.unwrap_or_default()));
            }
            (folder, resp.data)
        }
        Target::Offline(folder) => {
            let value = offline(&folder)?;
            (folder, value)
        }
    };
    let findings = value["findings"].as_array().cloned().unwrap_or_default();
    if let Some(f) = findings.iter().find(|f| f["kind"] == "layout") {
        // Not laid out as a store (a symlink, blobs without a journal …): refused in one line,
        // as every other command refuses it.
        return Err(CliError::fail(format!(
            "{}: {}",
            folder.display(),
            f["detail"]
                .as_str()
                .unwrap_or("the store is not laid out as one")
        )));
    }
    if let Some(f) = findings.iter().find(|f| f["kind"] == "version") {
        // Not a store of this format: nothing else in it was checked, so refuse in one line.
        return Err(CliError::fail(format!(
            "the store cannot be checked: {}",
            f["detail"].as_str().unwrap_or("unknown format")
        )));
    }
    print_report(&value, &findings, a.json)
}

/// The check of an unmounted folder's store, reached through descriptors: a `.ckpt` that is a
/// symlink is refused, never followed.
fn offline(folder: &Path) -> Result<serde_json::Value, CliError> {
    let root = super::open_folder(folder)?;
    let store = crate::store::open_store_dir(root.as_fd(), false)
        .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
    serde_json::to_value(fsck::check(store.as_fd())).map_err(|e| CliError::fail(e.to_string()))
}

/// Prints the findings (or the whole report as JSON); fails when one is an error.
fn print_report(
    value: &serde_json::Value,
    findings: &[serde_json::Value],
    json: bool,
) -> CliResult {
    let errors = findings.iter().filter(|f| f["severity"] == "error").count();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    } else {
        for f in findings {
            println!(
                "{:<5} {:<18} {}",
                f["severity"].as_str().unwrap_or("?"),
                f["kind"].as_str().unwrap_or("?"),
                f["detail"].as_str().unwrap_or("")
            );
        }
        println!(
            "{} records, {} blobs: {} errors, {} warnings",
            value["records"],
            value["blobs"],
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
                let v = serde_json::json!({
                    "folder": shown.to_string(),
                    "set_aside": path,
                    "blobs": held.blobs,
                    "bytes": held.bytes,
                    "staged": held.staged,
                    "why": why.to_string(),
                });
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
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
