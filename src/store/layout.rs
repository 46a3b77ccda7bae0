//! Before a store is used: whether what `.ckpt/` holds is a store this build may open as it is.
//!
//! Opening a store writes to it (a first turn when the journal has none, a `VERSION` when it is
//! new, staged files no record names removed), so a store that lost its journal or its
//! `VERSION` but kept its blobs would be silently made into a new, empty history over the only
//! copy of those pre-images, and the next `prune` would delete them. So every command that
//! opens a store checks this first, and refuses, in one line that says what is there and what
//! to do, instead of guessing:
//! - a symlink at `.ckpt` or at one of the store's own names: never followed (it could lead
//!   anywhere, and a store reached through it is not the folder's);
//! - one of those names of the wrong kind (a directory where the journal goes, say);
//! - blobs or staged pre-images without a journal (missing, empty, or no whole record);
//! - no `VERSION` while a journal or blobs are there.
//!
//! A store with nothing in it (a mount that stopped before its first record, say) is new: it is
//! opened and completed as one. `ckpt-mount fsck --start-over` (`start_over.rs`) is the one
//! explicit way to begin a new history over a store refused for a missing journal or
//! `VERSION`: it moves the old files aside and deletes nothing.

use super::StoreError;
use super::error::io;
use super::refusal::{Held, Kind, LayoutError, NoRecords};
use crate::relpath::STORE_DIR;
use crate::sys::{self, Errno};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The names in `.ckpt/` that the store opens, with their kind. Each one is checked without
/// following it; `blobs/packs` is checked inside `blobs/`.
const OWN_NAMES: [(&CStr, Kind); 8] = [
    (c"VERSION", Kind::File),
    (c"journal.jsonl", Kind::File),
    (c"journal.jsonl.new", Kind::File),
    (c"lock", Kind::File),
    (c"daemon.log", Kind::File),
    (c".gitignore", Kind::File),
    (c"blobs", Kind::Dir),
    (c"staged", Kind::Dir),
];

fn refused(e: LayoutError) -> StoreError {
    StoreError::Layout(e)
}

/// A symlink's target, for the line that refuses it (quoted as a path is: any bytes).
fn link_target(dir: BorrowedFd<'_>, name: &CStr) -> String {
    sys::readlinkat(dir, name).map_or_else(
        |e| format!("unreadable: {e}"),
        |t| crate::quote::quote_path(&t).into_owned(),
    )
}

/// The kind of `name` in `dir`, never following it: `None` when it does not exist. `shown`
/// names it in the refusal (`.ckpt/journal.jsonl`).
fn check_name(
    dir: BorrowedFd<'_>,
    name: &CStr,
    want: Kind,
    shown: &str,
) -> Result<Option<libc::stat>, StoreError> {
    let st = match sys::lstatat(dir, name) {
        Ok(st) => st,
        Err(Errno(libc::ENOENT)) => return Ok(None),
        Err(e) => return Err(io(format!("stat {shown}"))(e)),
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(refused(LayoutError::Symlink {
            name: shown.to_string(),
            target: link_target(dir, name),
        }));
    }
    if Kind::of(st.st_mode) != Some(want) {
        return Err(refused(LayoutError::WrongKind {
            name: shown.to_string(),
            want,
        }));
    }
    Ok(Some(st))
}

/// Opens `.ckpt` in the folder `root` as an `O_PATH` descriptor, never through a symlink (a
/// symlink there is refused, naming where it points). With `create`, makes it when missing.
pub fn open_store_dir(root: BorrowedFd<'_>, create: bool) -> Result<OwnedFd, StoreError> {
    let name = CString::new(STORE_DIR).map_err(|_| io("store name")(Errno(libc::EINVAL)))?;
    if check_name(root, &name, Kind::Dir, STORE_DIR)?.is_none() {
        if !create {
            return Err(StoreError::Missing);
        }
        match sys::mkdirat(root, &name, 0o700) {
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(io("create .ckpt")(e)),
        }
    }
    // Replaced by a symlink since the check: O_NOFOLLOW with O_DIRECTORY refuses it.
    match sys::openat(
        root,
        &name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    ) {
        Ok(fd) => Ok(fd),
        Err(Errno(libc::ENOENT)) => Err(StoreError::Missing),
        Err(e) => Err(io("open .ckpt")(e)),
    }
}

