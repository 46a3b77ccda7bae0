//! Identifiers, as types: a value of one is valid by construction, so it is checked once,
//! where untrusted text is read (the journal, the pack indexes, the names of the files in
//! `blobs/`), and never again; and the numbers, each a type of its own so one cannot be passed
//! for another: the journal's turns and seqs and the journal epoch of the store, and the
//! FUSE core's node ids and open-handle numbers. A number's value is private: it becomes one
//! of these types only through its `new` (or by deserialising a stored one, or a turn by
//! parsing one from the command line) and a bare `u64` again only through its `get`, where it
//! enters and leaves. A turn is a [`Turn`] wherever it goes: the journal, the control files,
//! the CLI's arguments, the socket's requests and answers, the reports; it is a bare number in
//! all of their text (JSON, the journal, messages), as a `u64` was. Node ids and handles are
//! made only inside the crate (`new` is `pub(crate)`): where the kernel's numbers enter
//! (`fs/fuse/translate.rs`), in the node table (`fs/inode.rs`, from host inode numbers), as the control
//! nodes' fixed ids (`fs/control.rs`) and by the handle allocators (`fs/files.rs`,
//! `fs/ctlfs.rs`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// A blob id: the sha256 of a blob's raw bytes. Written (blob file names, pack index lines,
/// journal records) as 64 lower-case hex characters, and read back only from exactly that.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlobId([u8; 32]);

/// Text that is not a blob id (64 lower-case hex characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadBlobId(pub String);

impl fmt::Display for BadBlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blob id {:?} is not a sha256", self.0)
    }
}

impl std::error::Error for BadBlobId {}

impl BlobId {
    /// The id of `bytes`: their sha256.
    pub fn of(bytes: &[u8]) -> Self {
        Self::finish(Sha256::new_with_prefix(bytes))
    }

    /// The id of the bytes fed to `hasher`.
    pub fn finish(hasher: Sha256) -> Self {
        let mut id = [0u8; 32];
        id.copy_from_slice(&hasher.finalize());
        Self(id)
    }

    /// The id of every byte of the file open as `fd`, read from offset 0 to its end (the
    /// descriptor's own offset is left alone): what a blob of the file's content would be
    /// named, for the comparisons that decide whether a file needs writing or storing.
    pub fn of_file(fd: std::os::fd::BorrowedFd<'_>) -> crate::sys::SysResult<Self> {
        let mut hasher = Sha256::new();
        // Under the allocator's threshold for a mapping of its own: a rewind's decision hashes
        // every same-sized file it may leave, and a mapping per file would cost two syscalls.
        let mut buf = vec![0u8; 64 * 1024];
        let mut off = 0u64;
        loop {
            match crate::sys::read_full(fd, &mut buf, off)? {
                0 => return Ok(Self::finish(hasher)),
                n => {
                    hasher.update(&buf[..n]);
                    off += n as u64;
                }
            }
        }
    }

    /// [`Self::of_file`] for a file whose size `fstat` gave as `size`: one under 64 KiB (what
    /// a rewind's decision hashes by the thousand) is read by `sys::read_if_at_most`: one `pread` into a buffer one
    /// byte larger than it, whose shortfall is its end, instead of a zeroed 64 KiB buffer and a
    /// second `pread` that finds the end (a tenth of the decision's time over 10,000 small
    /// files, docs/BENCHMARKS.md). A file that changed size since falls back to reading it all.
    pub fn of_file_sized(
        fd: std::os::fd::BorrowedFd<'_>,
        size: u64,
    ) -> crate::sys::SysResult<Self> {
        if let Ok(len) = usize::try_from(size)
            && len < 64 * 1024
            && let Some(bytes) = crate::sys::read_if_at_most(fd, len)?
        {
            return Ok(Self::of(&bytes));
        }
        Self::of_file(fd)
    }

    /// The sha256 itself.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lower-case hex characters that name the blob on disk.
    pub fn to_hex(&self) -> String {
        crate::relpath::hex(&self.0)
    }

    /// The first 12 hex characters, as reports name a blob.
    pub fn short(&self) -> String {
        crate::relpath::hex(&self.0[..6])
    }
}

impl fmt::Display for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// The value of one lower-case hex digit.
fn digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

impl FromStr for BlobId {
    type Err = BadBlobId;

