//! `mount` and `unmount`.

use super::{CliError, CliResult};
use crate::daemon::{self, MountOptions};
use crate::sys;
use crate::vfs_options::VfsOptions;
use clap::Args;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `ckpt-mount mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// The project folder to mount over itself
    pub dir: PathBuf,
    /// Stay attached and log to stderr instead of the store's daemon.log
    #[arg(long)]
    pub foreground: bool,
    /// Largest file stored per capture; bigger ones are recorded as skipped (K, M, G suffixes)
    #[arg(long, default_value = "1G", value_parser = super::parse_size)]
    pub max_blob: u64,
    /// Let other users use the mount (FUSE allow_other)
    #[arg(long)]
    pub allow_other: bool,
    /// Make every pre-image durable (fsync) before the mutation proceeds
    #[arg(long)]
    pub durable: bool,
    /// FUSE worker threads
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Kernel cache TTL for entries and attributes, in seconds
    #[arg(long, default_value_t = 60)]
    pub ttl: u64,
    /// Store new pre-images zstd-compressed (level 3); rewinds read both forms
    #[arg(long)]
    pub compress: bool,
    /// Serve every read and write in the daemon instead of kernel passthrough
    #[arg(long)]
    pub no_passthrough: bool,
    /// Mount a home, system or shared directory (such as /tmp) even so
    #[arg(long)]
    pub force: bool,
    /// Let the kernel check permissions (default_permissions) on a single-user mount too, as
    /// it always does with --allow-other; by default the host filesystem checks them
    #[arg(long)]
    pub kernel_permissions: bool,
    /// Mount options, comma-separated, as mount(8) takes them: ro, noexec, sync, dirsync,
    /// noatime, nodiratime, relatime, strictatime, lazytime, nosymfollow and their opposites,
    /// nosuid and nodev (always on), allow_other, default_permissions. A read-only (ro) mount
    /// refuses every write, rewind and undo, and reads history as ever
    #[arg(short = 'o', long = "options", value_name = "OPTIONS")]
    pub options: Vec<String>,
    /// Internal: the readiness pipe of a background daemon
    #[arg(long, hide = true)]
    pub ready_fd: Option<i32>,
}

/// `ckpt-mount unmount`.
#[derive(Debug, Args)]
pub struct UnmountArgs {
    /// The mounted folder
    pub dir: PathBuf,
}

impl MountArgs {
    /// `-o` read as [`VfsOptions`]; a word it does not accept is bad usage.
    pub fn vfs_options(&self) -> Result<VfsOptions, CliError> {
        VfsOptions::parse(&self.options).map_err(CliError::usage)
    }

    /// Bad usage that the arguments alone show: an `-o` word not accepted.
    pub fn check(&self) -> CliResult {
        self.vfs_options().map(drop)
    }
}

/// Mounts; in the background unless `--foreground`.
pub fn mount(a: MountArgs) -> CliResult {
    let vfs = a.vfs_options()?;
    if !a.foreground {
        recover_dead_mount(&a.dir)?;
    }
    let dir = crate::mount_policy::check_folder(&a.dir, a.force)
        .map_err(|e| CliError::fail(e.to_string()))?;
    let opts = MountOptions {
        dir: dir.clone(),
        max_blob: a.max_blob,
        allow_other: a.allow_other || vfs.allow_other,
        durable: a.durable,
        threads: a.threads,
        ttl_secs: a.ttl,
        passthrough: !a.no_passthrough,
        compress: a.compress,
        kernel_permissions: a.kernel_permissions || vfs.default_permissions,
        vfs,
    };
    if a.foreground {
        let ready = a.ready_fd.and_then(daemon::inherited_fd);
        if ready.is_none() {
            let _ =
                env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
                    .try_init();
        }
        return daemon::run(&opts, ready.is_none(), ready)
            .map_err(|e| CliError::fail(e.to_string()));
    }
    let pid = spawn_daemon(&dir, &a)?;
    let turn = crate::ipc::call::<crate::ipc::TurnAnswer>(
        &dir,
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
    println!("mounted {} (turn {turn}, daemon pid {pid})", dir.display());
    // The shell that ran this still stands in the folder under the new mount.
    if super::cwd_under_the_mount(&dir) {
        eprintln!("{}", super::under_the_mount_line(&dir));
    }
    Ok(())
}

/// Clears a dead mount at `dir` (its daemon killed or crashed: every access fails with
/// `ENOTCONN`) so that it can be mounted again. The store needs nothing: it is crash-safe, and
/// the new daemon completes a rewind the old one left unfinished.
pub fn recover_dead_mount(dir: &std::path::Path) -> CliResult {
    let Ok(canon) = crate::mounts::canonical(dir) else {
        return Ok(());
    };
    if crate::mounts::state(&canon) != crate::mounts::MountState::Dead {
        return Ok(());
    }
    eprintln!(
        "ckpt-mount: {} was a dead mount (its daemon is gone); detaching it and mounting again",
        canon.display()
    );
    crate::fusermount::unmount(&canon, true).map_err(|e| {
        CliError::fail(format!(
            "cannot detach the dead mount at {}: {}",
            canon.display(),
            unmount_error_text(&e)
        ))
    })
}

fn unmount_error_text(e: &crate::fusermount::UnmountError) -> String {
    match e {
        crate::fusermount::UnmountError::Busy => "it is busy".into(),
        crate::fusermount::UnmountError::Other(s) => s.clone(),
    }
}

/// Starts a background daemon for `dir` and waits until its mount answers; returns its pid.
pub fn spawn_daemon(dir: &std::path::Path, a: &MountArgs) -> Result<u32, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::fail(format!("cannot find own executable: {e}")))?;
    let (mut r, w) = sys::pipe()
        .map_err(|e| CliError::fail(format!("pipe: {e}")))?
        .pipe_files();
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("mount")
        .arg(dir)
        .arg("--foreground")
        .arg("--ready-fd=3")
        .arg(format!("--max-blob={}", a.max_blob))
        .arg(format!("--threads={}", a.threads))
        .arg(format!("--ttl={}", a.ttl))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // The daemon must not pin the caller's working directory (another mount, say).
        .current_dir("/");
    if a.allow_other {
        cmd.arg("--allow-other");
    }
    if a.durable {
        cmd.arg("--durable");
    }
    if a.no_passthrough {
        cmd.arg("--no-passthrough");
    }
    if a.compress {
        cmd.arg("--compress");
    }
    if a.force {
        cmd.arg("--force");
    }
    if a.kernel_permissions {
        cmd.arg("--kernel-permissions");
    }
    for list in &a.options {
        cmd.arg(format!("--options={list}"));
    }
    sys::detach_with_fd(&mut cmd, w.as_raw_fd(), 3);
    let child = cmd
        .spawn()
        .map_err(|e| CliError::fail(format!("cannot start the daemon: {e}")))?;
    drop(w);
    let mut said = String::new();
    let _ = r.read_to_string(&mut said);
    let (notes, answer) = ready_answer(&said);
    // Said whether or not the mount follows: what the daemon completed is done either way.
    for note in notes {
        eprintln!("ckpt-mount: {note}");
    }
    if answer == "ok" {
        Ok(child.id())
    } else if answer.is_empty() {
        Err(CliError::fail(format!(
            "the daemon for {} exited before mounting; see {}/.ckpt/daemon.log",
            dir.display(),
            dir.display()
        )))
    } else {
        Err(CliError::fail(answer))
    }
}

/// What a daemon wrote on its readiness pipe: its notes (lines beginning with
/// [`daemon::READY_NOTE`], which `mount` passes on) and its answer, the first other line: `ok`,
/// or why it did not mount (empty when it said nothing).
fn ready_answer(said: &str) -> (Vec<&str>, &str) {
    let notes = said
        .lines()
        .filter_map(|l| l.strip_prefix(daemon::READY_NOTE))
        .collect();
    let answer = said
        .lines()
        .find(|l| !l.starts_with(daemon::READY_NOTE))
        .unwrap_or("");
    (notes, answer)
}

trait PipeFiles {
    fn pipe_files(self) -> (std::fs::File, std::os::fd::OwnedFd);
}

impl PipeFiles for (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    fn pipe_files(self) -> (std::fs::File, std::os::fd::OwnedFd) {
        (std::fs::File::from(self.0), self.1)
    }
}

/// Unmounts and waits for the daemon to finish.
pub fn unmount(a: UnmountArgs) -> CliResult {
    let dir = unmount_quietly(&a.dir)?;
    println!("unmounted {}", dir.display());
    Ok(())
}

/// Unmounts `dir` and waits for its daemon to exit; returns the canonical path.
pub fn unmount_quietly(dir: &std::path::Path) -> Result<PathBuf, CliError> {
    let dir = crate::mounts::canonical(dir)
        .map_err(|e| CliError::fail(format!("cannot open {}: {e}", dir.display())))?;
    let state = crate::mounts::state(&dir);
    if state == crate::mounts::MountState::NotMounted {
        return Err(CliError::fail(format!(
            "{} is not mounted by ckpt-mount",
            dir.display()
        )));
    }
    let pid = crate::ipc::call::<crate::info::Status>(&dir, &crate::ipc::Request::Status)
        .ok()
        .and_then(|answer| answer.data?.pid)
        .and_then(|p| i32::try_from(p).ok());
    // The filesystem's device, by which a mount of it left elsewhere is found afterwards.
    let dev = crate::mounts::mount_at(&dir).map(|m| m.dev);
    // A dead mount has nobody to wait for and nothing to flush: detach it.
    let lazy = state == crate::mounts::MountState::Dead;
    match unmount_when_free(&dir, lazy) {
        Ok(()) => {}
        Err(crate::fusermount::UnmountError::Busy) => {
            return Err(CliError::fail(busy_line(&dir)));
        }
        Err(crate::fusermount::UnmountError::Other(e)) => {
            return Err(CliError::fail(format!(
                "cannot unmount {}: {e}",
                dir.display()
            )));
        }
    }
    if let Some(pid) = pid {
        wait_for_daemon(&dir, pid, dev.as_deref())?;
    }
    Ok(dir)
}

/// How long `unmount` tries again a mount the kernel calls busy while no process is found
/// holding it: a process that has just exited, or closed its last file inside, leaves the
/// kernel's reference to the mount for a moment (seen 2 times in 400 randomized shell-turn
/// cases under load, right after the last command of a case returned).
const TRANSIENT_BUSY: Duration = Duration::from_secs(2);

/// Unmounts `dir`, trying again for up to [`TRANSIENT_BUSY`] while it is busy and nothing
/// found holds it; busy with a holder named is said at once.
fn unmount_when_free(dir: &Path, lazy: bool) -> Result<(), crate::fusermount::UnmountError> {
    let start = Instant::now();
    loop {
        match crate::fusermount::unmount(dir, lazy) {
            Err(crate::fusermount::UnmountError::Busy)
                if start.elapsed() < TRANSIENT_BUSY
                    && crate::mounts::holders_list(dir).is_none() =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

/// How long `unmount` waits for the daemon to exit before it looks for a mount of the same
/// filesystem left elsewhere: a daemon whose last mount is gone exits within a moment.
const LOOK_FOR_COPIES_AFTER: Duration = Duration::from_secs(1);

/// How long `unmount` waits in all: a daemon stores what it had staged (the files removed
/// last) before it exits, and the store stays locked until then.
const DAEMON_EXIT_WAIT: Duration = Duration::from_secs(30);

/// Waits for the daemon `pid` of the unmounted `dir` to exit. It does not while the kernel
/// keeps its filesystem (`dev`) mounted elsewhere: a copy of the mount in another mount
/// namespace (made by `unshare -m`, a sandbox, a service's `PrivateMounts=`) or a bind mount.
/// Then, or when it has not exited in [`DAEMON_EXIT_WAIT`], the error says where the copy is,
/// which process holds it, and how to end the daemon.
fn wait_for_daemon(dir: &Path, pid: i32, dev: Option<&str>) -> CliResult {
    let start = Instant::now();
    let mut looked = false;
    while sys::process_alive(pid) {
        let waited = start.elapsed();
        let last = waited >= DAEMON_EXIT_WAIT;
        if last || (!looked && waited >= LOOK_FOR_COPIES_AFTER) {
            looked = true;
            if let Some(copy) = dev.and_then(crate::mounts::find_copy) {
                return Err(CliError::fail(still_mounted_line(dir, pid, &copy)));
            }
        }
        if last {
            return Err(CliError::fail(format!(
                "{} is unmounted, but its daemon (pid {pid}) has not exited after {} s and keeps the store locked; no other mount of it was found (one in a mount namespace this user may not inspect would keep it serving): `kill {pid}` stops it (the store is crash-safe)",
                dir.display(),
                DAEMON_EXIT_WAIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The line for an unmount whose daemon serves on because its filesystem is still mounted
/// elsewhere (see [`wait_for_daemon`]).
fn still_mounted_line(dir: &Path, daemon: i32, copy: &crate::mounts::StillMounted) -> String {
    use crate::mounts::StillMounted;
    match copy {
        StillMounted::Namespace { pid } => format!(
            "{} is unmounted here, but another mount namespace still has it mounted (process {pid} is in it), so its daemon (pid {daemon}) keeps serving it and keeps the store locked: end process {pid} or leave that namespace, or stop the daemon with `kill {daemon}`",
            dir.display()
        ),
        StillMounted::Here(point) => format!(
            "{} is unmounted, but the same mount is still at {}, so its daemon (pid {daemon}) keeps serving it and keeps the store locked: unmount {} too, or stop the daemon with `kill {daemon}`",
            dir.display(),
            point.display(),
            point.display()
        ),
    }
}

/// The line for a busy mount: who holds it, and what to do.
pub fn busy_line(dir: &std::path::Path) -> String {
    match crate::mounts::holders_list(dir) {
        Some(list) => format!(
            "{} is busy: in use by {list}; close or leave it and retry",
            dir.display()
        ),
        None => format!(
            "{} is busy: a process has a file open or its working directory inside; close it and retry",
            dir.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_notes_come_before_its_answer() {
        let said = format!(
            "{}completed the rewind to turn 2 that was cut off (3 restored, 1 deleted)\nok\n",
            daemon::READY_NOTE
        );
        let (notes, answer) = ready_answer(&said);
        assert_eq!(
            notes,
            ["completed the rewind to turn 2 that was cut off (3 restored, 1 deleted)"]
        );
        assert_eq!(answer, "ok");
        assert_eq!(
            ready_answer("cannot mount /x: busy\n"),
            (vec![], "cannot mount /x: busy")
        );
        assert_eq!(ready_answer(""), (vec![], ""));
    }
}
