//! The errno of every error, in one place: what a process using the mount (or writing a
//! control file) sees when the daemon fails, for each kind of failure.
//!
//! A host system call's own errno passes through unchanged: the caller gets what the host
//! filesystem said, as with no mount in between. The other mappings are judgement calls, each
//! explained where it is made. The matches are exhaustive, so a new kind of error does not
//! compile until it has an errno here.

use crate::capture::{CaptureError, TurnError};
use crate::rewind::RewindError;
use crate::store::StoreError;
use crate::sys::{Errno, ToErrno};

impl ToErrno for StoreError {
    fn to_errno(&self) -> Errno {
        Errno(match self {
            Self::Io { errno, .. } => errno.0,
            // A damaged or foreign store is an I/O problem from the caller's point of view: the
            // request was valid, the daemon could not record it.
            Self::Version(_) | Self::Journal(_) | Self::Layout(_) => libc::EIO,
            // Another process holds the store: retrying later can work.
            Self::Locked { .. } => libc::EBUSY,
            Self::Missing => libc::ENOENT,
        })
    }
}

impl ToErrno for RewindError {
    fn to_errno(&self) -> Errno {
        match self {
            // A turn that does not exist, or nothing to undo: the input written to
            // `.ckpt/rewind` is not one the daemon can act on.
            Self::NoSuchTurn { .. }
            | Self::NothingToUndo
            | Self::NoAgent
            | Self::UnknownAgent { .. }
            | Self::NoOpToUndo
            | Self::NothingToRedo
            // An operation that does not exist, or whose end is not a moment of the folder.
            | Self::Unrestorable(_) => Errno(libc::EINVAL),
            // Refused before any change (a blob missing or damaged, a path the journal cannot
            // justify): the folder is untouched, the store is what failed.
            Self::Refused(_) => Errno(libc::EIO),
            // Refused before any change: the disk lacks the room the saves and writes need.
            Self::NoSpace(_) => Errno(libc::ENOSPC),
            Self::Store(e) => e.to_errno(),
        }
    }
}

impl ToErrno for CaptureError {
    fn to_errno(&self) -> Errno {
        match self {
            Self::Store(e) => e.to_errno(),
            // What the host said reading the path (EACCES, ELOOP, …): the caller's change of
            // that path fails as the read did.
            Self::Preimage(e) => *e,
        }
    }
}

impl ToErrno for TurnError {
    fn to_errno(&self) -> Errno {
        match self {
            // `echo 3 > .ckpt/turn` while turn 5 runs, or a number past the bound: the number
            // is not valid input.
            Self::NotAfter { .. } | Self::StepOutsideTurn { .. } | Self::OutOfRange => {
                Errno(libc::EINVAL)
            }
            // A file held open for writing could not be captured: the reason it could not be
            // read (EACCES, EIO, ENOSPC …) is the most useful answer.
            Self::HeldOpen(e) => *e,
            Self::Store(e) => e.to_errno(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Turn;

    #[test]
    fn host_errnos_pass_through_and_store_failures_are_mapped() {
        let io = StoreError::Io {
            what: "append".into(),
            errno: Errno(libc::ENOSPC),
        };
        assert_eq!(io.to_errno(), Errno(libc::ENOSPC));
        assert_eq!(
            StoreError::Locked { holder: None }.to_errno(),
            Errno(libc::EBUSY)
        );
        assert_eq!(StoreError::Missing.to_errno(), Errno(libc::ENOENT));
        let no_journal = crate::store::refusal::LayoutError::NoJournal {
            journal: crate::store::refusal::NoRecords::Missing,
            held: crate::store::refusal::Held::default(),
        };
        assert_eq!(StoreError::Layout(no_journal).to_errno(), Errno(libc::EIO));
        assert_eq!(
            RewindError::NoSuchTurn {
                turn: Turn::new(9),
                known: vec![Turn::new(1), Turn::new(2)]
            }
            .to_errno(),
            Errno(libc::EINVAL)
        );
        assert_eq!(
            RewindError::Store(StoreError::Locked { holder: None }).to_errno(),
            Errno(libc::EBUSY)
        );
        assert_eq!(
            TurnError::NotAfter {
                current: Turn::new(5)
            }
            .to_errno(),
            Errno(libc::EINVAL)
        );
        assert_eq!(TurnError::OutOfRange.to_errno(), Errno(libc::EINVAL));
        assert_eq!(
            TurnError::HeldOpen(Errno(libc::EACCES)).to_errno(),
            Errno(libc::EACCES)
        );
    }
}
