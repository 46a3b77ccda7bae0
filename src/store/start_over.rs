//! `ckpt-mount fsck --start-over`: the one explicit way to begin a new history over a store
//! that lost what gives its files a meaning (its journal, or its `VERSION`), which every other
//! command refuses to open (`layout.rs`).
//!
//! Nothing is deleted: the old store's own files (journal, staged pre-images, blobs, daemon
//! log, `VERSION`) are moved, each by one `rename(2)`, into `.ckpt/attic/<UTC time>/`, where
//! no command reads or prunes them; then a new `VERSION` is written, and the next mount (or
//! any command) begins turn 1. The lock, `.gitignore` and the control-file guards stay.
//!
//! The moves go into `<name>.partial`, renamed to `<name>` once all are done: a start-over cut
//! off by a crash leaves its partial folder, which the next start-over moves the rest into.
//! The journal moves first, so a store cut off half way is refused again (blobs without a
//! journal) rather than opened with half its blobs.

use super::error::io;
use super::files::{replace_small, write_new};
use super::layout::{self, Contents};
use super::refusal::{Held, LayoutError};
use super::version::STORE_VERSION;
use super::{StoreError, open_store_dir};
use crate::sys::{self, Errno};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The store's own files that a start-over moves aside, in the order it moves them.
const MOVED: [&CStr; 6] = [
    c"journal.jsonl",
    c"journal.jsonl.new",
    c"staged",
    c"blobs",
    c"daemon.log",
    c"VERSION",
];

/// The folder in `.ckpt/` that holds the stores set aside.
pub const ATTIC: &str = "attic";

/// What a start-over did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOver {
    /// The old store's files were moved to `path` (`.ckpt/attic/<name>`).
    SetAside {
        /// Where they are now, relative to the folder.
        path: String,
        /// Why the store could not be opened.
        why: LayoutError,
        /// What was set aside besides the journal.
        held: Held,
    },
    /// Nothing to start over: the store opens as it is.
    NotNeeded(Contents),
}

/// Sets the store of the folder `root` aside and prepares a new one, if the store is refused
/// for a lost journal or `VERSION`; takes the store's lock (so never beside a daemon).
pub fn start_over(root: BorrowedFd<'_>) -> Result<StartOver, StoreError> {
    let dir = open_store_dir(root, false)?;
    let d = dir.as_fd();
    let _lock = super::lock::take(d)?;
    let why = match refusal(d)? {
        Ok(why) => why,
        Err(contents) => return Ok(StartOver::NotNeeded(contents)),
    };
    let held = layout::held(d)?;
    let attic = open_attic(d)?;
    let (name, partial) = partial_dir(attic.as_fd())?;
    for n in MOVED {
        move_aside(d, partial.as_fd(), n, &name)?;
    }
    crate::tree::sync_dir(partial.as_fd()).map_err(io("sync the store set aside"))?;
    crate::tree::sync_dir(d).map_err(io("sync .ckpt"))?;
    let (from, to) = (cname(&format!("{name}.partial"))?, cname(&name)?);
    sys::renameat2(
        attic.as_fd(),
        &from,
        attic.as_fd(),
        &to,
        libc::RENAME_NOREPLACE,
    )
    .map_err(io(format!("rename .ckpt/{ATTIC}/{name}.partial to {name}")))?;
    crate::tree::sync_dir(attic.as_fd()).map_err(io("sync .ckpt/attic"))?;
    replace_small(d, c"VERSION", STORE_VERSION.as_bytes()).map_err(io("write VERSION"))?;
    match sys::lstatat(d, c".gitignore") {
        Err(Errno(libc::ENOENT)) => {
            write_new(d, c".gitignore", b"*\n").map_err(io("write .gitignore"))?;
        }
        Err(e) => return Err(io("stat .gitignore")(e)),
        Ok(_) => {}
    }
    log::info!(target: "ckpt::store", "store set aside in .ckpt/{ATTIC}/{name} ({why}); a new history begins");
    Ok(StartOver::SetAside {
        path: format!(".ckpt/{ATTIC}/{name}"),
        why,
        held,
    })
}

/// Why the store directory `d` cannot be opened, when a start-over is the way past it; else
/// what it holds (a store that opens as it is). Other refusals (a symlink, say) are errors.
fn refusal(d: BorrowedFd<'_>) -> Result<Result<LayoutError, Contents>, StoreError> {
    let found = match layout::check(d) {
        Ok(Contents::History) => torn_only(d),
        Ok(contents) => return Ok(Err(contents)),
        Err(e) => Err(e),
    };
    match found {
        Ok(()) => Ok(Err(Contents::History)),
        Err(StoreError::Layout(e)) if e.can_start_over() => Ok(Ok(e)),
        Err(e) => Err(e),
    }
}

/// A journal with bytes but not one whole record is refused by the store's open, beside blobs
/// (`layout::check_torn_only`); read it to know.
fn torn_only(d: BorrowedFd<'_>) -> Result<(), StoreError> {
    let fd = sys::openat(d, c"journal.jsonl", libc::O_RDONLY | libc::O_NOFOLLOW, 0)
        .map_err(io("open journal"))?;
    let bytes = sys::read_to_end(fd.as_fd()).map_err(io("read journal"))?;
    match super::journal::parse(&bytes) {
        Ok(parsed) => layout::check_torn_only(d, &parsed, bytes.len()),
        Err(_) => Ok(()),
    }
}

fn cname(s: &str) -> Result<CString, StoreError> {
    CString::new(s).map_err(|_| io(format!("name {s:?}"))(Errno(libc::EINVAL)))
}

