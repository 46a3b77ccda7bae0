//! `demo`: the seed scenario end to end, through a real mount.

use super::{CliError, CliResult};
use crate::seed;
use clap::Args;
use std::path::Path;
use std::process::Command;

/// `ckpt-mount demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the temporary folder and print its path
    #[arg(long)]
    pub keep: bool,
}

fn me(args: &[&str], dir: &Path) -> Result<String, CliError> {
    let exe = std::env::current_exe().map_err(|e| CliError::fail(e.to_string()))?;
    let out = Command::new(exe)
        .args(args)
        .arg(dir)
        .output()
        .map_err(|e| CliError::fail(e.to_string()))?;
    if !out.status.success() {
        return Err(CliError::fail(format!(
            "ckpt-mount {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the demo.
pub fn run(a: DemoArgs) -> CliResult {
    let tmp = tempfile::Builder::new()
        .prefix("ckpt-demo-")
        .tempdir()
        .map_err(|e| CliError::fail(e.to_string()))?;
    let site = tmp.path().join("site");
    std::fs::create_dir(&site).map_err(|e| CliError::fail(e.to_string()))?;
    seed::build_project(&site).map_err(|e| CliError::fail(e.to_string()))?;
    let before = seed::snapshot(&site);
    me(&["mount"], &site)?;
    let result = (|| {
        seed::sh(&site, "echo 2 > .ckpt/turn").map_err(|e| CliError::fail(e.to_string()))?;
        seed::sh(&site, seed::AGENT_TURN).map_err(|e| CliError::fail(e.to_string()))?;
        let after_turn = seed::snapshot(&site);
        println!(
            "agent turn 2 changed: {}",
            seed::differing(&before, &after_turn).join(", ")
        );
        let out = me(&["rewind", "2", "--dir"], &site)?;
        print!("{out}");
        Ok::<_, CliError>(seed::differing(&before, &seed::snapshot(&site)))
    })();
    let unmounted = me(&["unmount"], &site);
    let ours = result?;
    unmounted?;
    let recipes = seed::run_recipes(tmp.path()).map_err(|e| CliError::fail(e.to_string()))?;
    println!();
    println!("{:<40} files wrong after undoing turn 2", "recipe");
    println!(
        "{:<40} {}",
        "ckpt-mount rewind 2",
        if ours.is_empty() {
            "none".to_string()
        } else {
            ours.join(", ")
        }
    );
    for (name, wrong) in &recipes {
        println!(
            "{:<40} {}",
            name,
            if wrong.is_empty() {
                "none".to_string()
            } else {
                wrong.join(", ")
            }
        );
    }
    if a.keep {
        let kept = tmp.keep();
        println!("kept {}", kept.display());
    }
    if ours.is_empty() {
        Ok(())
    } else {
        Err(CliError::fail("the rewind left differences"))
    }
}