/// What a store directory that passed [`check`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// Nothing of a history: no records, no blobs (a new store, or one whose first mount
    /// stopped early). Opening it makes it a new store.
    New,
    /// A journal with bytes and a `VERSION`: opened as it is.
    History,
}

/// Checks the store directory `d` (see the module header). Reads only, follows nothing, and
/// costs a few `fstatat` calls on a store with a journal; the blobs are counted only when the
/// journal or `VERSION` is missing.
pub fn check(d: BorrowedFd<'_>) -> Result<Contents, StoreError> {
    let (mut version, mut journal, mut blobs) = (false, None, false);
    for (name, want) in OWN_NAMES {
        let shown = format!("{STORE_DIR}/{}", name.to_string_lossy());
        let st = check_name(d, name, want, &shown)?;
        match name.to_bytes() {
            b"VERSION" => version = st.is_some(),
            b"journal.jsonl" => journal = st,
            b"blobs" => blobs = st.is_some(),
            _ => {}
        }
    }
    if blobs {
        let blobs = open_dir(d, c"blobs", "open .ckpt/blobs")?;
        check_name(blobs.as_fd(), c"packs", Kind::Dir, ".ckpt/blobs/packs")?;
    }
    let journal_bytes = journal.map_or(0, |st| st.st_size as u64);
    if journal_bytes == 0 {
        let held = held(d)?;
        if held.any() {
            let journal = match journal {
                None => NoRecords::Missing,
                Some(_) => NoRecords::Empty,
            };
            return Err(refused(LayoutError::NoJournal { journal, held }));
        }
        return Ok(Contents::New);
    }
    if !version {
        return Err(refused(LayoutError::NoVersion {
            journal_bytes,
            held: held(d)?,
        }));
    }
    Ok(Contents::History)
}

/// A journal of `len` bytes whose parse (`parsed`) found no whole record (only a torn first
/// append) is refused like an empty one if blobs or staged pre-images are there, for the same
/// reason: the store's open, `fsck` and `fsck --start-over` ask here alike.
pub fn check_torn_only(
    d: BorrowedFd<'_>,
    parsed: &super::journal::Parsed,
    len: usize,
) -> Result<(), StoreError> {
    if len == 0 || !parsed.lines.is_empty() {
        return Ok(());
    }
    let held = held(d)?;
    if held.any() {
        return Err(refused(LayoutError::NoJournal {
            journal: NoRecords::Torn,
            held,
        }));
    }
    Ok(())
}

