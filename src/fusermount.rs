//! Mounting and unmounting as whoever runs ckpt-mount.
//!
//! Every mount is of type `fuse.ckpt-mount` (the subtype is how commands recognise their
//! mounts, `crate::mounts`) with the folder's own path as its source, as bindfs shows it.
//!
//! As root the daemon mounts by itself ([`mount_directly`], `mount(2)`). Anyone else is refused `mount(2)`,
//! and with `/dev/fuse` at mode 0600 even the device, so the set-uid helper `fusermount3`
//! mounts for them and hands the device's descriptor back over a socket pair (libfuse's
//! protocol: the socket's number in `_FUSE_COMMFD`, one `SCM_RIGHTS` message). Unmounting
//! follows the same split: `umount2(2)` as root, `fusermount3 -u` otherwise, because the kernel
//! lets a user unmount nothing by itself, not even their own FUSE mount.

use crate::sys;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The helper's name; `fusermount` (FUSE 2) is tried after it.
pub const HELPER: &str = "fusermount3";

/// The FUSE subtype of every ckpt-mount mount: its type is `fuse.ckpt-mount`.
pub const SUBTYPE: &str = "ckpt-mount";

/// The `-o` list `fusermount3` is given to mount `dir`: its path as the source (`fsname=`,
/// escaped), the subtype, `nosuid,nodev`, the flag words `vfs` (it reads them into the same
/// flags `mount(2)` gets from root) and the FUSE options `fuse` (`default_permissions`,
/// `allow_other`).
pub fn helper_options(dir: &Path, vfs: &[&str], fuse: &[&str]) -> std::ffi::OsString {
    let mut o = b"fsname=".to_vec();
    o.extend(escape_option_value(dir.as_os_str().as_bytes()));
    o.extend(format!(",subtype={SUBTYPE},nosuid,nodev").bytes());
    for word in vfs.iter().chain(fuse) {
        o.push(b',');
        o.extend(word.bytes());
    }
    std::ffi::OsString::from_vec(o)
}

/// A value in a `-o` list, escaped as libfuse escapes `fsname=` (`fuse_opt_add_opt_escaped`)
/// and `fusermount3` reads it back: `\` and `,` each get a `\` before them, so a folder
/// whose path holds a comma is one option, not two.
fn escape_option_value(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for &b in value {
        if b == b'\\' || b == b',' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// Mounts FUSE at `dir` by `mount(2)` (root): type `fuse.ckpt-mount`, the folder's path as the
/// source, the `MS_*` `flags`, and the FUSE options `fuse` (`default_permissions`,
/// `allow_other`) after the device's own; returns the `/dev/fuse` descriptor to serve.
pub fn mount_directly(dir: &Path, flags: libc::c_ulong, fuse: &[&str]) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::MetadataExt;
    let device: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot open /dev/fuse: {e}")))?
        .into();
    let rootmode = std::fs::metadata(dir)?.mode() & libc::S_IFMT;
    let mut data = format!(
        "fd={},rootmode={rootmode:o},user_id={},group_id={}",
        device.as_raw_fd(),
        sys::geteuid(),
        sys::getegid()
    );
    for word in fuse {
        data.push(',');
        data.push_str(word);
    }
    let nul = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what} contains NUL"),
        )
    };
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| nul("the path"))?;
    let fstype = std::ffi::CString::new(format!("fuse.{SUBTYPE}")).map_err(|_| nul("the type"))?;
    let data = std::ffi::CString::new(data).map_err(|_| nul("the options"))?;
    sys::mount(&path, &path, &fstype, flags, &data)
        .map_err(|e| std::io::Error::from_raw_os_error(e.0))?;
    Ok(device)
}

/// Where the helper is: `$FUSERMOUNT_PATH` if set, else the first `fusermount3` or
/// `fusermount` on `$PATH` or in the system directories (a mount helper run by `mount(8)` gets
/// a minimal `PATH`).
pub fn helper() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FUSERMOUNT_PATH") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map(PathBuf::from));
    let dirs: Vec<PathBuf> = dirs.collect();
    [HELPER, "fusermount"].iter().find_map(|name| {
        dirs.iter()
            .map(|d| d.join(name))
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
    })
}

/// Whether this process mounts by itself (`mount(2)`) rather than through the helper.
pub fn mounts_directly() -> bool {
    sys::geteuid() == 0
}

