//! `fsck`: check a store.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::store::fsck;
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
}

/// Runs `fsck`; exit code 1 when anything at error level is found.
pub fn run(a: FsckArgs) -> CliResult {
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
