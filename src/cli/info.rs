//! `log` and `status`.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use clap::Args;
use std::path::PathBuf;

/// `ckpt-mount log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `ckpt-mount status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

fn fetch(dir: Option<PathBuf>, req: Request) -> Result<serde_json::Value, CliError> {
    match super::target(dir)? {
        Target::Mounted(folder) => {
            let resp = super::call(&folder, &req)?;
            if resp.ok {
                Ok(resp.data)
            } else {
                Err(CliError::fail(resp.error.unwrap_or_default()))
            }
        }
        Target::Offline(folder) => super::query_offline(&folder, &req)?.map_err(CliError::fail),
    }
}

fn when(secs: u64) -> String {
    let d = secs % 86_400;
    format!("{:02}:{:02}:{:02}", d / 3600, (d % 3600) / 60, d % 60)
}

/// Runs `log`.
pub fn log(a: LogArgs) -> CliResult {
    let v = fetch(a.dir, Request::Log)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    println!(
        "{:>5}  {:<8}  {:>7} {:>8} {:>7}  {:>10}  {:<20} label",
        "turn", "time UTC", "created", "modified", "deleted", "bytes", "programs"
    );
    for r in v.as_array().cloned().unwrap_or_default() {
        let programs: Vec<String> = r["programs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.as_str().map(String::from))
            .collect();
        let n = |k: &str| r[k].as_u64().unwrap_or(0);
        println!(
            "{:>5}  {:<8}  {:>7} {:>8} {:>7}  {:>10}  {:<20} {}",
            n("turn"),
            when(n("time")),
            n("created"),
            n("modified"),
            n("deleted"),
            n("bytes"),
            programs.join(","),
            r["label"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

/// Runs `status`.
pub fn status(a: StatusArgs) -> CliResult {
    let v = fetch(a.dir, Request::Status)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    println!("folder:   {}", v["folder"].as_str().unwrap_or("?"));
    match v["pid"].as_u64() {
        Some(pid) => println!("mounted:  yes (daemon pid {pid}, uid {})", v["uid"]),
        None => println!("mounted:  no"),
    }
    if let Some(io) = v["io"].as_str() {
        println!("file I/O: {io}");
    }
    println!(
        "turn:     {} ({} paths captured in it)",
        v["turn"], v["captures_this_turn"]
    );
    println!(
        "store:    {} bytes in {} blobs, dedup ratio {:.2}",
        v["store_bytes"],
        v["blobs"],
        v["dedup_ratio"].as_f64().unwrap_or(1.0)
    );
    let (size, warn) = (
        v["store_bytes"].as_u64().unwrap_or(0),
        v["warn_bytes"].as_u64().unwrap_or(u64::MAX),
    );
    if size > warn {
        println!(
            "warning:  the store is over {warn} bytes; free space with: ckpt-mount prune --keep-turns N"
        );
    }
    Ok(())
}