/// Whether `/dev/fuse` opens for this process: the daemon's extra worker channels are clones
/// of the first descriptor made by opening the device again, which a user cannot when it is
/// mode 0600; they then share the one descriptor the helper handed over.
pub fn device_opens() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok()
}

/// Whether this process has `CAP_SYS_ADMIN`, which the kernel requires to register a backing
/// file for FUSE passthrough (`FUSE_DEV_IOC_BACKING_OPEN`).
pub fn has_cap_sys_admin() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

/// Why the helper did not mount.
#[derive(Debug)]
pub enum MountError {
    /// No helper is installed.
    NoHelper,
    /// `/dev/fuse` does not open for this user.
    DeviceClosed {
        /// Its uid.
        uid: u32,
        /// Its login name, when the user database has one.
        user: Option<String>,
    },
    /// The socket pair the descriptor comes back over could not be made.
    SocketPair(std::io::Error),
    /// The helper could not be started.
    Spawn {
        /// The helper.
        helper: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The helper sent no descriptor and said nothing: how it ended, and the receive's errno.
    Silent {
        /// The helper.
        helper: PathBuf,
        /// Its exit status, or why it could not be waited for.
        status: std::io::Result<std::process::ExitStatus>,
        /// Why nothing was received.
        errno: sys::Errno,
    },
    /// The helper sent no descriptor and said why: its first line on stderr.
    Said(String),
}

impl std::fmt::Display for MountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoHelper => write!(
                f,
                "cannot mount as a user without {HELPER}: install fuse3 (it provides {HELPER}), or run as root"
            ),
            Self::DeviceClosed { uid, user } => {
                // The command names the user itself: `$USER` pasted into root's shell is root.
                let (who, acl_user) = match user {
                    Some(name) => (format!("{name} (uid {uid})"), name.clone()),
                    None => (format!("uid {uid}"), uid.to_string()),
                };
                write!(
                    f,
                    "/dev/fuse is not open to this user, {who}: as root, run `chmod 0666 /dev/fuse` (what distributions' udev rules do) or `setfacl -m u:{acl_user}:rw /dev/fuse`, or mount as root"
                )
            }
            Self::SocketPair(e) => write!(f, "cannot make a socket pair: {e}"),
            Self::Spawn { helper, source } => {
                write!(f, "cannot run {}: {source}", helper.display())
            }
            Self::Silent {
                helper,
                status: Ok(s),
                errno,
            } => write!(
                f,
                "{} failed ({s}) and sent no descriptor: {errno}",
                helper.display()
            ),
            Self::Silent {
                helper,
                status: Err(w),
                ..
            } => write!(f, "{} failed: {w}", helper.display()),
            Self::Said(line) => f.write_str(line),
        }
    }
}

impl std::error::Error for MountError {}

/// Mounts FUSE at `dir` through the helper with the `-o` options `options` (see
/// [`helper_options`]); returns the `/dev/fuse` descriptor to serve. The error displays as one
/// line: the helper's own message when it gave one.
pub fn mount(dir: &Path, options: &std::ffi::OsStr) -> Result<OwnedFd, MountError> {
    let helper = helper().ok_or(MountError::NoHelper)?;
    // The helper opens the device with the user's own rights (it drops its set-uid ones
    // first), so a device closed to the user fails there too; say what helps instead.
    if !device_opens() {
        let uid = sys::geteuid();
        return Err(MountError::DeviceClosed {
            uid,
            user: sys::user_name(uid),
        });
    }
    let (ours, theirs) = UnixStream::pair().map_err(MountError::SocketPair)?;
    let mut cmd = Command::new(&helper);
    cmd.arg("-o")
        .arg(options)
        .arg("--")
        .arg(dir)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    sys::inherit_fd(&mut cmd, theirs.as_raw_fd());
    let mut child = cmd.spawn().map_err(|source| MountError::Spawn {
        helper: helper.clone(),
        source,
    })?;
    // Only the helper may hold the other end now, so its exit ends our receive.
    drop(theirs);
    let received = sys::recv_fd(ours.as_fd());
    let mut stderr = String::new();
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut stderr);
    }
    let status = child.wait();
    match received {
        Ok(fd) => Ok(fd),
        Err(errno) => {
            let said = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(match said {
                "" => MountError::Silent {
                    helper,
                    status,
                    errno,
                },
                line => MountError::Said(with_hint(line.trim())),
            })
        }
    }
}

