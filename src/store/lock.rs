//! The store's one-writer lock: an exclusive `flock` on `.ckpt/lock`, held by a daemon or an
//! offline command for as long as it has the store open.
//!
//! Taking it waits a while ([`LOCK_WAIT`]) for the holder to let go: a daemon whose folder was
//! just unmounted with a plain `umount(8)` is still exiting (its FUSE session ends first, its
//! threads and descriptors after), and a `mount` right after it met the lock still held
//! (3 in 200 cycles under load). When the lock stays held, the error names the process that
//! holds it.
//!
//! The holder is found in `/proc/locks`, by the lock file's device and inode number, and not
//! recorded in the lock file: the kernel's table names the process that holds the lock now
//! (a pid written in the file names whoever wrote last, which may be a process that exited or
//! one that has not written yet), it needs no write to a store a reader may only look at, and
//! the kernel translates the pid into the reader's pid namespace.

use crate::sys::{self, Errno};
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long opening a store waits for another process to release its lock. A daemon exits
/// within milliseconds of its unmount; ten seconds covers one slowed by a loaded machine, and
/// is short enough for a person waiting on a refusal.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The longest pause between two tries: a lock let go is taken within this.
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// The process holding a store's lock, as `/proc/locks` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// Its pid, in this process's pid namespace.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`), when it can be read.
    pub comm: Option<String>,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.comm {
            // A process names itself: quoted as a path is.
            Some(comm) => write!(
                f,
                "pid {} ({})",
                self.pid,
                crate::quote::quote_path(comm.as_bytes())
            ),
            None => write!(f, "pid {}", self.pid),
        }
    }
}

/// Why the lock was not taken. The store reports it as a [`StoreError`](super::StoreError)
/// (`error.rs`), so that this file needs nothing of the rest of the store.
#[derive(Debug)]
pub(super) enum LockFailed {
    /// A system call failed: what was being done, and its errno.
    Io(&'static str, Errno),
    /// Another process held the lock for all of [`LOCK_WAIT`]: who, when `/proc/locks` names it.
    Held(Option<LockHolder>),
}

/// Opens (creating) the `lock` file of the store directory `d` and takes its exclusive
/// `flock`, trying again for up to [`LOCK_WAIT`] while another process holds it; then
/// [`LockFailed::Held`], naming the holder when `/proc/locks` does.
pub(super) fn take(d: BorrowedFd<'_>) -> Result<OwnedFd, LockFailed> {
    let lock = sys::openat(
        d,
        c"lock",
        libc::O_CREAT | libc::O_RDWR | libc::O_NOFOLLOW,
        0o600,
    )
    .map_err(|e| LockFailed::Io("open lock", e))?;
    let deadline = Instant::now() + LOCK_WAIT;
    // An exiting daemon lets go within milliseconds: first tries come quickly.
    let mut pause = Duration::from_millis(2);
    loop {
        match sys::flock_try(lock.as_fd(), true) {
            Ok(()) => return Ok(lock),
            Err(Errno(libc::EWOULDBLOCK)) => {}
            Err(e) => return Err(LockFailed::Io("lock the store", e)),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LockFailed::Held(holder(lock.as_fd())));
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// The process holding a `flock` on the file of `lock`, from `/proc/locks`.
fn holder(lock: BorrowedFd<'_>) -> Option<LockHolder> {
    let st = sys::fstat(lock).ok()?;
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = flock_holder_in(
        &table,
        dev_major(st.st_dev),
        dev_minor(st.st_dev),
        st.st_ino,
    )?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_string());
    Some(LockHolder { pid, comm })
}

/// The major number of a device number (glibc's `gnu_dev_major`).
fn dev_major(dev: u64) -> u64 {
    ((dev & 0x0000_0000_000f_ff00) >> 8) | ((dev & 0xffff_f000_0000_0000) >> 32)
}

/// The minor number of a device number (glibc's `gnu_dev_minor`).
fn dev_minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev & 0x0000_0fff_fff0_0000) >> 12)
}

