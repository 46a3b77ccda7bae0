//! Which folders are mounted by ckpt-mount (from `/proc/self/mountinfo`), and which folder a
//! command means when `--dir` is not given.

use std::path::{Path, PathBuf};

/// The filesystem type of every ckpt-mount mount, by which its mounts are recognised (the
/// source is the folder's path, as bindfs shows it).
pub const FSTYPE: &str = "fuse.ckpt-mount";
/// The source every mount had before it was the folder's path: root's mounts, made without
/// the subtype, showed type `fuse`, so a daemon started by an older build is still found by it.
const OLD_SOURCE: &str = "ckpt-mount";

/// A mount as mountinfo lists it.
#[derive(Debug, Clone)]
pub struct MountEntry {
    /// The device of its filesystem, `major:minor` (a FUSE mount's is anonymous, `0:N`, and
    /// names that one filesystem while it lives, wherever it is mounted).
    pub dev: String,
    /// Mount point.
    pub point: PathBuf,
    /// Filesystem type.
    pub fstype: String,
    /// Source.
    pub source: String,
}

impl MountEntry {
    /// Whether ckpt-mount made this mount: its type, or an older build's source.
    pub fn is_ckpt(&self) -> bool {
        self.fstype == FSTYPE || (self.fstype == "fuse" && self.source == OLD_SOURCE)
    }
}

fn unescape(s: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = u8::from_str_radix(&s[i + 1..i + 4], 8).unwrap_or(b'?');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every mount of this process's mount namespace, in mount order.
pub fn mounts() -> Vec<MountEntry> {
    std::fs::read("/proc/self/mountinfo")
        .map(|bytes| mounts_in(&bytes))
        .unwrap_or_default()
}

/// The mounts of a mountinfo file's bytes. The kernel writes a mount point's bytes as they are
/// (only blanks and backslashes escaped), so one that is not UTF-8 must not make the whole file
/// unreadable: read as text, no folder was found mounted while any such mount existed, and
/// every command (shell completion too) said none was. That one mount reads with U+FFFD.
fn mounts_in(bytes: &[u8]) -> Vec<MountEntry> {
    parse_mountinfo(&String::from_utf8_lossy(bytes))
}

/// The mounts a mountinfo file lists (`proc(5)`), in its order.
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let dev = fields.get(2)?;
            let point = fields.get(4)?;
            let fstype = fields.get(sep + 1)?;
            let source = fields.get(sep + 2).map_or(String::new(), |s| unescape(s));
            Some(MountEntry {
                dev: (*dev).to_string(),
                point: PathBuf::from(unescape(point)),
                fstype: (*fstype).to_string(),
                source,
            })
        })
        .collect()
}

/// The topmost mount at `dir` (canonical), if `dir` is a mount point.
pub fn mount_at(dir: &Path) -> Option<MountEntry> {
    mounts().into_iter().rev().find(|m| m.point == dir)
}

/// Whether `dir` (canonical) is mounted by ckpt-mount.
pub fn is_ckpt_mount(dir: &Path) -> bool {
    mount_at(dir).is_some_and(|m| m.is_ckpt())
}

/// The ckpt-mount folder containing `start`: the deepest ckpt-mount mount point above it, or
/// else the nearest directory above it with a store (see `has_store`).
pub fn find_folder(start: &Path) -> Option<PathBuf> {
    let start = start.canonicalize().ok()?;
    let mut best: Option<PathBuf> = None;
    for m in mounts() {
        let longer = best
            .as_ref()
            .is_none_or(|b| m.point.as_os_str().len() > b.as_os_str().len());
        if m.is_ckpt() && start.starts_with(&m.point) && longer {
            best = Some(m.point);
        }
    }
    if best.is_some() {
        return best;
    }
    let mut cur = Some(start.as_path());
    while let Some(d) = cur {
        if has_store(d) {
            return Some(d.to_path_buf());
        }
        cur = d.parent();
    }
    None
}

/// Whether `dir` holds a store, even a damaged one: its `.ckpt` is a symlink (which opening the
/// store refuses, naming it), or a directory holding one of the store's own files. A store
/// that lost its `VERSION` is still found here, so that a command run in it refuses it in one
/// line instead of acting on a folder further up. Nothing is followed.
fn has_store(dir: &Path) -> bool {
    let store = dir.join(crate::relpath::STORE_DIR);
    match std::fs::symlink_metadata(&store) {
        Ok(m) if m.file_type().is_symlink() => true,
        Ok(m) if m.is_dir() => ["VERSION", "journal.jsonl", "blobs"]
            .iter()
            .any(|n| std::fs::symlink_metadata(store.join(n)).is_ok()),
        _ => false,
    }
}

