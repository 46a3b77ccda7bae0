//! `fsck`: check a store.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::store::fsck;
use clap::Args;
use std::os::fd::AsFd;
use std::path::PathBuf;

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
    let value = match super::target(a.dir)? {
        Target::Mounted(folder) => {
            let resp = super::call(&folder, &Request::Fsck)?;
            if !resp.ok {
                return Err(CliError::fail(resp.error.unwrap_or_default()));
            }
            resp.data
        }
        Target::Offline(folder) => {
            let store =
                std::fs::File::open(folder.join(crate::relpath::STORE_DIR)).map_err(|e| {
                    CliError::fail(format!("{}: no ckpt-mount store: {e}", folder.display()))
                })?;
            serde_json::to_value(fsck::check(store.as_fd()))
                .map_err(|e| CliError::fail(e.to_string()))?
        }
    };
    let findings = value["findings"].as_array().cloned().unwrap_or_default();
    if let Some(f) = findings.iter().find(|f| f["kind"] == "version") {
        // Not a store of this format: nothing else in it was checked, so refuse in one line.
        return Err(CliError::fail(format!(
            "the store cannot be checked: {}",
            f["detail"].as_str().unwrap_or("unknown format")
        )));
    }
    let errors = findings.iter().filter(|f| f["severity"] == "error").count();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    } else {
        for f in &findings {
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
