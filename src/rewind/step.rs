//! What one step of a rewind comes to: its [`Outcome`] (the path changed, or already held its
//! target), whether it is [`Rewrite`]n even when it matches, and the [`StepError`] it failed
//! with: what it was doing ([`Op`]), on which path, and the errno where a system call failed.
//! Kept apart from `restore.rs` because the preview (`preview.rs`) and the order of the run
//! (`apply.rs`) meet the same outcomes and errors.
//!
//! A [`StepError`] displays as the reason a report gives for the path (`Failure::reason`):
//! that text is what users and scripts read, so it is written here once, per operation.
//! Its errno is the one `src/errno.rs` gives for it, as every error of the crate.
//!
//! No I/O.

use crate::relpath::RelPath;
use crate::sys::Errno;
use std::fmt;

/// What a step did to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The path was given its target: written, made, removed or linked.
    Changed,
    /// The path already held its target (or, for a removal, nothing stood there).
    Unchanged,
}

impl Outcome {
    /// [`Outcome::Changed`] when `changed`.
    pub(super) fn changed_if(changed: bool) -> Self {
        if changed {
            Self::Changed
        } else {
            Self::Unchanged
        }
    }

    /// Whether the path changed.
    pub(super) fn changed(self) -> bool {
        self == Self::Changed
    }

    /// Changed when either is.
    pub(super) fn or(self, other: Self) -> Self {
        Self::changed_if(self.changed() || other.changed())
    }
}

/// Whether a restoration is written even where the path holds its target when the step runs:
/// decided before the run began, as its preview decided it (`preview::decide`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rewrite {
    /// Left as it is where it matches its target.
    UnlessMatching,
    /// Written whatever stands there (the preview listed it as changed).
    Always,
}

/// What a step was doing when it failed: each has the words its reason starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Opening the directory that holds the path (the reason is the refusal alone).
    OpenParent,
    /// Deciding what to do with the target the journal recorded (the reason is the cause).
    Target,
    /// `lstat` or `fstat` of the path.
    Stat,
    /// `lstat` of the first name of a hard-link group (the error's path), to link to it.
    StatLinked,
    /// Removing what stands at the path (a removal step).
    Remove,
    /// Removing what stands where a directory is to be made.
    RemoveExisting,
    /// Removing the directory that stands where a temp file is moved.
    RemoveDirThere,
    /// `mkdirat`.
    CreateDir,
    /// Opening a node (`O_PATH`) to give it its attributes.
    OpenNode(Node),
    /// Opening a file to write it in place.
    OpenForWriting,
    /// Writing a file's bytes (read from the store's blob).
    Write,
    /// Cutting a file written in place to its length.
    Truncate,
    /// Creating a temp file.
    Create,
    /// Creating a temp symlink.
    CreateSymlink,
    /// Creating a temp FIFO.
    CreateFifo,
    /// Renaming the temp file over the path.
    MoveIntoPlace,
    /// Linking to the first name of a hard-link group.
    Link,
    /// `fchown`.
    SetOwner,
    /// Setting the extended attributes.
    SetXattrs,
    /// `fchmod` (a file's, or a directory's at the end of the run).
    SetMode,
}

/// What [`Op::OpenNode`] opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node {
    /// The directory at the path.
    Dir,
    /// The symlink at the path.
    Symlink,
    /// A temp symlink just made.
    NewSymlink,
    /// A temp FIFO just made.
    NewFifo,
}

impl Op {
    /// The words a reason starts with (`cannot set mode`); the path, for [`Op::StatLinked`].
    fn words(self, f: &mut fmt::Formatter<'_>, path: Option<&RelPath>) -> fmt::Result {
        let node = |n: Node| match n {
            Node::Dir => "the directory",
            Node::Symlink => "the symlink",
            Node::NewSymlink => "the new symlink",
            Node::NewFifo => "the new fifo",
        };
        match self {
            Self::OpenParent => f.write_str("cannot open its parent"),
            Self::Target => f.write_str("not restored"),
            Self::Stat => f.write_str("cannot stat"),
            Self::StatLinked => match path {
                Some(p) => write!(f, "cannot stat {p}"),
                None => f.write_str("cannot stat"),
            },
            Self::Remove => f.write_str("cannot remove"),
            Self::RemoveExisting => f.write_str("cannot remove what is there"),
            Self::RemoveDirThere => f.write_str("cannot remove the directory there"),
            Self::CreateDir => f.write_str("cannot create directory"),
            Self::OpenNode(n) => write!(f, "cannot open {}", node(n)),
            Self::OpenForWriting => f.write_str("cannot open for writing"),
            Self::Write => f.write_str("cannot write"),
            Self::Truncate => f.write_str("cannot truncate"),
            Self::Create => f.write_str("cannot create"),
            Self::CreateSymlink => f.write_str("cannot create symlink"),
            Self::CreateFifo => f.write_str("cannot create fifo"),
            Self::MoveIntoPlace => f.write_str("cannot move into place"),
            Self::Link => f.write_str("cannot link"),
            Self::SetOwner => f.write_str("cannot set owner"),
            Self::SetXattrs => f.write_str("cannot set extended attributes"),
            Self::SetMode => f.write_str("cannot set mode"),
        }
    }
}

/// Why the directory holding a path could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ParentError {
    /// A parent is a symlink, or lies beyond one: refused, never followed.
    Symlink,
    /// A parent is something other than a directory.
    NotDir,
    /// A parent is missing.
    Missing,
    /// Another errno.
    Other(Errno),
}