/// Whether ckpt-mount serves a folder, and whether its daemon still answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountState {
    /// No ckpt-mount mount at the folder.
    NotMounted,
    /// Mounted and served.
    Live,
    /// Still mounted, but its daemon is gone (killed, crashed): every access fails with
    /// `ENOTCONN` until the mount is detached.
    Dead,
}

/// `dir` made absolute and canonical, even when it is a dead mount point, where
/// `canonicalize` itself fails (`ENOTCONN`): then its parent is canonicalized and its name
/// appended.
pub fn canonical(dir: &Path) -> std::io::Result<PathBuf> {
    match dir.canonicalize() {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            let abs = std::path::absolute(dir)?;
            match (abs.parent(), abs.file_name()) {
                (Some(parent), Some(name)) => Ok(parent.canonicalize()?.join(name)),
                _ => Err(e),
            }
        }
        other => other,
    }
}

/// The state of the folder at `dir` (canonical, see [`canonical`]). A daemon that answers on
/// its control socket is alive; one that does not may be gone, which the mount itself
/// confirms: `statfs` of its root fails with `ENOTCONN` once the kernel has lost the daemon.
/// `statfs` because the kernel always asks the daemon for it: `stat` can answer from the
/// attribute cache, and `open` of a directory once listed is served by the kernel alone (the
/// mount answers `OPENDIR` with `ENOSYS`), so both succeeded on a dead mount after an `ls`.
pub fn state(dir: &Path) -> MountState {
    if !is_ckpt_mount(dir) {
        return MountState::NotMounted;
    }
    if crate::ipc::listening(dir) {
        return MountState::Live;
    }
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return MountState::Live;
    };
    let answer = crate::sys::open_path(&c, libc::O_PATH | libc::O_DIRECTORY)
        .and_then(|fd| crate::sys::fstatvfs(std::os::fd::AsFd::as_fd(&fd)));
    match answer {
        Err(crate::sys::Errno(libc::ENOTCONN)) => MountState::Dead,
        _ => MountState::Live,
    }
}

/// The line a command prints for a dead mount: what happened and the one command that
/// recovers.
pub fn dead_mount_line(dir: &Path) -> String {
    format!(
        "{} is a dead mount: its ckpt-mount daemon is gone (killed or crashed); recover with: ckpt-mount mount {}",
        dir.display(),
        dir.display()
    )
}

/// A process that keeps a mount busy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: i32,
    /// Its command name (`/proc/PID/comm`).
    pub command: String,
    /// What it holds: "working directory", "root" or "open file".
    pub what: &'static str,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A process names itself: its command name is quoted as a path is.
        let command = crate::quote::quote_path(self.command.as_bytes());
        write!(f, "{} ({command}, {})", self.pid, self.what)
    }
}

/// [`holders`] of `dir` as one list for a message (`1234 (vim, open file), …`), or `None`
/// when none can be named.
pub fn holders_list(dir: &Path) -> Option<String> {
    let found: Vec<String> = holders(dir).iter().map(ToString::to_string).collect();
    (!found.is_empty()).then(|| found.join(", "))
}

/// The processes (those this user may inspect) whose working directory, root or an open file
/// is on the mount at `dir` (canonical). A path under `dir` is not enough: a shell that stood
/// in the folder before the mount shows the same path but holds the folder underneath, so the
/// device of what each link leads to decides.
pub fn holders(dir: &Path) -> Vec<Holder> {
    use std::os::unix::fs::MetadataExt;
    let Ok(dev) = std::fs::metadata(dir).map(|m| m.dev()) else {
        return Vec::new();
    };
    let on_mount = |link: &Path| {
        std::fs::read_link(link).is_ok_and(|target| target.starts_with(dir))
            && std::fs::metadata(link).is_ok_and(|m| m.dev() == dev)
    };
    let me = std::process::id().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in procs.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if name.to_str() == Some(me.as_str()) {
            continue;
        }
        let base = entry.path();
        let what = if on_mount(&base.join("cwd")) {
            Some("working directory")
        } else if on_mount(&base.join("root")) {
            Some("root")
        } else {
            std::fs::read_dir(base.join("fd"))
                .ok()
                .and_then(|fds| fds.flatten().find(|fd| on_mount(&fd.path())))
                .map(|_| "open file")
        };
        if let Some(what) = what {
            let command = std::fs::read_to_string(base.join("comm"))
                .map(|c| c.trim_end().to_string())
                .unwrap_or_else(|_| "?".into());
            found.push(Holder { pid, command, what });
        }
    }
    found
}