/// Opens (making) `.ckpt/attic`, never through a symlink.
fn open_attic(d: BorrowedFd<'_>) -> Result<OwnedFd, StoreError> {
    let attic = cname(ATTIC)?;
    match sys::mkdirat(d, &attic, 0o700) {
        Ok(()) | Err(Errno(libc::EEXIST)) => {}
        Err(e) => return Err(io("create .ckpt/attic")(e)),
    }
    sys::openat(
        d,
        &attic,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
    .map_err(io("open .ckpt/attic"))
}

/// The folder the moves go into: a `<name>.partial` an interrupted start-over left, else a new
/// one named by the time now (UTC), made unique with a suffix. Returns `<name>` and the folder.
fn partial_dir(attic: BorrowedFd<'_>) -> Result<(String, OwnedFd), StoreError> {
    let listing =
        sys::reopen(attic, libc::O_RDONLY | libc::O_DIRECTORY).map_err(io("list .ckpt/attic"))?;
    let entries = sys::read_dir_all(listing.as_fd(), false).map_err(io("list .ckpt/attic"))?;
    let names: Vec<String> = entries
        .iter()
        .map(|e| String::from_utf8_lossy(&e.name).into_owned())
        .collect();
    let left = names
        .iter()
        .find_map(|n| n.strip_suffix(".partial"))
        .map(str::to_string);
    let name = match left {
        Some(name) => name,
        None => {
            let stamp = stamp_now();
            let taken = |n: &String| names.iter().any(|e| e == n || *e == format!("{n}.partial"));
            let name = (1..)
                .map(|i| match i {
                    1 => stamp.clone(),
                    i => format!("{stamp}-{i}"),
                })
                .find(|n| !taken(n))
                .unwrap_or(stamp);
            let c = cname(&format!("{name}.partial"))?;
            sys::mkdirat(attic, &c, 0o700)
                .map_err(io(format!("create .ckpt/{ATTIC}/{name}.partial")))?;
            name
        }
    };
    let c = cname(&format!("{name}.partial"))?;
    let fd = sys::openat(
        attic,
        &c,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
    .map_err(io(format!("open .ckpt/{ATTIC}/{name}.partial")))?;
    Ok((name, fd))
}

/// The time now in UTC as a file name: `2026-12-02T11-40-05Z`.
fn stamp_now() -> String {
    let t = crate::units::CivilTime::utc(crate::units::unix_seconds(super::now()));
    format!(
        "{:04}-{:02}-{:02}T{:02}-{:02}-{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Moves `name` from the store directory `d` into `to` (the partial folder of `attic/<dest>`),
/// never over something there; a name the store does not have is skipped.
fn move_aside(
    d: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    name: &CStr,
    dest: &str,
) -> Result<(), StoreError> {
    match sys::renameat2(d, name, to, name, libc::RENAME_NOREPLACE) {
        Ok(()) | Err(Errno(libc::ENOENT)) => Ok(()),
        Err(e) => Err(io(format!(
            "move .ckpt/{} into .ckpt/{ATTIC}/{dest}.partial",
            name.to_string_lossy()
        ))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(t: &tempfile::TempDir) -> std::fs::File {
        std::fs::File::open(t.path()).expect("open")
    }

    /// A store with a captured blob, then its journal removed.
    fn store_without_journal() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tempdir");
        {
            let s = super::super::Store::for_test(root(&t).as_fd()).expect("store");
            s.blobs().put_bytes(b"the only copy").expect("put");
        }
        std::fs::remove_file(t.path().join(".ckpt/journal.jsonl")).expect("rm");
        t
    }

    #[test]
    fn the_old_files_are_moved_aside_and_a_new_store_opens() {
        let t = store_without_journal();
        let pack = std::fs::read(t.path().join(".ckpt/blobs/packs/pack-0.dat")).expect("read");
        let done = start_over(root(&t).as_fd()).expect("start over");
        let StartOver::SetAside { path, why, held } = done else {
            panic!("{done:?}");
        };
        assert!(matches!(why, LayoutError::NoJournal { .. }), "{why:?}");
        assert_eq!(held.blobs, 1);
        assert!(path.starts_with(".ckpt/attic/") && !path.ends_with(".partial"));
        let aside = t.path().join(&path);
        assert_eq!(
            std::fs::read(aside.join("blobs/packs/pack-0.dat")).expect("read"),
            pack,
            "the blobs are kept, byte for byte"
        );
        assert!(aside.join("VERSION").is_file());
        assert!(!t.path().join(".ckpt/blobs").exists());
        let s = super::super::Store::reopen_for_test(root(&t).as_fd()).expect("reopen");
        assert_eq!(s.index().current_turn(), crate::ids::Turn::new(1));
        assert!(s.blobs().list().expect("list").is_empty());
        drop(s);
        assert_eq!(
            start_over(root(&t).as_fd()).expect("again"),
            StartOver::NotNeeded(Contents::History)
        );
    }

    #[test]
    fn a_start_over_cut_off_is_completed_into_the_same_folder() {
        let t = store_without_journal();
        let attic = t.path().join(".ckpt/attic/2026-01-01T00-00-00Z.partial");
        std::fs::create_dir_all(&attic).expect("mkdir");
        std::fs::rename(t.path().join(".ckpt/staged"), attic.join("staged")).expect("mv");
        let done = start_over(root(&t).as_fd()).expect("start over");
        let StartOver::SetAside { path, .. } = done else {
            panic!("{done:?}");
        };
        assert_eq!(path, ".ckpt/attic/2026-01-01T00-00-00Z");
        let aside = t.path().join(&path);
        assert!(aside.join("staged").is_dir() && aside.join("blobs").is_dir());
        let attic = std::fs::read_dir(t.path().join(".ckpt/attic")).expect("list");
        assert_eq!(attic.count(), 1);
    }
}