impl ParentError {
    /// The errno behind the refusal.
    pub(super) fn errno(self) -> Errno {
        match self {
            Self::Symlink => Errno(libc::ELOOP),
            Self::NotDir => Errno(libc::ENOTDIR),
            Self::Missing => Errno(libc::ENOENT),
            Self::Other(e) => e,
        }
    }
}

impl fmt::Display for ParentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Symlink => f.write_str("a parent directory is a symlink: refused"),
            Self::NotDir => f.write_str("a parent is not a directory"),
            Self::Missing => f.write_str("its parent directory is missing"),
            Self::Other(e) => write!(f, "cannot open its parent: {e}"),
        }
    }
}

/// What went wrong in a step's [`Op`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cause {
    /// A system call failed.
    Sys(Errno),
    /// The directory holding the path could not be opened.
    Parent(ParentError),
    /// The journal recorded the path as not captured, with this reason (over `--max-blob`, a
    /// socket, a device).
    Skipped(String),
    /// Its staged pre-image was never stored.
    NeverStored,
    /// A restoration of a path that must not exist: the plan puts those among removals.
    AbsentTarget,
    /// The inode at the path changed between the check and the write.
    ChangedMeanwhile,
    /// The recorded symlink target holds a NUL byte.
    NulInTarget,
}

/// Why one step of a rewind failed: what it was doing, on which path, and why. Displayed as
/// the reason the report gives for the step's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StepError {
    /// What the step was doing.
    pub(super) op: Op,
    /// The path it was doing it to, where known (set at the step's boundary).
    pub(super) path: Option<RelPath>,
    /// What went wrong.
    pub(super) cause: Cause,
}

/// `StepError`s of a step.
pub(super) type StepResult<T> = Result<T, StepError>;

impl StepError {
    /// `op` failed for `cause`, on a path the step's boundary names.
    pub(super) fn new(op: Op, cause: Cause) -> Self {
        Self {
            op,
            path: None,
            cause,
        }
    }

    /// The error, on `path` unless it names one already.
    pub(super) fn on(mut self, path: &RelPath) -> Self {
        if self.path.is_none() {
            self.path = Some(path.clone());
        }
        self
    }

    /// The errno of the failure: the system call's, or the nearest one for what is not one.
    pub(super) fn errno(&self) -> Errno {
        match &self.cause {
            Cause::Sys(e) => *e,
            Cause::Parent(p) => p.errno(),
            Cause::Skipped(_) | Cause::NeverStored | Cause::AbsentTarget => Errno(libc::EIO),
            Cause::ChangedMeanwhile => Errno(libc::EAGAIN),
            Cause::NulInTarget => Errno(libc::EINVAL),
        }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Cause::Sys(e) => {
                self.op.words(f, self.path.as_ref())?;
                write!(f, ": {e}")
            }
            // The refusal says itself that the parent was being opened.
            Cause::Parent(p) if self.op == Op::OpenParent => write!(f, "{p}"),
            Cause::Parent(p) => {
                self.op.words(f, self.path.as_ref())?;
                write!(f, ": {p}")
            }
            Cause::Skipped(reason) => write!(f, "not restored: {reason}"),
            Cause::NeverStored => {
                f.write_str("not restored: its staged pre-image was never stored")
            }
            Cause::AbsentTarget => f.write_str("internal: absent target in the restore list"),
            Cause::ChangedMeanwhile => {
                f.write_str("the file changed while the rewind ran: not written")
            }
            Cause::NulInTarget => f.write_str("symlink target contains NUL"),
        }
    }
}

impl std::error::Error for StepError {}

/// Turns the errno of a failed system call into a [`StepError`] saying `op` was being done:
/// `sys::mkdirat(..).map_err(sys_err(Op::CreateDir))?`.
pub(super) fn sys_err(op: Op) -> impl Fn(Errno) -> StepError {
    move |e| StepError::new(op, Cause::Sys(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("a valid path")
    }

    #[test]
    fn reasons_read_as_the_report_gives_them() {
        let eio = Errno(libc::EIO);
        let reason = |op, cause| StepError::new(op, cause).to_string();
        assert_eq!(
            reason(Op::SetMode, Cause::Sys(eio)),
            format!("cannot set mode: {eio}")
        );
        assert_eq!(
            reason(Op::OpenNode(Node::NewFifo), Cause::Sys(eio)),
            format!("cannot open the new fifo: {eio}")
        );
        assert_eq!(
            reason(Op::OpenParent, Cause::Parent(ParentError::Symlink)),
            "a parent directory is a symlink: refused"
        );
        assert_eq!(
            reason(Op::OpenParent, Cause::Parent(ParentError::Other(eio))),
            format!("cannot open its parent: {eio}")
        );
        assert_eq!(
            reason(Op::SetMode, Cause::Parent(ParentError::Missing)),
            "cannot set mode: its parent directory is missing"
        );
        assert_eq!(
            reason(Op::Target, Cause::Skipped("over --max-blob".into())),
            "not restored: over --max-blob"
        );
        let linked = StepError::new(Op::StatLinked, Cause::Sys(eio)).on(&p("d/first"));
        assert_eq!(linked.to_string(), format!("cannot stat d/first: {eio}"));
        // The path a step names first is kept.
        assert_eq!(linked.on(&p("other")).path, Some(p("d/first")));
    }

    #[test]
    fn the_errno_is_kept() {
        let e = StepError::new(Op::Write, Cause::Sys(Errno(libc::ENOSPC)));
        assert_eq!(e.errno(), Errno(libc::ENOSPC));
        let refused = StepError::new(Op::OpenParent, Cause::Parent(ParentError::Symlink));
        assert_eq!(refused.errno(), Errno(libc::ELOOP));
    }
}
