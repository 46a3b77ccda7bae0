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
    /// The agent's name, as `log`, `agents` and `rewind --agent NAME` give it (default: the
    /// command's name); two `run`s under one name are one agent
    #[arg(long = "as", value_name = "NAME", value_parser = agent_name)]
    pub name: Option<String>,
    /// The command and its arguments: it and everything it starts are the agent, whose
    /// changes `rewind --agent` rewinds and the views mark (a process it leaves running when
    /// its parent exits is adopted by `run`, and stays the agent's)
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
    // Before anything is spawned: `wait_for_command` needs each ended child returned to it.
    crate::sys::default_sigchld();
    let mounted_before = mount_if_needed(&folder, a.force)?;
    // Resolved after the mount: the working directory is inside the mounted view, so the
    // command can never see the raw folder (the stale-cwd trap).
    let sub = cwd
        .strip_prefix(&folder)
        .map(|p| folder.join(p))
        .unwrap_or_else(|_| folder.clone());
    banner(&folder);
    let comm = program_name(prog);
    let name = a.name.unwrap_or_else(|| comm.clone());
    let marked = mark_as_agent(&folder, prog, name.clone(), comm);
    // A process the command starts and leaves behind (`nohup cmd &`, a dev server) is adopted
    // by this process when its parent exits, not by init: it still descends from the mark and
    // stays the agent's. Without it (an old kernel), such an orphan counts as another process.
    if let Err(e) = crate::sys::set_child_subreaper() {
        eprintln!(
            "ckpt-mount: processes {prog} leaves running will count as others' once their parent exits: {e}"
        );
    }
    let code = std::process::Command::new(prog)
        .args(rest)
        .current_dir(&sub)
        .spawn()
        .map(|child| wait_for_command(&child));
    if marked {
        hand_over_orphans(&folder, &name);
    }
    if !mounted_before {
        unmount_after(&folder);
    }
    match code {
        Err(e) => Err(CliError {
            message: format!("cannot run {prog}: {e}"),
            code: 127,
        }),
        Ok(0) => Ok(()),
        Ok(code) => Err(CliError {
            message: String::new(),
            code,
        }),
    }
}

/// Mounts `folder` with the defaults unless it is mounted already (a dead mount is recovered
/// first); whether it was mounted before.
fn mount_if_needed(folder: &std::path::Path, force: bool) -> Result<bool, CliError> {
    super::mount::recover_dead_mount(folder)?;
    if crate::mounts::is_ckpt_mount(folder) {
        return Ok(true);
    }
    let dir = crate::mount_policy::check_folder(folder, force)
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
        force,
        kernel_permissions: false,
        compress: false,
        options: Vec::new(),
        ready_fd: None,
    };
    super::mount::spawn_daemon(&dir, &args)?;
    Ok(false)
}

/// Waits for the command `child` to end, reaping on the way every orphan of its tree that this
/// process (their subreaper) adopted and that ended; the command's exit code (128 plus the
/// signal's number when a signal ended it). Orphans still running are left to run.
fn wait_for_command(child: &std::process::Child) -> i32 {
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let code = loop {
        match crate::sys::wait_any_child() {
            Ok((ended, status)) if ended == pid => break exit_code(status),
            // An adopted orphan ended.
            Ok(_) => {}
            Err(e) => {
                eprintln!("ckpt-mount: cannot wait for the command: {e}");
                break 127;
            }
        }
    };
    crate::sys::reap_ended_children();
    code
}

/// The exit code a shell gives for a raw wait status.
fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        127
    }
}

/// The command's name as the journal records it: the last component of `prog`.
fn program_name(prog: &str) -> String {
    std::path::Path::new(prog)
        .file_name()
        .map_or_else(|| prog.to_string(), |n| n.to_string_lossy().into_owned())
}

/// `--as NAME`: any text a person can type back, so neither empty nor with control
/// characters.
fn agent_name(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("an agent's name cannot be empty".into());
    }
    if s.chars().any(char::is_control) {
        return Err("an agent's name cannot hold control characters".into());
    }
    Ok(s.to_string())
}

/// Marks this process, and so the command about to start (its child) with everything it
/// starts, as the agent `name`, recording the command's name `comm`; marked before the
/// command exists, so its first change is the agent's. A failure is said and the command runs
/// anyway (its changes then count as any other process's).
fn mark_as_agent(folder: &std::path::Path, prog: &str, name: String, comm: String) -> bool {
    let of = super::agent::MarkOf {
        pid: std::process::id(),
        comm: Some(comm),
        name,
        via: "run",
        session: None,
    };
    match super::agent::mark(folder, of) {
        Ok(_) => true,
        Err(e) => {
            eprintln!(
                "ckpt-mount: {prog} runs without being marked as the agent: {}",
                e.message
            );
            false
        }
    }
}

/// Once the command has ended, marks each process of its tree that still runs (an orphan
/// `run` adopted: `nohup cmd &`, a dev server) as the agent `name` itself: when `run` exits
/// it goes to init, and would otherwise no longer descend from the mark. A failure is said;
/// that process's later changes then count as another's.
fn hand_over_orphans(folder: &std::path::Path, name: &str) {
    for pid in crate::sys::children_of_self() {
        let of = super::agent::MarkOf {
            pid,
            comm: None,
            name: name.to_string(),
            via: "run",
            session: None,
        };
        if let Err(e) = super::agent::mark(folder, of) {
            eprintln!(
                "ckpt-mount: process {pid}, which the agent left running, will count as another's once this command exits: {}",
                e.message
            );
        }
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
            by: None,
            conversation: None,
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