/// Where a ckpt-mount filesystem is still mounted after its folder was unmounted: while any
/// mount of it is left, the kernel keeps the FUSE connection, so its daemon serves on and
/// keeps the store locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StillMounted {
    /// Mounted at this other place in this mount namespace (a bind mount).
    Here(PathBuf),
    /// Mounted in another mount namespace (`unshare -m`, a sandbox, a service with
    /// `PrivateMounts=`), which process `pid` is in.
    Namespace {
        /// A process in that namespace.
        pid: i32,
    },
}

/// Finds a mount of the ckpt-mount filesystem `dev` (`major:minor`, as mountinfo gives it):
/// first in this namespace, then in the others. Each other namespace is read once, through
/// the mountinfo of one of its processes; a process whose namespace this user may not
/// compare (another user's) is read on its own.
pub fn find_copy(dev: &str) -> Option<StillMounted> {
    let holds = |m: &MountEntry| m.dev == dev && m.is_ckpt();
    if let Some(m) = mounts().into_iter().find(holds) {
        return Some(StillMounted::Here(m.point));
    }
    let own = std::fs::read_link("/proc/self/ns/mnt").ok()?;
    let mut seen = std::collections::HashSet::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let base = entry.path();
        if let Ok(ns) = std::fs::read_link(base.join("ns/mnt"))
            && (ns == own || !seen.insert(ns))
        {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(base.join("mountinfo")) else {
            continue;
        };
        if parse_mountinfo(&text).iter().any(holds) {
            return Some(StillMounted::Namespace { pid });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_names_its_command_quoted() {
        let h = Holder {
            pid: 7,
            command: "vim\nfake".into(),
            what: "open file",
        };
        assert_eq!(h.to_string(), r#"7 ("vim\nfake", open file)"#);
    }

    #[test]
    fn mountinfo_lines_give_device_point_type_and_source() {
        let text = "36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - ext3 /dev/root rw\n\
                    90 29 0:53 / /tmp/p rw,nosuid,nodev shared:1 - fuse.ckpt-mount /tmp/p rw,user_id=0\n\
                    91 29 0:54 / /tmp/a\\040b rw,nosuid,nodev - fuse.ckpt-mount /tmp/a\\040b rw\n\
                    92 29 0:55 / /tmp/old rw,nosuid,nodev - fuse ckpt-mount rw,user_id=0\n\
                    93 29 0:56 / /tmp/bind rw,nosuid,nodev - fuse.bindfs /tmp/p rw\n\
                    94 29 0:57 / /tmp/other rw,nosuid,nodev - fuse.sshfs ckpt-mount rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 6);
        assert_eq!(m[0].dev, "98:0");
        assert_eq!(m[0].point, PathBuf::from("/mnt/a b"));
        assert!(!m[0].is_ckpt());
        assert_eq!(m[1].dev, "0:53");
        assert_eq!(m[1].point, PathBuf::from("/tmp/p"));
        assert_eq!(m[1].source, "/tmp/p");
        assert!(m[1].is_ckpt());
        // A folder with a space: both its point and its source are unescaped.
        assert_eq!(m[2].point, PathBuf::from("/tmp/a b"));
        assert_eq!(m[2].source, "/tmp/a b");
        assert!(m[2].is_ckpt());
        // Root's mount by an older build: type `fuse`, source `ckpt-mount`.
        assert!(m[3].is_ckpt());
        // Another FUSE filesystem is not ours, whatever its source says.
        assert!(!m[4].is_ckpt());
        assert!(!m[5].is_ckpt());
    }

    #[test]
    fn a_mount_point_that_is_not_utf8_hides_no_other() {
        let table = b"48 27 0:41 / /tmp/q\xff\\040r rw - fuse.ckpt-mount /tmp/q\xff\\040r rw\n\
50 27 0:44 / /tmp/p rw,nosuid - fuse.ckpt-mount /tmp/p rw\n";
        let points: Vec<PathBuf> = mounts_in(table).into_iter().map(|m| m.point).collect();
        assert_eq!(points.len(), 2, "{points:?}");
        assert_eq!(points[1], PathBuf::from("/tmp/p"));
    }

    #[test]
    fn unescapes_mountinfo_paths() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
