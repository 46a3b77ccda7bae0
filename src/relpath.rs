//! Relative paths inside the folder, as the journal stores them.
//!
//! Invariant of a valid `RelPath`: non-empty, relative, `/`-separated components that are
//! never empty, `.` or `..`, no NUL byte, and not inside the store (`.ckpt` at the top).
//! The journal is untrusted input, so every path read from it is validated again.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ffi::{CString, OsStr};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// Name of the store directory at the top of the folder.
pub const STORE_DIR: &str = ".ckpt";

/// A validated path relative to the folder root.
///
/// Its bytes are shared: the index holds one path in several places (the capture, the set of
/// paths captured in the epoch), and a rewind's plan, saves and report hold every planned path
/// again, so a clone is a reference count, not a copy (for a 100,000-path rewind, tens of
/// megabytes at its peak).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(Arc<[u8]>);

/// Why a path is not acceptable as a `RelPath`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPath(pub String);

impl fmt::Display for BadPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl RelPath {
    /// Validates raw bytes as a relative path inside the folder.
    pub fn new(bytes: &[u8]) -> Result<Self, BadPath> {
        if bytes.is_empty() {
            return Err(BadPath("empty path".into()));
        }
        if bytes.contains(&0) {
            return Err(BadPath("path contains a NUL byte".into()));
        }
        if bytes[0] == b'/' {
            return Err(BadPath("absolute path".into()));
        }
        for (i, part) in bytes.split(|b| *b == b'/').enumerate() {
            match part {
                b"" => return Err(BadPath("empty path component".into())),
                b"." | b".." => return Err(BadPath("path contains . or ..".into())),
                _ if i == 0 && part == STORE_DIR.as_bytes() => {
                    return Err(BadPath("path inside the store".into()));
                }
                _ => {}
            }
        }
        Ok(Self(Arc::from(bytes)))
    }

    /// Joins a validated parent (or the root, `None`) with one validated name.
    pub fn join(parent: Option<&RelPath>, name: &OsStr) -> Result<Self, BadPath> {
        let name = name.as_bytes();
        if name.contains(&b'/') {
            return Err(BadPath("name contains /".into()));
        }
        match parent {
            None => Self::new(name),
            Some(p) => {
                let mut v = p.0.to_vec();
                v.push(b'/');
                v.extend_from_slice(name);
                Self::new(&v)
            }
        }
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The path as text for a program to read (a report's JSON): unquoted, with U+FFFD in
    /// place of the bytes of a name that is not UTF-8. [`fmt::Display`] quotes it for a person.
    pub fn lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// As an `OsStr`.
    pub fn as_os_str(&self) -> &OsStr {
        OsStr::from_bytes(&self.0)
    }

    /// The parent path, or `None` for a top-level entry.
    pub fn parent(&self) -> Option<RelPath> {
        self.0
            .iter()
            .rposition(|b| *b == b'/')
            .map(|i| RelPath(Arc::from(&self.0[..i])))
    }

    /// The last component.
    pub fn file_name(&self) -> &OsStr {
        let start = self.0.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1);
        OsStr::from_bytes(&self.0[start..])
    }

    /// Number of components.
    pub fn depth(&self) -> usize {
        self.0.iter().filter(|b| **b == b'/').count() + 1
    }

    /// Whether `self` is `other` or lies below it.
    pub fn starts_with(&self, other: &RelPath) -> bool {
        self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.get(other.0.len()) == Some(&b'/'))
    }

    /// Replaces the prefix `from` (which `self` must start with) by `to`.
    pub fn rebase(&self, from: &RelPath, to: &RelPath) -> Option<RelPath> {
        if !self.starts_with(from) {
            return None;
        }
        let mut v = to.0.to_vec();
        v.extend_from_slice(&self.0[from.0.len()..]);
        Some(RelPath(Arc::from(v)))
    }

    /// As a C string for `open_beneath`; valid paths never contain NUL.
    pub fn to_cstring(&self) -> CString {
        CString::new(self.0.to_vec()).unwrap_or_default()
    }

    /// The last component as a C string (valid paths never contain NUL).
    pub fn file_name_cstring(&self) -> CString {
        CString::new(self.file_name().as_bytes()).unwrap_or_default()
    }

