//! `log` and `status` (and `status --log`, the daemon's log). Both name the captures that
//! stored nothing (over `--max-blob`, sockets, devices): a rewind cannot restore those paths.

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
    /// Print the end of the daemon's log (.ckpt/daemon.log) instead
    #[arg(long)]
    pub log: bool,
    /// How many lines of the daemon's log to print
    #[arg(
        short = 'n',
        long,
        value_name = "LINES",
        default_value_t = 50,
        requires = "log"
    )]
    pub lines: usize,
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
        let skipped = r["skipped"].as_array().cloned().unwrap_or_default();
        for line in skipped_lines(&skipped, false) {
            println!("{:>5}  ! {line}", "");
        }
    }
    Ok(())
}

/// Sentences naming the captures that stored nothing (`info::SkippedCapture` as JSON): per
/// turn, one for the files over `--max-blob`, one per kind for sockets and devices (at most
/// five names each), and one per file skipped for another reason; `with_turn` says which turn
/// (the log prints them under the turn's row).
fn skipped_lines(skipped: &[serde_json::Value], with_turn: bool) -> Vec<String> {
    let mut turns: Vec<u64> = skipped.iter().filter_map(|c| c["turn"].as_u64()).collect();
    turns.dedup();
    let mut out = Vec::new();
    for t in turns {
        let in_turn = if with_turn {
            format!(" in turn {t}")
        } else {
            String::new()
        };
        let of_turn: Vec<&serde_json::Value> = skipped
            .iter()
            .filter(|c| c["turn"].as_u64() == Some(t))
            .collect();
        let big: Vec<&serde_json::Value> = of_turn
            .iter()
            .copied()
            .filter(|c| c["over_max_blob"].as_bool() == Some(true))
            .collect();
        if !big.is_empty() {
            let what = if big.len() == 1 {
                "file over --max-blob".to_string()
            } else {
                "files over --max-blob".to_string()
            };
            out.push(skipped_group(&big, &what, &in_turn, true));
        }
        for kind in ["socket", "device"] {
            let group: Vec<&serde_json::Value> = of_turn
                .iter()
                .copied()
                .filter(|c| c["was"].as_str() == Some(kind))
                .collect();
            if !group.is_empty() {
                let what = if group.len() == 1 {
                    kind.to_string()
                } else {
                    format!("{kind}s")
                };
                out.push(skipped_group(&group, &what, &in_turn, false));
            }
        }
        let others = of_turn.iter().filter(|c| {
            c["over_max_blob"].as_bool() != Some(true)
                && !matches!(c["was"].as_str(), Some("socket" | "device"))
        });
        for c in others {
            out.push(format!(
                "{} was not captured{in_turn} ({}); a rewind cannot restore it",
                c["path"].as_str().unwrap_or("?"),
                c["reason"].as_str().unwrap_or("?")
            ));
        }
    }
    out
}

/// `N WHAT was/were not captured IN_TURN: names (sizes); a rewind cannot restore it/them`.
fn skipped_group(group: &[&serde_json::Value], what: &str, in_turn: &str, sizes: bool) -> String {
    const NAMED: usize = 5;
    let mut names: Vec<String> = group
        .iter()
        .take(NAMED)
        .map(|c| {
            let path = c["path"].as_str().unwrap_or("?");
            if sizes {
                let size = crate::info::human_size(c["size"].as_u64().unwrap_or(0));
                format!("{path} ({size})")
            } else {
                path.to_string()
            }
        })
        .collect();
    if group.len() > NAMED {
        names.push(format!("and {} more", group.len() - NAMED));
    }
    let (were, them) = if group.len() == 1 {
        ("was", "it")
    } else {
        ("were", "them")
    };
    format!(
        "{} {what} {were} not captured{in_turn}: {}; a rewind cannot restore {them}",
        group.len(),
        names.join(", ")
    )
}

/// Runs `status`.
pub fn status(a: StatusArgs) -> CliResult {
    if a.log {
        return daemon_log(a);
    }
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
    let skipped = v["skipped"].as_array().cloned().unwrap_or_default();
    for line in skipped_lines(&skipped, true) {
        println!("warning:  {line}");
    }
    Ok(())
}

/// Runs `status --log`: the end of the daemon's log, read through the daemon when the folder is
/// mounted (the store is hidden from the mount) and from the store itself when it is not.
fn daemon_log(a: StatusArgs) -> CliResult {
    let v = fetch(a.dir, Request::DaemonLog { lines: a.lines })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    if v["exists"].as_bool() != Some(true) {
        println!(
            "no daemon log: .ckpt/daemon.log does not exist (a daemon run with --foreground logs to its terminal)"
        );
        return Ok(());
    }
    for line in v["lines"].as_array().cloned().unwrap_or_default() {
        println!("{}", line.as_str().unwrap_or(""));
    }
    Ok(())
}
