//! Relative paths as the model tests write them (`"a/b/c"`, `""` for the folder itself), the
//! content a seed stands for, and interned paths for operations that hold `&'static str`.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The directory holding `p` (`""` for a top-level name).
pub fn parent(p: &str) -> &str {
    p.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The last component of `p`.
pub fn file_name(p: &str) -> &str {
    p.rsplit_once('/').map_or(p, |(_, n)| n)
}

/// `name` in `dir` (`""` is the folder itself).
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// `p` is `o` or below it.
pub fn under(p: &str, o: &str) -> bool {
    p == o || (p.len() > o.len() && p.starts_with(o) && p.as_bytes()[o.len()] == b'/')
}

/// The number of components of `p`.
pub fn depth(p: &str) -> usize {
    if p.is_empty() {
        0
    } else {
        p.split('/').count()
    }
}

/// The proper ancestors of `p`, shallowest first (`"a"`, `"a/b"` for `"a/b/c"`).
pub fn ancestors(p: &str) -> Vec<&str> {
    p.match_indices('/').map(|(i, _)| &p[..i]).collect()
}

/// Deterministic file content: 0 to 12 bytes.
pub fn content(seed: u8) -> Vec<u8> {
    let len = usize::from(seed % 13);
    (0..len)
        .map(|i| b'a' + ((usize::from(seed / 13) + i) % 26) as u8)
        .collect()
}

/// Leaks each distinct path once, so resolved operations can hold `&'static str`.
pub fn intern(s: &str) -> &'static str {
    static SEEN: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(p) = seen.get(s) {
        return p;
    }
    let p: &'static str = Box::leak(s.to_string().into_boxed_str());
    seen.insert(p);
    p
}
