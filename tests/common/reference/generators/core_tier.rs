//! The core tier's steps (`tests/core_model.rs`), resolved by its case into [`Op`]s.
//!
//! [`Op`]: super::super::ops::Op

use proptest::prelude::*;

/// Names in every directory; paths go at most this deep when made.
pub const NAMES: [&str; 3] = ["a", "b", "c"];
pub const MAX_DEPTH: usize = 3;
/// Whether rewinds are expected to keep set-uid/set-gid bits of files (they are: the owner is
/// set before the mode, `regression_setid_bits_*`); `CKPT_CORE_SETID=0` leaves such modes out.
pub const SETID_RESTORED: bool = true;
/// Modes for chmod and mkdir; the last two only with set-id modes on (the caller is root, so
/// nothing in the core drops them).
pub const MODES: [u32; 8] = [0o644, 0o600, 0o755, 0o700, 0o500, 0o444, 0o4755, 0o2750];
/// Modes for a run as a normal user (see [`modes`]).
pub const USER_MODES: [u32; 4] = [0o755, 0o700, 0o775, 0o750];
/// Symlink targets; never followed by the test (dangling ones included).
pub const TARGETS: [&str; 6] = ["a", "b", "c/a", "../a", ".", "x"];
/// User xattr names.
pub const XNAMES: [&str; 3] = ["user.a", "user.b", "user.c"];
/// The modes generated cases use.
pub fn modes() -> &'static [u32] {
    if crate::common::user::in_user_run() {
        // A normal user is refused what root is not: every mode keeps the owner's rwx, so
        // files stay writable and directories searchable, as the model (which has no
        // permissions) expects.
        return &USER_MODES;
    }
    if SETID_RESTORED && std::env::var("CKPT_CORE_SETID").as_deref() != Ok("0") {
        &MODES
    } else {
        &MODES[..6]
    }
}

/// Whether generated cases include `Forget` (the kernel dropping its nodes, as under memory
/// pressure). Off, names are still dropped by rewinds.
pub fn forgets() -> bool {
    std::env::var("CKPT_CORE_FORGET").as_deref() != Ok("0")
}

/// A generated step: selectors, resolved against the model just before it runs so that most
/// steps meet something that exists (and every shrunk list stays meaningful).
#[derive(Clone, Debug)]
pub enum G {
    Create {
        dir: u8,
        name: u8,
        seed: u8,
        hold: bool,
    },
    Write {
        file: u8,
        seed: u8,
    },
    Append {
        file: u8,
        seed: u8,
    },
    Replace {
        file: u8,
        seed: u8,
    },
    Truncate {
        file: u8,
        len: u8,
    },
    Mkdir {
        dir: u8,
        name: u8,
        mode: u8,
    },
    Symlink {
        target: u8,
        dir: u8,
        name: u8,
    },
    Link {
        file: u8,
        dir: u8,
        name: u8,
    },
    Unlink {
        entry: u8,
    },
    UnlinkHeld {
        n: u8,
    },
    Rmdir {
        entry: u8,
    },
    /// Onto an existing entry (`new: None`) or a new name in a directory.
    Rename {
        src: u8,
        dst: u8,
        new: Option<(u8, u8)>,
    },
    Exchange {
        a: u8,
        b: u8,
    },
    Chmod {
        entry: u8,
        mode: u8,
    },
    SetXattr {
        entry: u8,
        name: u8,
        seed: u8,
    },
    RemoveXattr {
        entry: u8,
    },
    Open {
        file: u8,
    },
    WriteHeld {
        n: u8,
        off: u8,
        seed: u8,
    },
    TruncHeld {
        n: u8,
        len: u8,
    },
    CloseHeld {
        n: u8,
    },
    Forget,
    NextTurn {
        gap: u8,
    },
    Rewind {
        turn: u8,
    },
    RewindPaths {
        turn: u8,
        entry: u8,
    },
    Undo,
    Redo,
    Relabel {
        turn: u8,
        seed: u8,
    },
    RestoreAfter {
        back: u8,
    },
    /// Only in agent cases (`agent_model.rs`).
    As {
        actor: u8,
    },
    RewindAgent {
        turn: u8,
        who: u8,
        conflicts: u8,
    },
    EditLine {
        file: u8,
        line: u8,
        seed: u8,
    },
}

