//! Which of a rewind's recreated files stand for their records from now on. A rewind that gives
//! a path back its recorded state as a fresh file notes a candidate [`Renewal`]; it holds only
//! when, at the end of the rewind, the recorded inode has no name left (records of its other
//! names, in turns left in the index, then mean the new file). An inode still named somewhere
//! is itself what those records mean.
//!
//! Only an inode some kept record saw with more than one link is worth it
//! ([`crate::store::index::Index::linked_identities`]): its other names' records look for it.
//! A record of a file that was always alone never does; it matches by content, or its path is
//! written fresh, whichever inode stands there, so its renewal is dropped unproven. That keeps
//! a rewind of a whole tree of single files (an `rm -rf`) from proving, and journaling, one
//! renewal per file (docs/BENCHMARKS.md).
//!
//! Root's daemon asks the kernel by handle (`open_by_handle_at`). A normal user's daemon may
//! not (`CAP_DAC_READ_SEARCH`): it looks for a name holding the inode in one walk of the
//! folder, by the inode numbers in the listings, proving each candidate by its identity.
//! Dropping every renewal there, as the handle's `EPERM` once did, split hard-link groups on a
//! user's mount at the next rewind (../shared/repro/hardlink_user_mount.sh).

use crate::identity::{FileId, Renewal, Standing};
use crate::relpath::RelPath;
use crate::sys;
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

/// Keeps of `renewed` the renewals of `linked` inodes proven to have no name left under
/// `root`. One that cannot be proven either way (no handle and no birth time recorded) is
/// dropped, as is one whose folder cannot be read: a renewal kept wrongly would make records
/// of a live inode mean another file.
pub(super) fn keep_proven_gone(
    root: BorrowedFd<'_>,
    linked: &HashSet<FileId>,
    renewed: &mut Vec<Renewal>,
) {
    renewed.retain(|r| linked.contains(&r.was));
    let mut unknown: Vec<usize> = Vec::new();
    let mut gone = vec![false; renewed.len()];
    for (i, r) in renewed.iter().enumerate() {
        match r.was.standing(root) {
            Standing::Gone => gone[i] = true,
            Standing::Named => {}
            Standing::Unknown if r.was.fh.is_some() || r.was.btime.is_some() => unknown.push(i),
            Standing::Unknown => {}
        }
    }
    if !unknown.is_empty() {
        let ids: Vec<&FileId> = unknown.iter().map(|&i| &renewed[i].was).collect();
        if let Some(named) = named_somewhere(root, &ids) {
            for (k, &i) in unknown.iter().enumerate() {
                gone[i] = !named.contains(&k);
            }
        }
    }
    let mut gone = gone.into_iter();
    renewed.retain(|_| gone.next().unwrap_or(false));
}

/// Which of `ids` (by index) some name in the folder holds now, found in one walk; `None` when
/// the folder could not be walked whole.
fn named_somewhere(root: BorrowedFd<'_>, ids: &[&FileId]) -> Option<HashSet<usize>> {
    let dev = sys::fstat(root).ok()?.st_dev;
    let top = sys::openat(root, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0).ok()?;
    let mut by_number: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        by_number.entry(id.ino).or_default().push(i);
    }
    let mut search = NameSearch {
        dev,
        ids,
        by_number,
        found: HashSet::new(),
    };
    search.dir(top.as_fd(), None).ok()?;
    Some(search.found)
}

/// One walk of the folder for names holding given identities.
struct NameSearch<'a> {
    dev: u64,
    ids: &'a [&'a FileId],
    /// Identities not yet found, by inode number.
    by_number: HashMap<u64, Vec<usize>>,
    found: HashSet<usize>,
}