/// The helper's line, and what helps when it refused a mount flag it does not know (an
/// older `fusermount3` knows `ro`, `noexec`, `noatime`, `sync`, `dirsync`, not `nodiratime`,
/// `strictatime`, `lazytime` or `nosymfollow`).
fn with_hint(line: &str) -> String {
    if line.contains("unknown option") {
        format!(
            "{line} (this {HELPER} cannot set that mount option on a user's mount; root's mount can)"
        )
    } else {
        line.to_string()
    }
}

/// Why an unmount did not happen.
#[derive(Debug, PartialEq, Eq)]
pub enum UnmountError {
    /// A process has a file open or its working directory inside.
    Busy,
    /// Anything else, in one line.
    Other(String),
}

/// Unmounts the FUSE mount at `dir`: `lazy` detaches it at once even when busy or dead (the
/// kernel finishes when the last user leaves), which is how a mount whose daemon died is
/// cleared.
pub fn unmount(dir: &Path, lazy: bool) -> Result<(), UnmountError> {
    if mounts_directly() {
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| UnmountError::Other("path contains NUL".into()))?;
        return match sys::umount(&c, if lazy { libc::MNT_DETACH } else { 0 }) {
            Ok(()) => Ok(()),
            Err(sys::Errno(libc::EBUSY)) => Err(UnmountError::Busy),
            Err(e) => Err(UnmountError::Other(e.to_string())),
        };
    }
    let helper = helper().ok_or_else(|| {
        UnmountError::Other(format!(
            "cannot unmount as a user without {HELPER}: install fuse3"
        ))
    })?;
    // Not `-q`: that hides the helper's own "Device or resource busy", which is how a busy
    // mount is told from any other failure here (the helper exits 1 for both).
    let mut cmd = Command::new(&helper);
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    let out = cmd
        .arg("--")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| UnmountError::Other(format!("cannot run {}: {e}", helper.display())))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    if is_busy_text(&said) {
        return Err(UnmountError::Busy);
    }
    let line = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Err(UnmountError::Other(if line.is_empty() {
        format!("{} -u failed ({})", helper.display(), out.status)
    } else {
        line.trim().to_string()
    }))
}

/// Whether the helper's stderr says the mount is busy: `fusermount3: failed to unmount DIR:
/// Device or resource busy` (`strerror(EBUSY)`; the helper sets no locale, so it is English).
fn is_busy_text(said: &str) -> bool {
    said.to_ascii_lowercase().contains("busy")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closed_device_line_names_the_user_not_dollar_user() {
        let named = MountError::DeviceClosed {
            uid: 1001,
            user: Some("alice".into()),
        };
        assert_eq!(
            named.to_string(),
            "/dev/fuse is not open to this user, alice (uid 1001): as root, run `chmod 0666 /dev/fuse` (what distributions' udev rules do) or `setfacl -m u:alice:rw /dev/fuse`, or mount as root"
        );
        // No name in the user database: setfacl takes the number as well.
        let unnamed = MountError::DeviceClosed {
            uid: 4242,
            user: None,
        };
        let line = unnamed.to_string();
        assert!(line.contains("not open to this user, uid 4242:"), "{line}");
        assert!(line.contains("`setfacl -m u:4242:rw /dev/fuse`"), "{line}");
        assert!(!line.contains('$'), "{line}");
    }

    #[test]
    fn a_uid_is_named_from_the_user_database() {
        assert_eq!(sys::user_name(0).as_deref(), Some("root"));
        // The largest uid but the invalid (uid_t)-1: no database holds it.
        assert_eq!(sys::user_name(u32::MAX - 1), None);
    }

    #[test]
    fn the_helpers_options_escape_the_folder_and_keep_the_words() {
        let o = helper_options(
            Path::new("/src/a,b\\c d"),
            &["ro", "noatime"],
            &["allow_other"],
        );
        assert_eq!(
            o.as_bytes(),
            b"fsname=/src/a\\,b\\\\c d,subtype=ckpt-mount,nosuid,nodev,ro,noatime,allow_other"
        );
        assert_eq!(
            helper_options(Path::new("/p"), &[], &[]).as_bytes(),
            b"fsname=/p,subtype=ckpt-mount,nosuid,nodev"
        );
    }

    #[test]
    fn the_helpers_busy_line_is_recognised() {
        assert!(is_busy_text(
            "fusermount3: failed to unmount /tmp/x/site: Device or resource busy\n"
        ));
        assert!(!is_busy_text(
            "fusermount3: entry for /tmp/x/site not found in /etc/mtab\n"
        ));
        assert!(!is_busy_text(""));
    }
}