pub fn step() -> impl Strategy<Value = G> {
    let b = any::<u8>;
    prop_oneof![
        6 => (b(), 0u8..3, b(), any::<bool>())
            .prop_map(|(dir, name, seed, hold)| G::Create { dir, name, seed, hold }),
        4 => (b(), b()).prop_map(|(file, seed)| G::Write { file, seed }),
        2 => (b(), b()).prop_map(|(file, seed)| G::Append { file, seed }),
        4 => (b(), b()).prop_map(|(file, seed)| G::Replace { file, seed }),
        2 => (b(), 0u8..16).prop_map(|(file, len)| G::Truncate { file, len }),
        3 => (b(), 0u8..3, b()).prop_map(|(dir, name, mode)| G::Mkdir { dir, name, mode }),
        2 => (b(), b(), 0u8..3)
            .prop_map(|(target, dir, name)| G::Symlink { target, dir, name }),
        5 => (b(), b(), 0u8..3).prop_map(|(file, dir, name)| G::Link { file, dir, name }),
        3 => b().prop_map(|entry| G::Unlink { entry }),
        2 => b().prop_map(|n| G::UnlinkHeld { n }),
        1 => b().prop_map(|entry| G::Rmdir { entry }),
        6 => (b(), b(), prop::option::of((b(), 0u8..3)))
            .prop_map(|(src, dst, new)| G::Rename { src, dst, new }),
        2 => (b(), b()).prop_map(|(a, b)| G::Exchange { a, b }),
        2 => (b(), b()).prop_map(|(entry, mode)| G::Chmod { entry, mode }),
        2 => (b(), 0u8..3, b()).prop_map(|(entry, name, seed)| G::SetXattr { entry, name, seed }),
        1 => b().prop_map(|entry| G::RemoveXattr { entry }),
        3 => b().prop_map(|file| G::Open { file }),
        3 => (b(), 0u8..16, b()).prop_map(|(n, off, seed)| G::WriteHeld { n, off, seed }),
        1 => (b(), 0u8..16).prop_map(|(n, len)| G::TruncHeld { n, len }),
        1 => b().prop_map(|n| G::CloseHeld { n }),
        1 => Just(G::Forget),
        // A gap of 0 is a step within the current turn (`N.S`): one in four switches.
        6 => (0u8..=3).prop_map(|gap| G::NextTurn { gap }),
        3 => b().prop_map(|turn| G::Rewind { turn }),
        2 => (b(), b()).prop_map(|(turn, entry)| G::RewindPaths { turn, entry }),
        2 => Just(G::Undo),
        1 => Just(G::Redo),
        1 => (b(), b()).prop_map(|(turn, seed)| G::Relabel { turn, seed }),
        2 => (0u8..6).prop_map(|back| G::RestoreAfter { back }),
    ]
}

/// The steps of an agent case: changes by either process, turns, rewinds of every kind.
pub fn agent_step() -> impl Strategy<Value = G> {
    let b = any::<u8>;
    prop_oneof![
        6 => (b(), 0u8..3, b())
            .prop_map(|(dir, name, seed)| G::Create { dir, name, seed, hold: false }),
        4 => (b(), b()).prop_map(|(file, seed)| G::Write { file, seed }),
        1 => (b(), b()).prop_map(|(file, seed)| G::Append { file, seed }),
        3 => (b(), b()).prop_map(|(file, seed)| G::Replace { file, seed }),
        1 => (b(), 0u8..16).prop_map(|(file, len)| G::Truncate { file, len }),
        3 => (b(), 0u8..3, b()).prop_map(|(dir, name, mode)| G::Mkdir { dir, name, mode }),
        1 => (b(), b(), 0u8..3)
            .prop_map(|(target, dir, name)| G::Symlink { target, dir, name }),
        3 => b().prop_map(|entry| G::Unlink { entry }),
        1 => b().prop_map(|entry| G::Rmdir { entry }),
        4 => (b(), b(), prop::option::of((b(), 0u8..3)))
            .prop_map(|(src, dst, new)| G::Rename { src, dst, new }),
        1 => (b(), b()).prop_map(|(a, b)| G::Exchange { a, b }),
        2 => (b(), b()).prop_map(|(entry, mode)| G::Chmod { entry, mode }),
        1 => (b(), 0u8..3, b()).prop_map(|(entry, name, seed)| G::SetXattr { entry, name, seed }),
        1 => b().prop_map(|entry| G::RemoveXattr { entry }),
        3 => (1u8..=2).prop_map(|gap| G::NextTurn { gap }),
        1 => b().prop_map(|turn| G::Rewind { turn }),
        1 => (b(), b()).prop_map(|(turn, entry)| G::RewindPaths { turn, entry }),
        2 => Just(G::Undo),
        1 => Just(G::Redo),
        6 => (0u8..4).prop_map(|actor| G::As { actor }),
        4 => (b(), 0u8..3, 0u8..3)
            .prop_map(|(turn, who, conflicts)| G::RewindAgent { turn, who, conflicts }),
        6 => (b(), 0u8..5, b()).prop_map(|(file, line, seed)| G::EditLine { file, line, seed }),
    ]
}

/// The steps of a merge case (`agent_model.rs`): three text files of five lines edited line by
/// line by both agents and the user, now and then rewritten whole or replaced, turns, and
/// agent rewinds, mostly with `--conflicts merge`.
pub fn merge_step() -> impl Strategy<Value = G> {
    let b = any::<u8>;
    prop_oneof![
        12 => (b(), 0u8..5, b()).prop_map(|(file, line, seed)| G::EditLine { file, line, seed }),
        6 => (0u8..4).prop_map(|actor| G::As { actor }),
        1 => (b(), b()).prop_map(|(file, seed)| G::Write { file, seed }),
        1 => (b(), b()).prop_map(|(file, seed)| G::Replace { file, seed }),
        3 => (1u8..=2).prop_map(|gap| G::NextTurn { gap }),
        6 => (b(), 0u8..3, prop_oneof![1 => Just(0u8), 1 => Just(1u8), 4 => Just(2u8)])
            .prop_map(|(turn, who, conflicts)| G::RewindAgent { turn, who, conflicts }),
        1 => b().prop_map(|turn| G::Rewind { turn }),
        2 => Just(G::Undo),
        1 => Just(G::Redo),
    ]
}

/// The first steps of a merge case: three files, each made a text of five lines, then turn 2.
pub fn merge_prefix() -> Vec<G> {
    let mut out = Vec::new();
    for name in 0..3u8 {
        out.push(G::Create {
            dir: 0,
            name,
            seed: name,
            hold: false,
        });
    }
    for file in 0..3u8 {
        out.push(G::EditLine {
            file,
            line: 0,
            seed: file,
        });
    }
    out.push(G::NextTurn { gap: 1 });
    out
}

pub fn pick<T: Clone>(sel: u8, from: &[T]) -> Option<T> {
    if from.is_empty() {
        None
    } else {
        Some(from[usize::from(sel) % from.len()].clone())
    }
}