/// The pid holding a `FLOCK` on inode `ino` of device `major:minor` in the text of
/// `/proc/locks` (lines like `1: FLOCK  ADVISORY  WRITE 4242 fe:00:5366841 0 EOF`; the device
/// in hex). Lines of waiters (`1: -> FLOCK …`) and pid 0 (a holder outside this pid
/// namespace) name no one.
fn flock_holder_in(table: &str, major: u64, minor: u64, ino: u64) -> Option<u32> {
    table.lines().find_map(|line| {
        let mut fields = line.split_whitespace().skip(1);
        if fields.next()? != "FLOCK" {
            return None;
        }
        let _advisory = fields.next()?;
        let _mode = fields.next()?;
        let pid: u32 = fields.next()?.parse().ok()?;
        let mut id = fields.next()?.split(':');
        let maj = u64::from_str_radix(id.next()?, 16).ok()?;
        let min = u64::from_str_radix(id.next()?, 16).ok()?;
        let inode: u64 = id.next()?.parse().ok()?;
        (pid != 0 && (maj, min, inode) == (major, minor, ino)).then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
1: POSIX  ADVISORY  WRITE 700 fe:00:77 0 EOF
2: FLOCK  ADVISORY  WRITE 24054 fe:00:5366841 0 EOF
2: -> FLOCK  ADVISORY  WRITE 999 fe:00:5366842 0 EOF
3: FLOCK  ADVISORY  WRITE 24225 103:02:5366842 0 EOF
4: FLOCK  ADVISORY  READ 0 fe:00:88 0 EOF
5: OFDLCK ADVISORY  READ -1 fe:00:99 0 EOF
";

    #[test]
    fn the_holder_is_found_by_device_and_inode() {
        assert_eq!(flock_holder_in(TABLE, 0xfe, 0, 5366841), Some(24054));
        // A waiter is not the holder; the holder of the same inode on another device is not.
        assert_eq!(flock_holder_in(TABLE, 0xfe, 0, 5366842), None);
        assert_eq!(flock_holder_in(TABLE, 0x103, 2, 5366842), Some(24225));
        // Not a flock; outside this pid namespace; an unparsable pid.
        assert_eq!(flock_holder_in(TABLE, 0xfe, 0, 77), None);
        assert_eq!(flock_holder_in(TABLE, 0xfe, 0, 88), None);
        assert_eq!(flock_holder_in(TABLE, 0xfe, 0, 99), None);
        assert_eq!(flock_holder_in("", 0xfe, 0, 5366841), None);
        assert_eq!(flock_holder_in("garbage\n1:\n", 0xfe, 0, 5366841), None);
    }

    /// glibc's `gnu_dev_makedev`.
    fn makedev(major: u64, minor: u64) -> u64 {
        (major & 0xfff) << 8
            | (major & 0xffff_f000) << 32
            | (minor & 0xff)
            | (minor & 0xffff_ff00) << 12
    }

    #[test]
    fn device_numbers_split_as_glibc_does() {
        for (major, minor) in [(0xfe, 0), (8, 1), (0x103, 0x12345), (0xabcde, 0xfffff)] {
            let dev = makedev(major, minor);
            assert_eq!((dev_major(dev), dev_minor(dev)), (major, minor), "{dev:x}");
        }
        assert_eq!((dev_major(0xfe00), dev_minor(0xfe00)), (0xfe, 0));
    }

    /// The holder of a lock this process took is this process, with its command name.
    #[test]
    fn a_held_lock_names_its_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = std::fs::File::open(dir.path()).expect("open");
        let held = take(d.as_fd()).expect("the first lock");
        let me = holder(held.as_fd()).expect("found in /proc/locks");
        assert_eq!(me.pid, std::process::id());
        assert!(me.comm.is_some(), "{me}");
    }
}