fn open_dir(d: BorrowedFd<'_>, name: &CStr, what: &str) -> Result<OwnedFd, StoreError> {
    sys::openat(
        d,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
    .map_err(io(what))
}

/// What the store directory `d` holds besides its journal: blobs (counted, and their bytes on
/// disk) and staged pre-images.
pub fn held(d: BorrowedFd<'_>) -> Result<Held, StoreError> {
    let mut held = Held::default();
    match open_dir(d, c"blobs", "open .ckpt/blobs") {
        Ok(blobs) => {
            held.bytes = bytes_below(blobs.as_fd(), 2).map_err(io("list .ckpt/blobs"))?;
            held.blobs = super::blob::BlobStore::open_readonly(d)
                .and_then(|b| b.list())
                .map_or(0, |l| l.len());
        }
        Err(StoreError::Io {
            errno: Errno(libc::ENOENT),
            ..
        }) => {}
        Err(e) => return Err(e),
    }
    match open_dir(d, c"staged", "open .ckpt/staged") {
        Ok(staged) => {
            held.staged = sys::read_dir_all(staged.as_fd(), false)
                .map_err(io("list .ckpt/staged"))?
                .iter()
                .filter(|e| !e.name.starts_with(b".tmp-"))
                .count();
        }
        Err(StoreError::Io {
            errno: Errno(libc::ENOENT),
            ..
        }) => {}
        Err(e) => return Err(e),
    }
    Ok(held)
}

/// Bytes of the regular files in `dir` and, `depth` levels down, in its directories (blobs:
/// shards and `packs/` one level down). Nothing is followed.
fn bytes_below(dir: BorrowedFd<'_>, depth: u32) -> Result<u64, Errno> {
    let mut total = 0u64;
    for e in sys::read_dir_all(dir, false)? {
        let Ok(name) = CString::new(e.name) else {
            continue;
        };
        let Ok(st) = sys::lstatat(dir, &name) else {
            continue;
        };
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => total += st.st_size as u64,
            libc::S_IFDIR if depth > 1 => {
                let sub = sys::openat(
                    dir,
                    &name,
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                )?;
                total += bytes_below(sub.as_fd(), depth - 1)?;
            }
            _ => {}
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_dir(t: &tempfile::TempDir) -> OwnedFd {
        let root = std::fs::File::open(t.path()).expect("open");
        open_store_dir(root.as_fd(), true).expect("store dir")
    }

    fn layout(r: Result<Contents, StoreError>) -> LayoutError {
        match r {
            Err(StoreError::Layout(e)) => e,
            other => panic!("expected a layout refusal, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_store_directory_is_new_and_blobs_without_a_journal_are_refused() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = store_dir(&t);
        assert_eq!(check(d.as_fd()).expect("check"), Contents::New);
        std::fs::write(t.path().join(".ckpt/VERSION"), super::super::STORE_VERSION).expect("write");
        std::fs::create_dir_all(t.path().join(".ckpt/blobs/packs")).expect("mkdir");
        assert_eq!(check(d.as_fd()).expect("check"), Contents::New);
        std::fs::write(t.path().join(".ckpt/blobs/packs/pack-0.dat"), b"bytes").expect("w");
        let e = layout(check(d.as_fd()));
        assert_eq!(
            e,
            LayoutError::NoJournal {
                journal: NoRecords::Missing,
                held: Held {
                    blobs: 0,
                    bytes: 5,
                    staged: 0
                }
            }
        );
        assert!(e.can_start_over());
        assert!(
            e.to_string().contains("0 blobs (5 B) but no journal"),
            "{e}"
        );
        std::fs::write(t.path().join(".ckpt/journal.jsonl"), b"").expect("w");
        let e = layout(check(d.as_fd()));
        assert!(e.to_string().contains("but an empty journal"), "{e}");
        std::fs::write(t.path().join(".ckpt/journal.jsonl"), b"{}\n").expect("w");
        assert_eq!(check(d.as_fd()).expect("check"), Contents::History);
        std::fs::remove_file(t.path().join(".ckpt/VERSION")).expect("rm");
        let e = layout(check(d.as_fd()));
        assert!(
            matches!(
                e,
                LayoutError::NoVersion {
                    journal_bytes: 3,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn symlinks_and_names_of_the_wrong_kind_are_refused_never_followed() {
        let t = tempfile::tempdir().expect("tempdir");
        let elsewhere = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(elsewhere.path(), t.path().join(".ckpt")).expect("link");
        let root = std::fs::File::open(t.path()).expect("open");
        let e = match open_store_dir(root.as_fd(), true) {
            Err(StoreError::Layout(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            e,
            LayoutError::Symlink {
                name: ".ckpt".into(),
                target: elsewhere.path().display().to_string()
            }
        );
        assert!(!e.can_start_over());
        assert_eq!(
            std::fs::read_dir(elsewhere.path()).expect("list").count(),
            0,
            "nothing was made through the link"
        );
        std::fs::remove_file(t.path().join(".ckpt")).expect("rm");
        let d = store_dir(&t);
        std::os::unix::fs::symlink("/etc/passwd", t.path().join(".ckpt/journal.jsonl"))
            .expect("link");
        let e = layout(check(d.as_fd()));
        assert!(
            e.to_string()
                .starts_with(".ckpt/journal.jsonl is a symlink (to /etc/passwd)"),
            "{e}"
        );
        std::fs::remove_file(t.path().join(".ckpt/journal.jsonl")).expect("rm");
        std::fs::create_dir(t.path().join(".ckpt/VERSION")).expect("mkdir");
        let e = layout(check(d.as_fd()));
        assert_eq!(
            e,
            LayoutError::WrongKind {
                name: ".ckpt/VERSION".into(),
                want: Kind::File
            }
        );
    }
}
