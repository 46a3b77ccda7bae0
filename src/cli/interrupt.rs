//! Ctrl-C while a rewind, undo or redo changes the folder.
//!
//! A mounted folder's rewind runs in the daemon, which finishes it whatever becomes of the
//! CLI that asked: killed by `SIGINT`, the CLI used to end in silence while the folder went on
//! changing. Stopping the rewind half-way is not offered either: it would leave a mix of two
//! turns, which is what the journal's framing exists to avoid. So the first Ctrl-C says, in one
//! line, that the operation goes on and which command takes it back, and the CLI keeps waiting
//! and prints the report as usual: the folder is held by the rewind until it ends anyway (every
//! change waits for it), so the prompt back early would buy nothing, and the report says what
//! changed. A second Ctrl-C stops waiting (exit 130) and says the operation still goes on.
//!
//! On an unmounted folder the CLI runs the rewind itself; the first Ctrl-C is answered the
//! same way, and a second one ends the process where the rewind stands, as a crash would: the
//! journal then holds a cut-off rewind, which the next `mount` (or rewind, undo, redo)
//! completes first.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The exit code of a command ended by `SIGINT` (128 + 2), as shells report one.
pub(super) const INTERRUPTED: i32 = 130;

/// What is running, for the lines a Ctrl-C prints.
#[derive(Debug, Clone)]
pub struct Running {
    /// `rewind`, `undo` or `redo`.
    pub what: &'static str,
    /// The command that takes it back: `undo` (or `redo`, for an undo).
    pub back: &'static str,
    /// The folder.
    pub folder: PathBuf,
    /// Whether the daemon runs it (a mounted folder) rather than this process.
    pub in_daemon: bool,
}

impl Running {
    /// The operation on `folder`, run by its daemon when `in_daemon`.
    pub fn new(what: &'static str, folder: &Path, in_daemon: bool) -> Self {
        Self {
            what,
            back: if what == "undo" { "redo" } else { "undo" },
            folder: folder.to_path_buf(),
            in_daemon,
        }
    }

    /// The line of the first Ctrl-C.
    pub fn first_line(&self) -> String {
        let (what, back, dir) = (self.what, self.back, self.folder.display());
        if self.in_daemon {
            format!(
                "ckpt-mount: the {what} goes on in the daemon (it is never stopped half-way); waiting for it to end, then `ckpt-mount {back} --dir {dir}` takes it back (Ctrl-C again stops waiting, not the {what})"
            )
        } else {
            format!(
                "ckpt-mount: the {what} goes on (stopped half-way it would leave the folder half done); waiting for it to end, then `ckpt-mount {back} --dir {dir}` takes it back (Ctrl-C again stops it where it is)"
            )
        }
    }

    /// The line of the second Ctrl-C, before exiting.
    pub fn second_line(&self) -> String {
        let (what, back, dir) = (self.what, self.back, self.folder.display());
        if self.in_daemon {
            format!(
                "ckpt-mount: stopped waiting; the {what} goes on in the daemon, and once it ends `ckpt-mount {back} --dir {dir}` takes it back"
            )
        } else {
            format!(
                "ckpt-mount: stopped: the {what} was cut off half-way; `ckpt-mount mount {dir}` completes it"
            )
        }
    }
}

/// While alive, a Ctrl-C is answered as the module header says; dropped (the answer is in),
/// a Ctrl-C ends the process at once, quietly, as it would have without it.
pub struct KeepGoing {
    waiting: Arc<AtomicBool>,
}

impl KeepGoing {
    /// Blocks `SIGINT` in this thread, and so in the threads it starts from now on (an
    /// offline rewind's workers), and starts the thread that takes it. `bar` is the progress
    /// bar on stderr, cleared for the line and drawn again after it. When the signal cannot be
    /// blocked, Ctrl-C is left as it was.
    pub fn start(running: Running, bar: indicatif::ProgressBar) -> Self {
        let waiting = Arc::new(AtomicBool::new(true));
        if let Err(e) = crate::sys::block_sigint() {
            log::debug!("cannot block SIGINT: {e}");
            return Self { waiting };
        }
        let flag = Arc::clone(&waiting);
        let started = std::thread::Builder::new()
            .name("ckpt-sigint".into())
            .spawn(move || take_interrupts(&running, &flag, &bar));
        if let Err(e) = started {
            log::debug!("cannot start the SIGINT thread: {e}");
        }
        Self { waiting }
    }
}

impl Drop for KeepGoing {
    fn drop(&mut self) {
        self.waiting.store(false, Ordering::SeqCst);
    }
}

/// The thread that takes each `SIGINT` (see the module header).
fn take_interrupts(running: &Running, waiting: &AtomicBool, bar: &indicatif::ProgressBar) {
    let mut taken = 0u32;
    while crate::sys::wait_for_sigint().is_ok() {
        if !waiting.load(Ordering::SeqCst) {
            std::process::exit(INTERRUPTED);
        }
        taken += 1;
        if taken == 1 {
            bar.suspend(|| eprintln!("{}", running.first_line()));
        } else {
            bar.suspend(|| eprintln!("{}", running.second_line()));
            std::process::exit(INTERRUPTED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_names_what_goes_on_and_the_command_that_takes_it_back() {
        let r = Running::new("rewind", Path::new("/p"), true);
        assert!(r.first_line().contains("the rewind goes on in the daemon"));
        assert!(
            r.first_line()
                .contains("`ckpt-mount undo --dir /p` takes it back")
        );
        assert!(
            r.second_line()
                .contains("stopped waiting; the rewind goes on")
        );
        let u = Running::new("undo", Path::new("/p"), true);
        assert!(u.first_line().contains("`ckpt-mount redo --dir /p`"));
        let offline = Running::new("redo", Path::new("/p"), false);
        assert!(offline.first_line().contains("`ckpt-mount undo --dir /p`"));
        assert!(
            offline
                .second_line()
                .contains("cut off half-way; `ckpt-mount mount /p` completes it")
        );
        for line in [r.first_line(), r.second_line(), offline.second_line()] {
            assert_eq!(line.lines().count(), 1, "{line}");
        }
    }
}
