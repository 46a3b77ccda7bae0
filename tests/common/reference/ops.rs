//! The one operation type of the model tests: what a tier does to the folder and to its
//! history. Each tier's harness says how it executes an operation (the core tier calls
//! `CkptFs` as the fuser adapter does, the mounted tier makes the system calls in a real
//! mount, the shell tier runs shell commands and holds files in the test process); the paths
//! are relative to the folder. A tier drives the operations its generator makes; the others
//! are refused by its harness.
//!
//! `P` is a path, or a path selector in generated cases; `T` is a turn, or a turn selector.
//! A list of concrete operations (`Op`, the default parameters) replays a case exactly: the
//! `regression_*` tests are such lists.

/// One step of a case.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Op<P = &'static str, T = u64> {
    // ---- files ----
    /// `create` a new file with `content(seed)`, then close it.
    Create(P, u8),
    /// `create` a new file with `content(seed)` and hold it open (read-write).
    CreateHeld(P, u8),
    /// The file's content becomes `content(seed)`: open for writing with `O_TRUNC`, write.
    /// The mounted tier creates a missing file (`std::fs::write`); the core tier writes
    /// existing files only.
    Write(P, u8),
    /// Write `content(seed)` at the end (`O_APPEND`). The mounted tier creates a missing file;
    /// the core tier appends to existing files only.
    Append(P, u8),
    /// Replace a file as `sed -i`, editors and git do: `create` a temporary file beside it
    /// with `content(seed)`, then `rename` it over the file.
    Replace(P, u8),
    /// Cut or extend the file to this many bytes: `truncate(2)` in the core tier, an open for
    /// writing and `ftruncate` in the mounted tier.
    Truncate(P, u8),
    /// `unlink`.
    Unlink(P),
    /// `symlink(target, path)`.
    Symlink(&'static str, P),
    /// `link(existing, new)`. The mounted tier follows a symlink (`AT_SYMLINK_FOLLOW`):
    /// its tree does not record symlinks sharing one inode (and a rewind restores each
    /// symlink name as its own inode), so hard links to symlinks are outside its model.
    Link(P, P),
    // ---- directories ----
    /// `mkdir` with this mode.
    Mkdir(P, u32),
    /// `mkdir -p`.
    MkdirAll(P),
    /// `rmdir`.
    Rmdir(P),
    /// `rm -r`: the directory and everything below it.
    RemoveAll(P),
    // ---- names and attributes ----
    /// `rename(from, to)`.
    Rename(P, P),
    /// `renameat2(a, b, RENAME_EXCHANGE)`.
    Exchange(P, P),
    /// `chmod` (follows a symlink, as chmod(2) does).
    Chmod(P, u32),
    /// `setxattr(XNAMES[n], content(seed))`.
    SetXattr(P, u8, u8),
    /// `removexattr(XNAMES[n])`.
    RemoveXattr(P, u8),
    // ---- handles held across steps ----
    /// Open for writing (no create, no truncate) and hold the handle; the oldest is closed
    /// past the tier's limit. Held handles stay open across turns.
    Open(P),
    /// `pwrite(content(seed))` at an offset through held handle `n` (modulo those held).
    WriteHeld(u8, u8, u8),
    /// `ftruncate` through held handle `n`.
    TruncHeld(u8, u8),
    /// Close held handle `n`.
    CloseHeld(u8),
    /// The kernel forgets every node it does not hold open.
    Forget,
    /// Open with `O_APPEND | O_CREAT` in the test process and hold the writer (shell tier).
    Hold(P),
    /// Append this line through held writer `n` (shell tier: its position among the writers
    /// still open, in the order they were opened).
    WriteLine(u8, &'static str),
    /// Open read-only in the test process and keep it open to the end of the case (a pager,
    /// an editor's buffer): its inode cannot be recycled (shell tier).
    Read(P),
    // ---- shell commands ----
    /// A script run by `sh -ec` in the folder; its exit status is recorded, not asserted.
    Sh(&'static str),
    /// Wait until the daemon has stored every file it moved aside (`.ckpt/staged` empty), so
    /// that their inodes are free for the next file made.
    Settle,
    // ---- history ----
    /// Begin the turn numbered `gap` above the highest used so far; in the core tier, `0`
    /// begins the next step of the current turn (`N.S`, `tests/core_model.rs`).
    NextTurn(u8),
    /// Rewind to this turn.
    Rewind(T),
    /// Rewind only this path (and the directories above it) to the start of this turn.
    RewindPaths(T, P),
    /// `undo`: revert the newest operation in effect (a turn switch, rewind, partial rewind,
    /// relabel, or a redo of one).
    Undo,
    /// `redo`: re-apply the newest operation undone.
    Redo,
    /// `turn --label N TEXT`: label turn N with `content(seed)` as text.
    Relabel(T, u8),
    /// `op restore ID` of the `k`-th most recent operation (`0`: the newest), modulo the
    /// operations there are: the folder as it was just after it (refused for one that has no
    /// such moment: a relabel, or an undo or redo of a turn switch or a relabel).
    RestoreAfter(u8),
    /// The changes that follow are agent 1's or agent 2's (`1`, `2`: two named agents, each
    /// its own process), an orphan agent 1 left behind (`3`, agent 1's too) or another
    /// process's (`0`).
    As(u8),
    /// `rewind N --agent [NAME]`: whose changes (`0` every agent's, `1` or `2` that agent's
    /// alone) and what to do with conflicts (`0` keep, `1` rewind, `2` merge).
    RewindAgent(T, u8, u8),
    /// Replace line `line % 5` of a text file of five lines (shorter ones padded) with a line
    /// made from `seed`: an edit of one line, as an editor or `sed -i` makes it.
    EditLine(P, u8, u8),
}

use Op::*;

impl<P, T> Op<P, T> {
    /// The same operation with its paths and turns resolved by `path` and `turn`.
    pub fn map<Q, U>(self, mut path: impl FnMut(P) -> Q, mut turn: impl FnMut(T) -> U) -> Op<Q, U> {
        match self {
            Create(p, s) => Create(path(p), s),
            CreateHeld(p, s) => CreateHeld(path(p), s),
            Write(p, s) => Write(path(p), s),
            Append(p, s) => Append(path(p), s),
            Replace(p, s) => Replace(path(p), s),
            Truncate(p, n) => Truncate(path(p), n),
            Unlink(p) => Unlink(path(p)),
            Symlink(t, p) => Symlink(t, path(p)),
            Link(a, b) => {
                let a = path(a);
                Link(a, path(b))
            }
            Mkdir(p, m) => Mkdir(path(p), m),
            MkdirAll(p) => MkdirAll(path(p)),
            Rmdir(p) => Rmdir(path(p)),
            RemoveAll(p) => RemoveAll(path(p)),
            Rename(a, b) => {
                let a = path(a);
                Rename(a, path(b))
            }
            Exchange(a, b) => {
                let a = path(a);
                Exchange(a, path(b))
            }
            Chmod(p, m) => Chmod(path(p), m),
            SetXattr(p, n, s) => SetXattr(path(p), n, s),
            RemoveXattr(p, n) => RemoveXattr(path(p), n),
            Open(p) => Open(path(p)),
            WriteHeld(n, o, s) => WriteHeld(n, o, s),
            TruncHeld(n, l) => TruncHeld(n, l),
            CloseHeld(n) => CloseHeld(n),
            Forget => Forget,
            Hold(p) => Hold(path(p)),
            WriteLine(n, s) => WriteLine(n, s),
            Read(p) => Read(path(p)),
            Sh(s) => Sh(s),
            Settle => Settle,
            NextTurn(g) => NextTurn(g),
            Rewind(t) => Rewind(turn(t)),
            RewindPaths(t, p) => {
                let t = turn(t);
                RewindPaths(t, path(p))
            }
            Undo => Undo,
            Redo => Redo,
            Relabel(t, s) => Relabel(turn(t), s),
            RestoreAfter(k) => RestoreAfter(k),
            As(a) => As(a),
            RewindAgent(t, w, c) => RewindAgent(turn(t), w, c),
            EditLine(p, l, s) => EditLine(path(p), l, s),
        }
    }

    /// The operation's name, for the per-kind counts the property tests print.
    pub fn kind(&self) -> &'static str {
        match self {
            Create(..) => "Create",
            CreateHeld(..) => "CreateHeld",
            Write(..) => "Write",
            Append(..) => "Append",
            Replace(..) => "Replace",
            Truncate(..) => "Truncate",
            Unlink(..) => "Unlink",
            Symlink(..) => "Symlink",
            Link(..) => "Link",
            Mkdir(..) => "Mkdir",
            MkdirAll(..) => "MkdirAll",
            Rmdir(..) => "Rmdir",
            RemoveAll(..) => "RemoveAll",
            Rename(..) => "Rename",
            Exchange(..) => "Exchange",
            Chmod(..) => "Chmod",
            SetXattr(..) => "SetXattr",
            RemoveXattr(..) => "RemoveXattr",
            Open(..) => "Open",
            WriteHeld(..) => "WriteHeld",
            TruncHeld(..) => "TruncHeld",
            CloseHeld(..) => "CloseHeld",
            Forget => "Forget",
            Hold(..) => "Hold",
            WriteLine(..) => "WriteLine",
            Read(..) => "Read",
            Sh(..) => "Sh",
            Settle => "Settle",
            NextTurn(..) => "NextTurn",
            Rewind(..) => "Rewind",
            RewindPaths(..) => "RewindPaths",
            Undo => "Undo",
            Redo => "Redo",
            Relabel(..) => "Relabel",
            RestoreAfter(..) => "RestoreAfter",
            As(..) => "As",
            RewindAgent(..) => "RewindAgent",
            EditLine(..) => "EditLine",
        }
    }
}

/// Printed as the Rust that builds it, so a failing case's list pastes into a regression test.
impl<P: std::fmt::Debug, T: std::fmt::Debug> std::fmt::Debug for Op<P, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Create(p, s) => write!(f, "Create({p:?}, {s})"),
            CreateHeld(p, s) => write!(f, "CreateHeld({p:?}, {s})"),
            Write(p, s) => write!(f, "Write({p:?}, {s})"),
            Append(p, s) => write!(f, "Append({p:?}, {s})"),
            Replace(p, s) => write!(f, "Replace({p:?}, {s})"),
            Truncate(p, n) => write!(f, "Truncate({p:?}, {n})"),
            Unlink(p) => write!(f, "Unlink({p:?})"),
            Symlink(t, p) => write!(f, "Symlink({t:?}, {p:?})"),
            Link(a, b) => write!(f, "Link({a:?}, {b:?})"),
            Mkdir(p, m) => write!(f, "Mkdir({p:?}, 0o{m:o})"),
            MkdirAll(p) => write!(f, "MkdirAll({p:?})"),
            Rmdir(p) => write!(f, "Rmdir({p:?})"),
            RemoveAll(p) => write!(f, "RemoveAll({p:?})"),
            Rename(a, b) => write!(f, "Rename({a:?}, {b:?})"),
            Exchange(a, b) => write!(f, "Exchange({a:?}, {b:?})"),
            Chmod(p, m) => write!(f, "Chmod({p:?}, 0o{m:o})"),
            SetXattr(p, n, s) => write!(f, "SetXattr({p:?}, {n}, {s})"),
            RemoveXattr(p, n) => write!(f, "RemoveXattr({p:?}, {n})"),
            Open(p) => write!(f, "Open({p:?})"),
            WriteHeld(n, o, s) => write!(f, "WriteHeld({n}, {o}, {s})"),
            TruncHeld(n, l) => write!(f, "TruncHeld({n}, {l})"),
            CloseHeld(n) => write!(f, "CloseHeld({n})"),
            Forget => write!(f, "Forget"),
            Hold(p) => write!(f, "Hold({p:?})"),
            WriteLine(n, s) => write!(f, "WriteLine({n}, {s:?})"),
            Read(p) => write!(f, "Read({p:?})"),
            Sh(s) => write!(f, "Sh({s:?})"),
            Settle => write!(f, "Settle"),
            NextTurn(g) => write!(f, "NextTurn({g})"),
            Rewind(t) => write!(f, "Rewind({t:?})"),
            RewindPaths(t, p) => write!(f, "RewindPaths({t:?}, {p:?})"),
            Undo => write!(f, "Undo"),
            Redo => write!(f, "Redo"),
            Relabel(t, s) => write!(f, "Relabel({t:?}, {s})"),
            RestoreAfter(k) => write!(f, "RestoreAfter({k})"),
            As(a) => write!(f, "As({a})"),
            RewindAgent(t, w, c) => write!(f, "RewindAgent({t:?}, {w}, {c})"),
            EditLine(p, l, s) => write!(f, "EditLine({p:?}, {l}, {s})"),
        }
    }
}