    /// Exactly 64 lower-case hex characters; anything else is refused.
    fn from_str(s: &str) -> Result<Self, BadBlobId> {
        let bad = || BadBlobId(s.to_string());
        let text = s.as_bytes();
        if text.len() != 64 {
            return Err(bad());
        }
        let mut id = [0u8; 32];
        for (out, pair) in id.iter_mut().zip(text.chunks_exact(2)) {
            *out = (digit(pair[0]).ok_or_else(bad)? << 4) | digit(pair[1]).ok_or_else(bad)?;
        }
        Ok(Self(id))
    }
}

impl TryFrom<&str> for BlobId {
    type Error = BadBlobId;

    fn try_from(s: &str) -> Result<Self, BadBlobId> {
        s.parse()
    }
}

/// On disk: the hex string, as a plain `String` was written.
impl Serialize for BlobId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for BlobId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Hex;
        impl serde::de::Visitor<'_> for Hex {
            type Value = BlobId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a blob id (64 lower-case hex characters)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BlobId, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(Hex)
    }
}

/// A number type: a bare `u64` in every message (`Display` and `Debug` write the number), a
/// type of its own in the code. Its number is private: it is made only by `new`, as visible as
/// the macro's caller says (node ids and handles: only inside the crate), and read back only
/// by `get` (or `u64::from`). `stored` ones are also a bare `u64` on disk
/// (`#[serde(transparent)]`).
macro_rules! number_id {
    ($(#[$doc:meta])* stored $vis:vis $name:ident) => {
        number_id! {
            $(#[$doc])*
            #[derive(Default, Serialize, Deserialize)]
            #[serde(transparent)]
            $vis $name
        }
    };
    ($(#[$doc:meta])* $vis:vis $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u64);

        impl $name {
            /// The one numbered `n`.
            $vis const fn new(n: u64) -> Self {
                Self(n)
            }

            /// Its number.
            pub const fn get(self) -> u64 {
                self.0
            }
        }

        impl From<$name> for u64 {
            fn from(n: $name) -> u64 {
                n.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

number_id! {
    /// A journal position: the `seq` of a line, strictly increasing through the journal (a
    /// prune renumbers them). Records name other records by it (`rewind_done`'s `begin`,
    /// `staged`'s `capture`, …), and a staged pre-image is the file `staged/<seq>`.
    stored pub Seq
}

number_id! {
    /// The numbering of the journal an open store has: 0 when opened, one more each time a
    /// prune rewrites the journal and renumbers every [`Seq`]. A staged pre-image handed to
    /// the stager names its capture by `(Epoch, Seq)`, so a result that comes back after a
    /// prune names nothing. Never written anywhere.
    pub(crate) Epoch
}

/// A turn, or a step within one: turn `N` is begun by `echo N > .ckpt/turn` (turn 0 is before
/// the first `turn` record), step `N.S` by `echo N.S > .ckpt/turn` while turn `N` (or an
/// earlier step of it) is current. A step is a turn switch in every way but its number: it
/// begins a capture epoch, and a rewind to it returns the folder to its start. They are
/// ordered as they begin (`5 < 5.1 < 5.2 < 6`), so every rule that says "turns from N on"
/// says it of steps too. Written as a bare number (`5`), as turns always were, and a step as
/// the string `"5.3"` (journal version 7; docs/FORMAT.md).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Turn {
    /// The turn's number.
    number: u64,
    /// The step within it (0: the turn's own start).
    step: u32,
}

impl Turn {
    /// Turn `n` (its own start, no step).
    pub const fn new(n: u64) -> Self {
        Self { number: n, step: 0 }
    }

    /// Step `step` of turn `n` (`step` 0 is the turn itself).
    pub const fn with_step(n: u64, step: u32) -> Self {
        Self { number: n, step }
    }

    /// The turn's number (a step's: the turn it is in).
    pub const fn get(self) -> u64 {
        self.number
    }

    /// The step within the turn (0: none).
    pub const fn step(self) -> u32 {
        self.step
    }

    /// Whether this is a step within a turn rather than a turn's own start.
    pub const fn is_step(self) -> bool {
        self.step != 0
    }

    /// The turn this is, or is a step of.
    pub const fn whole(self) -> Self {
        Self::new(self.number)
    }

    /// The turn numbered one more, if there is such a number.
    pub fn checked_next(self) -> Option<Self> {
        self.number.checked_add(1).map(Self::new)
    }

    /// The step after this one within its turn (`5` -> `5.1`, `5.3` -> `5.4`), if there is one.
    pub fn next_step(self) -> Option<Self> {
        self.step
            .checked_add(1)
            .map(|s| Self::with_step(self.number, s))
    }
}

impl From<Turn> for u64 {
    fn from(t: Turn) -> u64 {
        t.number
    }
}

impl fmt::Display for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.step == 0 {
            fmt::Display::fmt(&self.number, f)
        } else {
            f.pad(&format!("{}.{}", self.number, self.step))
        }
    }
}

impl fmt::Debug for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A turn that is not `N` or `N.S` (whole numbers, `S` at least 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTurn(String);

impl fmt::Display for BadTurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a turn (a whole number N, or N.S for step S of turn N)",
            self.0
        )
    }
}

impl std::error::Error for BadTurn {}

/// A turn as the command line, the control file and the journal name one: `N`, or `N.S` for a
/// step (`S` from 1; no sign, no spaces, no other dots).
impl FromStr for Turn {
    type Err = BadTurn;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadTurn(s.to_string());
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        let (number, step) = match s.split_once('.') {
            Some((n, st)) if digits(n) && digits(st) => (
                n.parse().map_err(|_| bad())?,
                st.parse().map_err(|_| bad())?,
            ),
            None if digits(s) => (s.parse().map_err(|_| bad())?, 0),
            _ => return Err(bad()),
        };
        if s.contains('.') && step == 0 {
            return Err(bad());
        }
        Ok(Self::with_step(number, step))
    }
}

/// A turn is the bare number it always was on disk; a step, which only version 7 lines hold,
/// the string `"N.S"` (a number with a fraction would read `5.10` as `5.1`).
impl Serialize for Turn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.step == 0 {
            s.serialize_u64(self.number)
        } else {
            s.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for Turn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TurnText;
        impl serde::de::Visitor<'_> for TurnText {
            type Value = Turn;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a turn (a whole number, or \"N.S\" for a step)")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Turn, E> {
                Ok(Turn::new(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Turn, E> {
                match v.parse::<Turn>() {
                    Ok(t) if t.is_step() => Ok(t),
                    // A whole turn is written as a number, never as a string.
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(TurnText)
    }
}

impl Seq {
    /// The position of the line after this one.
    pub fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

impl Epoch {
    /// The numbering after the journal is rewritten once more.
    pub fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

number_id! {
    /// A FUSE node id: the number the kernel names one inode of the mount by, for as long as it
    /// knows it (`fs/inode.rs`). The root is 1, the `.ckpt/` control nodes 2 to 5
    /// (`fs/control.rs`), a host inode its own inode number where that can serve; 0 is the
    /// kernel's "no such name" (a negative entry). Made from and turned back into fuser's
    /// `INodeNo` only in `fs/fuse/translate.rs`.
    ///
    /// A handle number is not a node id, and the core's methods say which one they take:
    ///
    /// ```
    /// use ckpt_mount::{fs::CkptFs, ids::{Fh, NodeId}};
    /// fn attrs(fs: &CkptFs, node: NodeId, fh: Fh) {
    ///     let _ = fs.getattr(node, Some(fh));
    /// }
    /// ```
    ///
    /// ```compile_fail,E0308
    /// use ckpt_mount::{fs::CkptFs, ids::{Fh, NodeId}};
    /// fn attrs(fs: &CkptFs, node: NodeId, fh: Fh) {
    ///     let _ = fs.getattr(fh, Some(node));
    /// }
    /// ```
    pub(crate) NodeId
}

number_id! {
    /// An open handle's number (`fh`): what `open` and `create` return and every call on an
    /// open file names it by (`fs/handles.rs`). Never reused while the mount lives. Made from
    /// and turned back into fuser's `FileHandle` only in `fs/fuse/translate.rs`.
    pub(crate) Fh
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_id_is_the_id_of_its_bytes_whatever_its_size_or_offset() {
        use std::io::{Seek, Write};
        for len in [0usize, 1, 64 * 1024, 64 * 1024 + 1, 300_000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut f = tempfile::tempfile().expect("tempfile");
            f.write_all(&bytes).expect("write");
            // The descriptor's offset is at the end: the id reads from 0 all the same.
            assert_eq!(f.stream_position().expect("position"), len as u64);
            let fd = std::os::fd::AsFd::as_fd(&f);
            let id = BlobId::of_file(fd).expect("hash");
            assert_eq!(id, BlobId::of(&bytes), "{len} bytes");
            // Sized as fstat said, or wrongly (the file grew or shrank since): the same id.
            for hint in [
                len as u64,
                0,
                (len as u64).saturating_sub(1),
                len as u64 + 1,
                70_000,
            ] {
                let sized = BlobId::of_file_sized(fd, hint).expect("hash");
                assert_eq!(sized, id, "{len} bytes read as {hint}");
            }
        }
    }

    #[test]
    fn blob_ids_are_lower_case_sha256_hex() {
        let text = "ab".repeat(32);
        let id: BlobId = text.parse().expect("valid");
        assert_eq!(id.to_string(), text);
        assert_eq!(format!("{id:?}"), text);
        assert_eq!(id.as_bytes(), &[0xab; 32]);
        assert_eq!(id.short(), "abababababab");
        let every_digit = "0123456789abcdef".repeat(4);
        let back = BlobId::try_from(every_digit.as_str()).expect("valid");
        assert_eq!(back.to_hex(), every_digit);
        for bad in [
            "AB".repeat(32),
            format!("{}A", "a".repeat(63)),
            "abc".to_string(),
            String::new(),
            "a".repeat(63),
            "a".repeat(65),
            format!("{}/x", "a".repeat(62)),
            format!("{}g", "a".repeat(63)),
            format!("{} ", "a".repeat(63)),
            format!("{}é", "a".repeat(62)),
        ] {
            assert_eq!(
                bad.parse::<BlobId>(),
                Err(BadBlobId(bad.clone())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_blob_id_is_the_sha256_of_the_bytes() {
        assert_eq!(
            BlobId::of(b"hello").to_string(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        let mut h = Sha256::new();
        h.update(b"hel");
        h.update(b"lo");
        assert_eq!(BlobId::finish(h), BlobId::of(b"hello"));
    }

    #[test]
    fn blob_ids_order_as_their_hex_does() {
        let mut ids: Vec<BlobId> = ["f0", "0f", "a1", "1a"]
            .iter()
            .map(|p| p.repeat(32).parse().expect("valid"))
            .collect();
        ids.sort();
        let hex: Vec<String> = ids.iter().map(BlobId::to_hex).collect();
        let mut sorted = hex.clone();
        sorted.sort();
        assert_eq!(hex, sorted);
    }

    #[test]
    fn serde_writes_the_same_json_as_a_string_did() {
        let text = BlobId::of(b"x").to_hex();
        let id: BlobId = text.parse().expect("valid");
        let json = serde_json::to_string(&id).expect("serialise");
        assert_eq!(json, serde_json::to_string(&text).expect("serialise"));
        assert_eq!(serde_json::from_str::<BlobId>(&json).expect("parse"), id);
        let value = serde_json::to_value(id).expect("to value");
        assert_eq!(
            serde_json::from_value::<BlobId>(value).expect("from value"),
            id
        );
        for bad in [r#""ABC""#, &format!("{:?}", "A".repeat(64)), "42", "null"] {
            assert!(serde_json::from_str::<BlobId>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn turns_and_seqs_are_bare_numbers_on_disk_and_in_messages() {
        assert_eq!(
            serde_json::to_string(&Turn::new(7)).expect("serialise"),
            "7"
        );
        assert_eq!(
            serde_json::to_string(&Seq::new(42)).expect("serialise"),
            "42"
        );
        assert_eq!(
            serde_json::from_str::<Seq>("42").expect("parse"),
            Seq::new(42)
        );
        assert!(serde_json::from_str::<Turn>("\"7\"").is_err());
        assert!(serde_json::from_str::<Turn>("-1").is_err());
        assert_eq!(
            format!("{} {:?} {:>3}", Turn::new(7), Seq::new(42), Turn::new(5)),
            "7 42   5"
        );
        assert_eq!(u64::from(Turn::new(9)), 9);
        assert!(Seq::new(2) > Seq::new(1));
    }

    #[test]
    fn node_ids_handles_and_epochs_print_as_bare_numbers() {
        assert_eq!(
            format!(
                "{} {:?} {}",
                NodeId::new(7),
                Fh::new(42),
                Epoch::new(0).next()
            ),
            "7 42 1"
        );
        assert_eq!(u64::from(NodeId::new(9)), 9);
        assert!(NodeId::new(2) < NodeId::new(16));
    }
}
