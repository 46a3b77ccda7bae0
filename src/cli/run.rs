//! `run`: mount if needed, run a command inside the mount, unmount on exit.

use super::{CliError, CliResult};
use clap::Args;
use std::path::PathBuf;

/// `ckpt-mount run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The folder (default: the ckpt-mount folder containing the current directory, else the
    /// current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The command and its arguments
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Runs `run`; exits with the command's code.
pub fn run(a: RunArgs) -> CliResult {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::fail(format!("no current directory: {e}")))?;
    let folder = match a.dir {
        Some(d) => d
            .canonicalize()
            .map_err(|e| CliError::fail(format!("cannot open {}: {e}", d.display())))?,
        None => crate::mounts::find_folder(&cwd).unwrap_or_else(|| cwd.clone()),
    };
    let mounted_before = crate::mounts::is_ckpt_mount(&folder);
    if !mounted_before {
        let dir = crate::daemon::check_folder(&folder).map_err(CliError::fail)?;
        let args = super::mount::MountArgs {
            dir: dir.clone(),
            foreground: false,
            max_blob: crate::capture::DEFAULT_MAX_BLOB,
            allow_other: false,
            durable: false,
            threads: 4,
            ttl: 60,
            no_passthrough: false,
            compress: false,
            ready_fd: None,
        };
        super::mount::spawn_daemon(&dir, &args)?;
    }
    // Resolved after the mount: the working directory is inside the mounted view, so the
    // command can never see the raw folder (the stale-cwd trap).
    let sub = cwd
        .strip_prefix(&folder)
        .map(|p| folder.join(p))
        .unwrap_or_else(|_| folder.clone());
    let (prog, rest) = a
        .command
        .split_first()
        .ok_or_else(|| CliError::usage("run needs a command after --"))?;
    let status = std::process::Command::new(prog)
        .args(rest)
        .current_dir(&sub)
        .status();
    let code = match &status {
        Ok(s) => s
            .code()
            .unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(s).unwrap_or(0)),
        Err(_) => 127,
    };
    if !mounted_before {
        let mut last = Ok(());
        for _ in 0..50 {
            last = super::mount::unmount_quietly(&folder).map(drop);
            if last.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if let Err(e) = last {
            eprintln!("ckpt-mount: {}", e.message);
        }
    }
    match status {
        Err(e) => Err(CliError {
            message: format!("cannot run {prog}: {e}"),
            code: 127,
        }),
        Ok(_) if code == 0 => Ok(()),
        Ok(_) => Err(CliError {
            message: String::new(),
            code,
        }),
    }
}