impl NameSearch<'_> {
    /// Walks `dir` (at `path`, `None` for the root; never into the store, through a symlink or
    /// onto another device), until every identity is found.
    fn dir(&mut self, dir: BorrowedFd<'_>, path: Option<&RelPath>) -> sys::SysResult<()> {
        for e in sys::read_dir_all(dir, false)? {
            if self.by_number.is_empty() {
                return Ok(());
            }
            // `.ckpt` at the top is not a valid path, so the store is never walked.
            let Ok(child) = RelPath::join(path, OsStr::from_bytes(&e.name)) else {
                continue;
            };
            let Ok(name) = CString::new(e.name) else {
                continue;
            };
            if self.by_number.contains_key(&e.ino) {
                self.candidate(dir, &name, e.ino);
            }
            let is_dir = match e.kind {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => sys::lstatat(dir, &name)
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
                _ => false,
            };
            if !is_dir {
                continue;
            }
            let sub = match sys::openat(
                dir,
                &name,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            ) {
                Ok(sub) => sub,
                // Gone or replaced since the listing: nothing of it to find.
                Err(sys::Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => continue,
                Err(e) => return Err(e),
            };
            if sys::fstat(sub.as_fd())?.st_dev == self.dev {
                self.dir(sub.as_fd(), Some(&child))?;
            }
        }
        Ok(())
    }

    /// A name whose listing carries the number of an identity looked for: found when proven.
    fn candidate(&mut self, dir: BorrowedFd<'_>, name: &std::ffi::CStr, ino: u64) {
        let Ok(st) = sys::lstatat(dir, name) else {
            return;
        };
        if st.st_dev != self.dev || st.st_ino != ino {
            return;
        }
        let now = FileId::read_at(dir, name, 0, st.st_ino);
        let Some(list) = self.by_number.get_mut(&ino) else {
            return;
        };
        let ids = self.ids;
        list.retain(|&i| {
            let hit = ids[i].is(&now);
            if hit {
                self.found.insert(i);
            }
            !hit
        });
        if list.is_empty() {
            self.by_number.remove(&ino);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_root(dir: &std::path::Path) -> std::os::fd::OwnedFd {
        let c = CString::new(dir.as_os_str().as_bytes()).expect("path");
        sys::open_path(&c, libc::O_PATH | libc::O_DIRECTORY).expect("open the folder")
    }

    fn id_of(root: BorrowedFd<'_>, name: &std::ffi::CStr) -> FileId {
        FileId::of_name(root, name).expect("identity")
    }

    #[test]
    fn a_renewal_holds_only_when_no_name_keeps_the_recorded_inode() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
        std::fs::write(dir.path().join("a/b/kept"), b"k").expect("write");
        std::fs::write(dir.path().join("lost"), b"l").expect("write");
        std::fs::write(dir.path().join("fresh"), b"f").expect("write");
        let root = open_root(dir.path());
        let r = root.as_fd();
        let sub = sys::openat(r, c"a/b", libc::O_PATH | libc::O_DIRECTORY, 0).expect("a/b");
        let kept = id_of(sub.as_fd(), c"kept");
        let lost = id_of(r, c"lost");
        let fresh = id_of(r, c"fresh");
        std::fs::remove_file(dir.path().join("lost")).expect("rm");
        let mut renewed = vec![
            Renewal {
                was: kept.clone(),
                now: fresh.clone(),
            },
            Renewal {
                was: lost.clone(),
                now: fresh.clone(),
            },
        ];
        let linked = HashSet::from([kept.clone(), lost.clone()]);
        keep_proven_gone(r, &linked, &mut renewed);
        assert_eq!(
            renewed.len(),
            1,
            "only the inode with no name left: {renewed:?}"
        );
        assert_eq!(renewed[0].was, lost);
    }

    #[test]
    fn a_renewal_of_a_file_no_record_saw_linked_is_dropped_unproven() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("lost"), b"l").expect("write");
        std::fs::write(dir.path().join("fresh"), b"f").expect("write");
        let root = open_root(dir.path());
        let r = root.as_fd();
        let lost = id_of(r, c"lost");
        let fresh = id_of(r, c"fresh");
        std::fs::remove_file(dir.path().join("lost")).expect("rm");
        let mut renewed = vec![Renewal {
            was: lost,
            now: fresh,
        }];
        keep_proven_gone(r, &HashSet::new(), &mut renewed);
        assert!(renewed.is_empty(), "nothing looks for it: {renewed:?}");
    }

    #[test]
    fn the_walk_finds_a_name_deep_in_the_folder_without_the_handle() {
        // What a normal user's daemon relies on, tested for root too: the walk alone.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("x/y/z")).expect("mkdir");
        std::fs::write(dir.path().join("x/y/z/f"), b"f").expect("write");
        std::fs::write(dir.path().join("g"), b"g").expect("write");
        let root = open_root(dir.path());
        let r = root.as_fd();
        let deep = sys::openat(r, c"x/y/z", libc::O_PATH | libc::O_DIRECTORY, 0).expect("x/y/z");
        let f = id_of(deep.as_fd(), c"f");
        let g = id_of(r, c"g");
        std::fs::remove_file(dir.path().join("g")).expect("rm");
        let found = named_somewhere(r, &[&f, &g]).expect("walk");
        assert_eq!(found, HashSet::from([0]), "f is named, g is not");
    }
}
