//! The mounted tier's operations (`tests/model.rs`): [`Op`]s over path and turn selectors.
//!
//! [`Op`]: super::super::ops::Op

use super::super::ops::Op::{self, *};
use proptest::prelude::*;
use std::sync::LazyLock;

/// A path in a generated case: a fixed one, or one picked at run time so that most operations
/// meet something that exists.
#[derive(Clone, Copy)]
pub enum Pth {
    /// This path.
    At(&'static str),
    /// The existing entry picked by this selector (`"a"` when the folder is empty).
    Existing(u8),
    /// The existing regular file picked by this selector (`"a"` when there is none).
    File(u8),
    /// Name `NAMES[name]` in the existing directory (or the root) picked by `dir`.
    In(u8, u8),
}

impl std::fmt::Debug for Pth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pth::At(p) => write!(f, "{p:?}"),
            Pth::Existing(n) => write!(f, "Existing({n})"),
            Pth::File(n) => write!(f, "File({n})"),
            Pth::In(d, n) => write!(f, "In({d}, {n})"),
        }
    }
}

pub const NAMES: [&str; 3] = ["a", "b", "c"];
/// Modes for chmod; as root the read-only directory modes block nothing, but they must still
/// come back exactly.
pub const MODES: [u32; 6] = [0o600, 0o644, 0o755, 0o700, 0o500, 0o444];
/// The modes of a run as a normal user: a directory it cannot search cannot be snapshotted
/// by it either, so every mode keeps the owner's `x` (0o500 and 0o555 still take away `w`).
pub const USER_MODES: [u32; 5] = [0o755, 0o700, 0o775, 0o500, 0o555];

pub fn modes() -> Vec<u32> {
    if crate::common::user::in_user_run() {
        USER_MODES.to_vec()
    } else {
        MODES.to_vec()
    }
}
/// Symlink targets: relative and without `..`, so that following one never leaves the folder.
pub const TARGETS: [&str; 7] = ["a", "b", "c/a", "a/b/c", "x", ".", "b/a"];

/// Every path of `depth` components over `NAMES`.
pub fn paths_of_depth(depth: usize) -> Vec<&'static str> {
    let mut out: Vec<String> = vec![String::new()];
    for _ in 0..depth {
        out = out
            .iter()
            .flat_map(|p| {
                NAMES.iter().map(move |n| {
                    if p.is_empty() {
                        (*n).to_string()
                    } else {
                        format!("{p}/{n}")
                    }
                })
            })
            .collect();
    }
    out.into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect()
}

pub static PATHS: LazyLock<[Vec<&'static str>; 3]> =
    LazyLock::new(|| [paths_of_depth(1), paths_of_depth(2), paths_of_depth(3)]);

pub fn fixed() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        4 => prop::sample::select(PATHS[0].clone()),
        3 => prop::sample::select(PATHS[1].clone()),
        2 => prop::sample::select(PATHS[2].clone()),
    ]
}

/// Any path: fixed, an existing entry, or a new name in an existing directory.
pub fn path() -> impl Strategy<Value = Pth> {
    prop_oneof![
        2 => fixed().prop_map(Pth::At),
        2 => any::<u8>().prop_map(Pth::Existing),
        2 => (any::<u8>(), 0u8..3).prop_map(|(d, n)| Pth::In(d, n)),
    ]
}

/// A path that most likely is a regular file.
pub fn file() -> impl Strategy<Value = Pth> {
    prop_oneof![
        1 => fixed().prop_map(Pth::At),
        4 => any::<u8>().prop_map(Pth::File),
    ]
}

/// A new name, most likely in a directory that exists.
pub fn new_name() -> impl Strategy<Value = Pth> {
    prop_oneof![
        1 => fixed().prop_map(Pth::At),
        4 => (any::<u8>(), 0u8..3).prop_map(|(d, n)| Pth::In(d, n)),
    ]
}

/// A path that most likely exists.
pub fn existing() -> impl Strategy<Value = Pth> {
    prop_oneof![
        1 => fixed().prop_map(Pth::At),
        4 => any::<u8>().prop_map(Pth::Existing),
    ]
}

/// One operation; a rewind's turn is a selector among the turns that exist when it runs.
pub fn op() -> impl Strategy<Value = Op<Pth, u8>> {
    prop_oneof![
        6 => (path(), any::<u8>()).prop_map(|(p, s)| Write(p, s)),
        2 => (file(), any::<u8>()).prop_map(|(p, s)| Append(p, s)),
        2 => (file(), 0u8..12).prop_map(|(p, n)| Truncate(p, n)),
        3 => (existing(), prop::sample::select(modes())).prop_map(|(p, m)| Chmod(p, m)),
        // `create_dir`: mode 0o777, less the umask.
        3 => path().prop_map(|p| Mkdir(p, 0o777)),
        2 => path().prop_map(MkdirAll),
        2 => file().prop_map(Unlink),
        1 => existing().prop_map(Rmdir),
        2 => existing().prop_map(RemoveAll),
        6 => (existing(), path()).prop_map(|(a, b)| Rename(a, b)),
        3 => (existing(), existing()).prop_map(|(a, b)| Exchange(a, b)),
        2 => (prop::sample::select(TARGETS.to_vec()), path()).prop_map(|(t, p)| Symlink(t, p)),
        4 => (file(), new_name()).prop_map(|(a, b)| Link(a, b)),
        2 => file().prop_map(Open),
        3 => (any::<u8>(), 0u8..16, any::<u8>()).prop_map(|(n, o, s)| WriteHeld(n, o, s)),
        1 => any::<u8>().prop_map(CloseHeld),
        4 => (1u8..=3).prop_map(NextTurn),
        3 => any::<u8>().prop_map(Rewind),
    ]
}