    /// Opens the directory holding this path beneath `root` (the folder), following no
    /// symlink on the way: `root` itself for a top-level entry. `flags` are the open flags
    /// (`O_PATH | O_DIRECTORY | O_NOFOLLOW`, or `O_RDONLY | …` to list it).
    pub fn open_parent(
        &self,
        root: std::os::fd::BorrowedFd<'_>,
        flags: i32,
    ) -> crate::sys::SysResult<std::os::fd::OwnedFd> {
        match self.parent() {
            None => crate::sys::openat(root, c".", flags, 0),
            Some(p) => crate::sys::open_beneath(root, &p.to_cstring(), flags, 0),
        }
    }
}

/// As a person reads it: quoted as git quotes a path ([`crate::quote::quote_path`]), so that a
/// name printed in a message or a log line can neither fake nor hide a line. Text meant for a
/// program (a report's JSON) takes [`RelPath::lossy`] instead.
impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::quote::quote_path(&self.0))
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

/// Any bytes as the journal and `--json` write a name: a JSON string when they are UTF-8, else
/// `{"hex": "..."}`. One encoding for paths, symlink targets and extended attributes
/// (`#[serde(with = "crate::relpath::text_or_hex")]` on a `Vec<u8>`).
pub mod text_or_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `b` as a string, or as `{"hex": ...}` when it is not UTF-8.
    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(b) {
            Ok(text) => s.serialize_str(text),
            Err(_) => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("hex", &super::hex(b))?;
                m.end()
            }
        }
    }

    /// Reads either form back.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Hex { hex: String },
        }
        match Raw::deserialize(d)? {
            Raw::Text(t) => Ok(t.into_bytes()),
            Raw::Hex { hex } => {
                super::unhex(&hex).ok_or_else(|| serde::de::Error::custom("bad hex bytes"))
            }
        }
    }
}

/// On disk: a JSON string when the path is UTF-8, else `{"hex": "..."}` ([`text_or_hex`]).
impl Serialize for RelPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        text_or_hex::serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for RelPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes = text_or_hex::deserialize(d)?;
        RelPath::new(&bytes).map_err(serde::de::Error::custom)
    }
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    // A table, not `write!` per byte: every capture names its blob with this (the formatting
    // machinery cost about a microsecond per sha256).
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

/// Parses lower- or upper-case hex.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_escapes_and_the_store() {
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            ".",
            "a//b",
            "a/",
            ".ckpt",
            ".ckpt/journal",
            "a\0b",
        ] {
            assert!(RelPath::new(bad.as_bytes()).is_err(), "{bad:?} accepted");
        }
        assert!(RelPath::new(b"a/.ckpt").is_ok());
        assert!(RelPath::new(b".ckptx").is_ok());
    }

    #[test]
    fn serde_round_trips_non_utf8() {
        let p = RelPath::new(b"dir/\xff\xfe").expect("valid");
        let json = serde_json::to_string(&p).expect("serialise");
        assert_eq!(json, r#"{"hex":"6469722ffffe"}"#);
        let back: RelPath = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, p);
        assert!(serde_json::from_str::<RelPath>(r#""../x""#).is_err());
    }

    #[test]
    fn displays_quoted_for_people_and_raw_for_programs() {
        let p = RelPath::new("dir/é\n.txt".as_bytes()).expect("valid");
        assert_eq!(p.to_string(), r#""dir/\303\251\n.txt""#);
        assert_eq!(p.lossy(), "dir/é\n.txt");
        let json = serde_json::to_string(&p).expect("serialise");
        assert_eq!(json, "\"dir/é\\n.txt\"");
        assert_eq!(
            RelPath::new(b"src/a.rs").expect("valid").to_string(),
            "src/a.rs"
        );
    }

    #[test]
    fn prefix_helpers() {
        let a = RelPath::new(b"a/b").expect("valid");
        let x = RelPath::new(b"a/b/c/d").expect("valid");
        assert!(x.starts_with(&a));
        assert!(!RelPath::new(b"a/bc").expect("valid").starts_with(&a));
        let to = RelPath::new(b"z").expect("valid");
        assert_eq!(
            x.rebase(&a, &to),
            Some(RelPath::new(b"z/c/d").expect("valid"))
        );
        assert_eq!(x.depth(), 4);
        assert_eq!(x.file_name(), "d");
        assert_eq!(x.parent(), Some(RelPath::new(b"a/b/c").expect("valid")));
    }
}
