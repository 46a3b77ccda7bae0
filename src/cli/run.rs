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
    /// Mount a home, system or shared directory (such as /tmp) even so
    #[arg(long)]
    pub force: bool,
    /// The command and its arguments: it and everything it starts are the agent, whose
    /// changes `rewind --agent` rewinds and the views mark
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
    let (prog, rest) = a
        .command
        .split_first()
        .ok_or_else(|| CliError::usage("run needs a command after --"))?;
    // Before anything is mounted: a typo must not leave a mount (or a store) behind.
    if find_program(prog, &cwd).is_none() {
        return Err(CliError {
            message: format!("cannot run {prog}: command not found (nothing was mounted)"),
            code: 127,
        });
    }
    super::mount::recover_dead_mount(&folder)?;
    let mounted_before = crate::mounts::is_ckpt_mount(&folder);
    if !mounted_before {
        let dir = crate::mount_policy::check_folder(&folder, a.force)
            .map_err(|e| CliError::fail(e.to_string()))?;
        let args = super::mount::MountArgs {
            dir: dir.clone(),
            foreground: false,
            max_blob: crate::capture::DEFAULT_MAX_BLOB,
            allow_other: false,
            durable: false,
            threads: 4,
            ttl: 60,
            no_passthrough: false,
            force: a.force,
            kernel_permissions: false,
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
    banner(&folder);
    mark_as_agent(&folder, prog);
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
        unmount_after(&folder);
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

/// Marks this process, and so the command about to start (its child) with everything it
/// starts, as the agent, named by the command; marked before the command exists, so its
/// first change is the agent's. A failure is said and the command runs anyway (its changes
/// then count as any other process's).
fn mark_as_agent(folder: &std::path::Path, prog: &str) {
    let name = std::path::Path::new(prog)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    if let Err(e) = super::agent::mark(folder, std::process::id(), name, "run", None) {
        eprintln!(
            "ckpt-mount: {prog} runs without being marked as the agent: {}",
            e.message
        );
    }
}

/// Unmounts the folder `run` mounted, waiting up to five seconds for stragglers (a pager, a
/// language server) to leave; if others still use it, it stays mounted and the user is told
/// who holds it and how to finish.
fn unmount_after(folder: &std::path::Path) {
    let mut last = Ok(());
    for _ in 0..50 {
        last = super::mount::unmount_quietly(folder).map(drop);
        if last.is_ok() {
            return;
        }
        // Unmounted, but its daemon lives on (the mount left in another namespace): the error
        // says so, and no retry can help.
        if !crate::mounts::is_ckpt_mount(folder) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let holders = crate::mounts::is_ckpt_mount(folder)
        .then(|| crate::mounts::holders_list(folder))
        .flatten();
    let Some(list) = holders else {
        if let Err(e) = last {
            eprintln!("ckpt-mount: {}", e.message);
        }
        return;
    };
    eprintln!(
        "ckpt-mount: {} stays mounted: still in use by {list}; when they are done, run: ckpt-mount unmount {}",
        folder.display(),
        folder.display()
    );
}

/// On a terminal, one line before the command starts: which folder is captured, from which
/// turn, and how to undo.
fn banner(folder: &std::path::Path) {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return;
    }
    let turn = crate::ipc::call::<crate::ipc::TurnAnswer>(
        folder,
        &crate::ipc::Request::Turn {
            set: None,
            label: None,
        },
    )
    .ok()
    .and_then(|answer| answer.data)
    .map_or(crate::ids::Turn::new(0), |answer| answer.turn);
    eprintln!(
        "ckpt-mount: capturing {} from turn {turn}; undo with: ckpt-mount rewind {turn} --dir {}",
        folder.display(),
        folder.display()
    );
}

/// Where `prog` would be run from: itself when it names a path (relative to `cwd`), else the
/// first executable file of that name on `$PATH`.
fn find_program(prog: &str, cwd: &std::path::Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        let p = cwd.join(prog);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| runnable(p))
}
