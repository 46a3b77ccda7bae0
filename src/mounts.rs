//! Which folders are mounted by ckpt-mount (from `/proc/self/mountinfo`), and which folder a
//! command means when `--dir` is not given.

use std::path::{Path, PathBuf};

/// The mount source ckpt-mount gives its mounts (`fsname=`).
pub const FSNAME: &str = "ckpt-mount";
/// The filesystem type as `fusermount` would name it; a direct mount shows `fuse`.
pub const FSTYPE: &str = "fuse.ckpt-mount";

/// A mount as mountinfo lists it.
#[derive(Debug, Clone)]
pub struct MountEntry {
    /// Mount point.
    pub point: PathBuf,
    /// Filesystem type.
    pub fstype: String,
    /// Source.
    pub source: String,
}

impl MountEntry {
    /// Whether ckpt-mount made this mount.
    pub fn is_ckpt(&self) -> bool {
        self.fstype == FSTYPE || (self.fstype.starts_with("fuse") && self.source == FSNAME)
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

/// Every mount, in mount order.
pub fn mounts() -> Vec<MountEntry> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let point = fields.get(4)?;
            let fstype = fields.get(sep + 1)?;
            let source = fields.get(sep + 2).map_or(String::new(), |s| unescape(s));
            Some(MountEntry {
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
/// else the nearest directory above it with a store.
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
        if d.join(".ckpt/VERSION").is_file() {
            return Some(d.to_path_buf());
        }
        cur = d.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_paths() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
