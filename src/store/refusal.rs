//! Why `.ckpt/` is refused before a store is opened: [`LayoutError`], with what it names (the
//! [`Kind`] a name should be, how the journal stands, the pre-images [`Held`]) and the one line
//! it is shown as. The checks that find it are in `layout.rs`; kept apart so that
//! [`StoreError`](super::StoreError), which carries it, sits below the checks that return it.
//! No I/O.

use crate::relpath::STORE_DIR;
use std::fmt;

/// What a store's name should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

impl Kind {
    pub(super) fn of(mode: u32) -> Option<Self> {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Some(Self::File),
            libc::S_IFDIR => Some(Self::Dir),
            _ => None,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::File => "a regular file",
            Self::Dir => "a directory",
        }
    }
}

/// How the journal stands when it names nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRecords {
    /// There is no `journal.jsonl`.
    Missing,
    /// It is there, with no bytes.
    Empty,
    /// It has bytes, but not one whole record (a torn first append).
    Torn,
}

/// The pre-image data a store holds outside its journal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Blobs listed (loose ones and packed ones with an index line).
    pub blobs: usize,
    /// Bytes of every file under `blobs/` (what the blobs take on disk, pack data included).
    pub bytes: u64,
    /// Files in `staged/`: pre-images moved there by their removal, not stored yet.
    pub staged: usize,
}

impl Held {
    /// Whether there is anything at all.
    pub fn any(&self) -> bool {
        self.blobs > 0 || self.bytes > 0 || self.staged > 0
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = crate::units::human_size(self.bytes);
        match self.blobs {
            1 => write!(f, "1 blob ({size})")?,
            n => write!(f, "{n} blobs ({size})")?,
        }
        match self.staged {
            0 => Ok(()),
            1 => write!(f, " and 1 staged pre-image"),
            n => write!(f, " and {n} staged pre-images"),
        }
    }
}

/// Why the files in `.ckpt/` are not a store this build opens as it is (see the module header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// `name` (`.ckpt`, or a path in it) is a symlink to `target`.
    Symlink {
        /// The symlink, as `.ckpt/…`.
        name: String,
        /// What it points to.
        target: String,
    },
    /// `name` is not of the kind the store keeps there.
    WrongKind {
        /// The name, as `.ckpt/…`.
        name: String,
        /// The kind it should be.
        want: Kind,
    },
    /// Blobs or staged pre-images, and no journal that names them.
    NoJournal {
        /// How the journal stands.
        journal: NoRecords,
        /// What is there.
        held: Held,
    },
    /// No `VERSION`, beside a journal or blobs.
    NoVersion {
        /// Bytes of the journal (0: none).
        journal_bytes: u64,
        /// The blobs there.
        held: Held,
    },
}

impl LayoutError {
    /// Whether `ckpt-mount fsck --start-over` applies: the store's files are all there to be
    /// moved aside, but what they mean is lost.
    pub fn can_start_over(&self) -> bool {
        matches!(self, Self::NoJournal { .. } | Self::NoVersion { .. })
    }
}

/// The way out of a store refused for a missing journal or `VERSION`, as the line says it.
const START_OVER: &str = "ckpt-mount fsck --start-over sets them aside in .ckpt/attic/ (deleting nothing) and starts a new history";

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symlink { name, target } if name == STORE_DIR => write!(
                f,
                "{name} is a symlink (to {target}); ckpt-mount never follows one to its store: move the store it points to here in its place, or remove the link to begin a new store"
            ),
            Self::Symlink { name, target } => write!(
                f,
                "{name} is a symlink (to {target}); ckpt-mount never follows one in its store: move what it points to here in its place"
            ),
            Self::WrongKind { name, want } => write!(
                f,
                "{name} is not {}; ckpt-mount does not open a store like that: move it away",
                want.describe()
            ),
            Self::NoJournal { journal, held } => {
                let journal = match journal {
                    NoRecords::Missing => "no journal",
                    NoRecords::Empty => "an empty journal",
                    NoRecords::Torn => "a journal without one whole record",
                };
                write!(
                    f,
                    "the store holds {held} but {journal}: nothing says which files they were, and a new history would bury them; {START_OVER}"
                )
            }
            Self::NoVersion {
                journal_bytes,
                held,
            } => {
                let journal = match journal_bytes {
                    0 => String::new(),
                    n => format!("a journal ({}) and ", crate::units::human_size(*n)),
                };
                write!(
                    f,
                    "the store holds {journal}{held} but no VERSION file; if it is this ckpt-mount's store, restore the file (echo 'ckpt-mount store 2' > .ckpt/VERSION), else {START_OVER}"
                )
            }
        }
    }
}
