//! [`FsError`]: what a core operation answers when it fails. The errno goes to the kernel
//! exactly as the core decided it (`src/errno.rs`); the context says, for the daemon's log,
//! what failed inside the operation and why (a capture whose journal append failed, a store
//! that is damaged), after mountpoint-s3's `fs/error.rs`. The adapter adds the operation and
//! the paths it was about (`fuse.rs`, `failed`), so a log line reads
//! `open "a.txt" failed: No space left on device (os error 28) (capturing "a.txt": append to
//! the journal: No space left on device (os error 28))`.
//!
//! An error from a host system call on the path the caller named (`ENOENT`, `EEXIST`, …) is
//! the filesystem's everyday answer and carries no context: building one costs no allocation,
//! which matters on the lookups of names that do not exist.

use crate::capture::CaptureError;
use crate::relpath::RelPath;
use crate::sys::{Errno, ToErrno};
use std::fmt;

/// Result of a core operation.
pub type FsResult<T> = Result<T, FsError>;

/// A failed core operation: the errno for the kernel, and for the log what failed and why.
#[derive(Debug)]
pub struct FsError {
    errno: Errno,
    /// Boxed so that the everyday error is one word and a `Result` stays small.
    context: Option<Box<Context>>,
}

#[derive(Debug)]
struct Context {
    /// What was being done, in words ("capturing \"a.txt\"").
    what: String,
    /// The error underneath, when it is not only the errno.
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl FsError {
    /// `errno`, with what was being done when it came.
    pub fn new(errno: Errno, what: impl Into<String>) -> Self {
        Self {
            errno,
            context: Some(Box::new(Context {
                what: what.into(),
                source: None,
            })),
        }
    }

    /// `source` (whose errno is `errno`), met while doing `what`.
    pub fn caused(
        errno: Errno,
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            errno,
            context: Some(Box::new(Context {
                what: what.into(),
                source: Some(Box::new(source)),
            })),
        }
    }

    /// The errno the kernel gets.
    pub fn errno(&self) -> Errno {
        self.errno
    }

    /// Whether the errno is `errno` (for the few places that handle one errno on their own).
    pub fn is(&self, errno: i32) -> bool {
        self.errno.0 == errno
    }

    /// The capture of `path` failed with `e`, so the change that needed it is refused.
    pub fn capturing(path: &RelPath, e: CaptureError) -> Self {
        let what = format!(
            "capturing {}",
            crate::quote::quote_log_path(path.as_bytes())
        );
        match e {
            CaptureError::Store(_) => Self::caused(e.to_errno(), what, e),
            CaptureError::Preimage(errno) => {
                Self::new(errno, format!("{what}: reading or storing its pre-image"))
            }
        }
    }

    /// Whether something of the daemon's own failed (the store, a capture's record) rather
    /// than the host answering the caller's request: the log shows it as a warning whatever
    /// the errno.
    pub fn daemon_failed(&self) -> bool {
        self.context.as_ref().is_some_and(|c| c.source.is_some())
    }
}

/// A capture's failure where the path is said by the operation itself (its log line names it).
impl From<CaptureError> for FsError {
    fn from(e: CaptureError) -> Self {
        match e {
            CaptureError::Store(_) => Self::caused(e.to_errno(), "capturing", e),
            CaptureError::Preimage(errno) => Self::from(errno),
        }
    }
}

impl From<Errno> for FsError {
    fn from(errno: Errno) -> Self {
        Self {
            errno,
            context: None,
        }
    }
}

impl ToErrno for FsError {
    fn to_errno(&self) -> Errno {
        self.errno
    }
}

/// The errno first, as every log line of a failed request has said it, then what failed
/// inside, between parentheses: `No space left on device (os error 28) (capturing "a.txt":
/// append to the journal: No space left on device (os error 28))`.
impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.errno)?;
        if let Some(c) = &self.context {
            match &c.source {
                Some(source) => write!(f, " ({}: {source})", c.what)?,
                None => write!(f, " ({})", c.what)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for FsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let source = self.context.as_ref()?.source.as_ref()?;
        Some(&**source as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_errno_is_kept_and_the_context_is_said() {
        let plain = FsError::from(Errno(libc::ENOENT));
        assert!(plain.is(libc::ENOENT) && !plain.daemon_failed());
        assert_eq!(plain.to_string(), Errno(libc::ENOENT).to_string());
        let store = crate::store::StoreError::Io {
            what: "append to the journal".into(),
            errno: Errno(libc::ENOSPC),
        };
        let e = FsError::caused(Errno(libc::ENOSPC), "capturing \"a.txt\"", store);
        assert_eq!(e.errno(), Errno(libc::ENOSPC));
        assert!(e.daemon_failed());
        let enospc = Errno(libc::ENOSPC);
        assert_eq!(
            e.to_string(),
            format!("{enospc} (capturing \"a.txt\": append to the journal: {enospc})")
        );
        assert!(std::error::Error::source(&e).is_some());
        let e = FsError::new(Errno(libc::EIO), "reading b");
        assert_eq!(e.to_string(), format!("{} (reading b)", Errno(libc::EIO)));
        assert!(!e.daemon_failed(), "no source: logged by its errno");
        let path = RelPath::new(b"d/a b").expect("path");
        let e = FsError::capturing(
            &path,
            CaptureError::Store(crate::store::StoreError::Missing),
        );
        assert_eq!(e.errno(), Errno(libc::ENOENT));
        assert_eq!(
            e.to_string(),
            format!(
                "{} (capturing \"d/a b\": no ckpt-mount store in this folder)",
                Errno(libc::ENOENT)
            )
        );
    }
}
