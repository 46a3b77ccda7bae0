//! Which folders may be mounted over: a project folder, not the system's or everyone's
//! directories, and not a folder inside or around another ckpt-mount folder.
//!
//! The rule is a pure function of the canonical path, the home directories and the current
//! ckpt-mount mount points ([`refusal`]), so it is tested without mounting anything;
//! [`check_folder`] gathers those facts from the machine.

use std::path::{Path, PathBuf};

/// Directories that are the system's or shared by everyone: mounting over one captures what
/// every program on the machine writes there, and leaves a store behind in it.
const SHARED: &[&str] = &[
    "/bin",
    "/boot",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/root",
    "/sbin",
    "/snap",
    "/srv",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/share",
    "/usr/src",
    "/var",
    "/var/lib",
    "/var/log",
    "/var/tmp",
];

/// Kernel and runtime filesystems: never project folders, whatever `--force` says.
const VIRTUAL: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// Why a folder is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// One line: what and why.
    pub reason: String,
    /// Whether `--force` overrides it.
    pub forceable: bool,
}

impl Refusal {
    /// The line to print, with the `--force` hint where it applies.
    pub fn line(&self) -> String {
        if self.forceable {
            format!("{} (use --force if you really mean it)", self.reason)
        } else {
            self.reason.clone()
        }
    }
}

/// Whether `dir` (canonical) may be mounted over, given the home directories on the machine
/// and the points where ckpt-mount is mounted now. `None`: it may.
pub fn refusal(
    dir: &Path,
    homes: &[PathBuf],
    ckpt_mounts: &[PathBuf],
    force: bool,
) -> Option<Refusal> {
    let shown = dir.display();
    let never = |reason: String| {
        Some(Refusal {
            reason,
            forceable: false,
        })
    };
    if dir == Path::new("/") {
        return never("refusing to mount over / (mount a project folder)".into());
    }
    if VIRTUAL.iter().any(|v| dir.starts_with(v)) {
        return never(format!(
            "refusing to mount over {shown}: it is on a kernel or runtime filesystem, not a project folder"
        ));
    }
    if ckpt_mounts.iter().any(|p| p == dir) {
        return never(format!("{shown} is already mounted by ckpt-mount"));
    }
    if !force {
        let forceable = |reason: String| {
            Some(Refusal {
                reason,
                forceable: true,
            })
        };
        if homes.iter().any(|h| h == dir) {
            return forceable(format!(
                "refusing to mount over the home directory {shown}: mount a project folder inside it"
            ));
        }
        if SHARED.iter().any(|s| Path::new(s) == dir) {
            return forceable(format!(
                "refusing to mount over {shown}: a system or shared directory, not a project folder"
            ));
        }
    }
    for point in ckpt_mounts {
        if dir.starts_with(point) {
            return never(format!(
                "refusing to mount {shown}: it is inside the ckpt-mount folder {}, which already captures it",
                point.display()
            ));
        }
        if point.starts_with(dir) {
            return never(format!(
                "refusing to mount {shown}: it contains the ckpt-mount folder {}, whose store it would capture; unmount that one first",
                point.display()
            ));
        }
    }
    None
}

/// The home directories on this machine: `$HOME` and every account's in `/etc/passwd`,
/// canonical where they exist.
pub fn home_dirs() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Ok(passwd) = std::fs::read_to_string("/etc/passwd") {
        homes.extend(
            passwd
                .lines()
                .filter_map(|l| l.split(':').nth(5))
                .filter(|h| h.len() > 1)
                .map(PathBuf::from),
        );
    }
    homes
        .into_iter()
        .map(|h| h.canonicalize().unwrap_or(h))
        .collect()
}

/// Why a folder cannot be mounted over.
#[derive(Debug)]
pub enum FolderError {
    /// It cannot be opened (resolved to its canonical path).
    Open {
        /// The folder as given.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not a directory (its canonical path).
    NotDir(PathBuf),
    /// The rule refuses it.
    Refused(Refusal),
}

impl std::fmt::Display for FolderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Open { dir, source } => write!(f, "cannot open {}: {source}", dir.display()),
            Self::NotDir(canon) => write!(f, "{} is not a directory", canon.display()),
            Self::Refused(r) => f.write_str(&r.line()),
        }
    }
}

impl std::error::Error for FolderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Open { source, .. } => Some(source),
            Self::NotDir(_) | Self::Refused(_) => None,
        }
    }
}

/// Checks that `dir` exists, is a directory and may be mounted over; returns its canonical
/// path, or why not.
pub fn check_folder(dir: &Path, force: bool) -> Result<PathBuf, FolderError> {
    let canon = dir.canonicalize().map_err(|source| FolderError::Open {
        dir: dir.to_path_buf(),
        source,
    })?;
    if !canon.is_dir() {
        return Err(FolderError::NotDir(canon));
    }
    let points: Vec<PathBuf> = crate::mounts::mounts()
        .into_iter()
        .filter(|m| m.is_ckpt())
        .map(|m| m.point)
        .collect();
    match refusal(&canon, &home_dirs(), &points, force) {
        Some(r) => Err(FolderError::Refused(r)),
        None => Ok(canon),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(dir: &str, force: bool) -> Option<Refusal> {
        let homes = [PathBuf::from("/home/ann")];
        let mounts = [PathBuf::from("/home/ann/site")];
        refusal(Path::new(dir), &homes, &mounts, force)
    }

    #[test]
    fn a_project_folder_is_accepted() {
        assert_eq!(check("/home/ann/src/app", false), None);
        assert_eq!(check("/tmp/work", false), None);
        assert_eq!(check("/srv/www/site", false), None);
    }

    #[test]
    fn shared_directories_and_homes_are_refused_unless_forced() {
        for dir in ["/tmp", "/var/tmp", "/usr", "/home", "/home/ann", "/etc"] {
            let r = check(dir, false).unwrap_or_else(|| panic!("{dir} accepted"));
            assert!(r.forceable, "{dir}");
            assert!(r.line().contains("--force"), "{}", r.line());
            let homes = [PathBuf::from("/home/ann")];
            assert_eq!(
                refusal(Path::new(dir), &homes, &[], true),
                None,
                "{dir} with --force"
            );
        }
    }

    #[test]
    fn root_and_kernel_filesystems_are_refused_even_forced() {
        for dir in ["/", "/proc", "/sys/fs", "/dev/shm", "/run/user/1000"] {
            let r = check(dir, true).unwrap_or_else(|| panic!("{dir} accepted"));
            assert!(!r.forceable, "{dir}");
            assert!(!r.line().contains("--force"), "{}", r.line());
        }
    }

    #[test]
    fn nested_folders_are_refused_even_forced() {
        let same = check("/home/ann/site", true).expect("same");
        assert!(same.reason.contains("already mounted"), "{}", same.reason);
        let inside = check("/home/ann/site/src", true).expect("inside");
        assert!(
            inside
                .reason
                .contains("inside the ckpt-mount folder /home/ann/site")
        );
        let around = refusal(
            Path::new("/home/ann/work"),
            &[],
            &[PathBuf::from("/home/ann/work/site")],
            true,
        )
        .expect("around");
        assert!(around.reason.contains("contains the ckpt-mount folder"));
        // A sibling whose name merely starts the same is not nested.
        assert_eq!(check("/home/ann/site2", false), None);
    }
}
