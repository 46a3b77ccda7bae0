//! The journal: an append-only file of JSON lines, one record per line, each with its format
//! version `"v"`: 1, or 2 for the lines only version 2 has (staged pre-images).
//!
//! Invariants: records are only ever appended, each with one `write(2)` on an `O_APPEND`
//! descriptor, so a killed daemon leaves at most one torn last line; a torn last line is cut
//! off when the journal is opened; any other unreadable line is corruption and is refused.

use crate::ids::{BlobId, Seq, Turn};
use crate::relpath::RelPath;
use serde::{Deserialize, Serialize};

/// The newest journal format version: what this build reads (every version up to it) and
/// writes. Version 3 lines carry each pre-image's inode identity (file handle or birth time),
/// its extended attributes and, for symlinks, the inode; a line of version 1 or 2 says nothing
/// of extended attributes (read as "unknown": a rewind leaves them as they are) and identifies
/// inodes by number only (never trusted as proof that a file is the same; see SEMANTICS.md).
/// Version 4 adds who changed what (`touched` and `agent` records, `crate::store::actors`) and
/// the operation log (`crate::store::ops`): `op_begin`, `op_done`, `relabel`, `pruned`, and a
/// `rewind_done` that carries its counts.
pub const JOURNAL_VERSION: u32 = 4;

pub use crate::identity::Handle;
pub use crate::xattrs::Xattr;

/// The extended attributes of a pre-image, sorted by name. `None` on lines older than journal
/// version 3, which did not record them: a rewind then leaves a path's attributes as it finds
/// them.
pub type Xattrs = Option<Vec<Xattr>>;

/// An empty list is not written: on a version 3 line a missing list means "none".
fn no_xattrs(x: &Xattrs) -> bool {
    x.as_ref().is_none_or(Vec::is_empty)
}

/// A symlink target: any bytes, stored like a path (string or `{"hex": ...}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkTarget(pub Vec<u8>);

impl Serialize for LinkTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(t) => s.serialize_str(t),
            Err(_) => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("hex", &crate::relpath::hex(&self.0))?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for LinkTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Hex { hex: String },
        }
        match Raw::deserialize(d)? {
            Raw::Text(t) => Ok(Self(t.into_bytes())),
            Raw::Hex { hex } => crate::relpath::unhex(&hex)
                .map(Self)
                .ok_or_else(|| serde::de::Error::custom("bad hex target")),
        }
    }
}

/// What a path was when a turn first touched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PreImage {
    /// Nothing existed at the path.
    Absent,
    /// A regular file whose bytes are the blob `blob`.
    File {
        /// sha256 of the content (lower-case hex on the line; any other text makes the line
        /// corrupt).
        blob: BlobId,
        /// Size in bytes.
        size: u64,
        /// Full `st_mode` permission bits (`0o7777`).
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Host inode number, to restore in place and keep hard links shared.
        ino: u64,
        /// Link count when captured.
        nlink: u64,
        /// The inode's file handle (journal version 3), which with `ino` identifies it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fh: Option<Handle>,
        /// Birth time in nanoseconds, recorded where the filesystem gives no file handle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        btime: Option<i64>,
        /// Extended attributes (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A directory.
    Dir {
        /// Permission bits.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Extended attributes, default ACLs included (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A symbolic link.
    Symlink {
        /// The link's target, never followed.
        target: LinkTarget,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Host inode number (journal version 3): symlinks can be hard-linked too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ino: Option<u64>,
        /// Link count when captured (journal version 3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nlink: Option<u64>,
        /// The inode's file handle (journal version 3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fh: Option<Handle>,
        /// Birth time in nanoseconds, where the filesystem gives no file handle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        btime: Option<i64>,
        /// Extended attributes (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A named pipe.
    Fifo {
        /// Permission bits.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Extended attributes (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A regular file whose inode was moved into the store's `staged/` folder (named by the
    /// seq of the capture record) instead of being read and copied, because the mutation was
    /// its removal; a later `staged` record replaces this with `File` (or `Skipped`) once its
    /// bytes are stored. Journal version 2.
    Staged {
        /// Size in bytes.
        size: u64,
        /// Full `st_mode` permission bits (`0o7777`).
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Host inode number.
        ino: u64,
        /// Link count when captured (always 1: only a file's last name is staged).
        nlink: u64,
        /// The inode's file handle (journal version 3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fh: Option<Handle>,
        /// Birth time in nanoseconds, where the filesystem gives no file handle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        btime: Option<i64>,
    },
    /// Something that was not stored; a rewind reports it instead of restoring it.
    Skipped {
        /// What the path was (`file`, `socket`, `device`).
        was: String,
        /// Size in bytes, when a file.
        size: u64,
        /// Why it was not stored.
        reason: String,
    },
}

impl PreImage {
    /// What a `Staged` pre-image becomes once its bytes are the blob `blob` of `size` bytes,
    /// with the extended attributes read from the staged file (`None` for any other kind).
    pub fn stored_as(&self, blob: BlobId, size: u64, xattrs: Xattrs) -> Option<Self> {
        match self {
            Self::Staged {
                mode,
                uid,
                gid,
                ino,
                fh,
                btime,
                ..
            } => Some(Self::File {
                blob,
                size,
                mode: *mode,
                uid: *uid,
                gid: *gid,
                ino: *ino,
                nlink: 1,
                fh: fh.clone(),
                btime: *btime,
                xattrs,
            }),
            _ => None,
        }
    }

    /// Whether only a version 3 line can hold this pre-image.
    fn needs_v3(&self) -> bool {
        match self {
            Self::File {
                fh, btime, xattrs, ..
            } => fh.is_some() || btime.is_some() || xattrs.is_some(),
            Self::Staged { fh, btime, .. } => fh.is_some() || btime.is_some(),
            Self::Symlink {
                ino,
                nlink,
                fh,
                btime,
                xattrs,
                ..
            } => {
                ino.is_some()
                    || nlink.is_some()
                    || fh.is_some()
                    || btime.is_some()
                    || xattrs.is_some()
            }
            Self::Dir { xattrs, .. } | Self::Fifo { xattrs, .. } => xattrs.is_some(),
            Self::Absent | Self::Skipped { .. } => false,
        }
    }

    /// The extended attributes recorded, when the line said.
    pub fn xattrs(&self) -> Option<&[Xattr]> {
        match self {
            Self::File { xattrs, .. }
            | Self::Dir { xattrs, .. }
            | Self::Symlink { xattrs, .. }
            | Self::Fifo { xattrs, .. } => xattrs.as_deref(),
            _ => None,
        }
    }

    /// The recorded identity of the inode: for files and symlinks (and staged files).
    pub fn file_id(&self) -> Option<crate::identity::FileId> {
        match self {
            Self::File { ino, fh, btime, .. } | Self::Staged { ino, fh, btime, .. } => {
                Some(crate::identity::FileId {
                    ino: *ino,
                    fh: fh.clone(),
                    btime: *btime,
                })
            }
            Self::Symlink {
                ino: Some(ino),
                fh,
                btime,
                ..
            } => Some(crate::identity::FileId {
                ino: *ino,
                fh: fh.clone(),
                btime: *btime,
            }),
            _ => None,
        }
    }

    /// Replaces the recorded identity (files, staged files and symlinks with one).
    pub fn set_file_id(&mut self, id: crate::identity::FileId) {
        match self {
            Self::File { ino, fh, btime, .. } | Self::Staged { ino, fh, btime, .. } => {
                (*ino, *fh, *btime) = (id.ino, id.fh, id.btime);
            }
            Self::Symlink {
                ino: ino @ Some(_),
                fh,
                btime,
                ..
            } => {
                (*ino, *fh, *btime) = (Some(id.ino), id.fh, id.btime);
            }
            _ => {}
        }
    }

    /// The link count recorded (files and, from version 3, symlinks).
    pub fn nlink(&self) -> u64 {
        match self {
            Self::File { nlink, .. } | Self::Staged { nlink, .. } => *nlink,
            Self::Symlink { nlink, .. } => nlink.unwrap_or(1),
            _ => 1,
        }
    }

    /// Short kind name for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::File { .. } => "file",
            Self::Dir { .. } => "dir",
            Self::Symlink { .. } => "symlink",
            Self::Fifo { .. } => "fifo",
            Self::Staged { .. } => "staged",
            Self::Skipped { .. } => "skipped",
        }
    }
}

/// One journal line's payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Record {
    /// Turn `turn` begins.
    Turn {
        /// The new turn number.
        turn: Turn,
        /// Optional label given with `echo "N label" > .ckpt/turn`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// The pre-image of `path` for `turn`.
    Capture {
        /// The turn this pre-image belongs to.
        turn: Turn,
        /// The path, relative to the folder.
        path: RelPath,
        /// What the path was.
        pre: PreImage,
        /// When set, this capture saves what rewind `undo_of` (a `rewind_begin` seq) overwrote.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undo_of: Option<Seq>,
        /// Process that caused the capture.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        /// Its command name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comm: Option<String>,
    },
    /// A rewind to the start of `to` started, from current turn `from`.
    RewindBegin {
        /// Target turn.
        to: Turn,
        /// Turn current before the rewind.
        from: Turn,
    },
    /// The rewind begun at seq `begin` finished; turns >= `to` leave the index.
    RewindDone {
        /// Seq of the matching `rewind_begin`.
        begin: Seq,
        /// What it changed (journal version 4).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counts: Option<crate::store::ops::OpCounts>,
    },
    /// The rewind begun at seq `rewind` was undone: its turns come back.
    UndoDone {
        /// Seq of the `rewind_begin` that was undone.
        rewind: Seq,
    },
    /// Files a rewind or undo recreated from their records: records naming each `was`
    /// identity now mean its `now` file (journal version 3).
    Renewed {
        /// The identities, old and new.
        ids: Vec<crate::identity::Renewal>,
    },
    /// The staged pre-image of capture `capture` is stored: `pre` (a `file`, or `skipped` when
    /// its bytes could not be read) replaces it. Journal version 2.
    Staged {
        /// Seq of the capture whose pre-image was staged.
        capture: Seq,
        /// What it resolved to.
        pre: PreImage,
    },
    /// An actor changed the path of a capture in its turn (journal version 4).
    Touched(crate::store::actors::Touch),
    /// A process and its descendants are the agent from here on (journal version 4).
    Agent(crate::store::actors::AgentMark),
    /// An operation of the operation log began: a partial rewind, an undo or a redo (journal
    /// version 4; see `crate::store::ops`).
    OpBegin(crate::store::ops::OpBegin),
    /// The operation begun at seq `begin` finished (journal version 4).
    OpDone {
        /// Seq of its `op_begin`.
        begin: Seq,
        /// What it changed in the folder.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counts: Option<crate::store::ops::OpCounts>,
    },
    /// Turn `turn` is given the label `label` (none: unlabelled), an operation of its own
    /// (journal version 4).
    Relabel {
        /// The turn.
        turn: Turn,
        /// Its new label.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// A prune rewrote the journal (journal version 4): what it made unrecoverable.
    Pruned(crate::store::ops::Pruned),
}

impl Record {
    /// The oldest journal version that can hold this record: a record is written with the
    /// version its content needs, so a pre-image read from an old line (attributes unknown)
    /// is written back by a prune as an old line and stays "unknown".
    pub fn version(&self) -> u32 {
        let pre = match self {
            Self::Capture { pre, .. } | Self::Staged { pre, .. } => pre,
            Self::Renewed { .. } => return 3,
            Self::Touched(_) | Self::Agent(_) => return 4,
            Self::OpBegin(..) | Self::OpDone { .. } | Self::Relabel { .. } | Self::Pruned(..) => {
                return 4;
            }
            Self::RewindDone {
                counts: Some(..), ..
            } => return 4,
            _ => return 1,
        };
        if pre.needs_v3() {
            3
        } else if matches!(self, Self::Staged { .. }) || matches!(pre, PreImage::Staged { .. }) {
            2
        } else {
            1
        }
    }

    /// After reading a line of version `v`: from version 3 on, a pre-image whose list of
    /// extended attributes is missing has none (the list is only written when not empty).
    fn read_as_version(&mut self, v: u32) {
        if v < 3 {
            return;
        }
        if let Self::Capture { pre, .. } | Self::Staged { pre, .. } = self
            && let PreImage::File { xattrs, .. }
            | PreImage::Dir { xattrs, .. }
            | PreImage::Symlink { xattrs, .. }
            | PreImage::Fifo { xattrs, .. } = pre
            && xattrs.is_none()
        {
            *xattrs = Some(Vec::new());
        }
    }
}

/// A record with its envelope, as one line of the journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Format version; anything newer than [`JOURNAL_VERSION`] is refused.
    pub v: u32,
    /// Position in the journal, strictly increasing.
    pub seq: Seq,
    /// Unix time in seconds.
    pub time: u64,
    /// The payload.
    #[serde(flatten)]
    pub rec: Record,
}

/// Why the journal could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    /// Line `line` (1-based) is not a valid record.
    Corrupt {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// A record carries a version this build does not know.
    Version {
        /// 1-based line number.
        line: usize,
        /// The version found.
        found: u32,
    },
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Corrupt { line, reason } => write!(f, "journal line {line} is corrupt: {reason}"),
            Self::Version { line, found } => write!(
                f,
                "journal line {line} has format version {found}; this ckpt-mount reads versions 1 to {JOURNAL_VERSION}"
            ),
        }
    }
}

/// The parsed journal: its lines, and how many bytes of a torn tail follow them.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Every complete, valid line.
    pub lines: Vec<Line>,
    /// Byte length of the valid prefix; anything after it is a torn last line.
    pub valid_len: usize,
}

/// Parses journal bytes. A last line without its newline, or a last line that is not JSON, is
/// a torn tail (reported through `valid_len`); an unreadable line before it, or any JSON line
/// that is not a valid record, is corruption.
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    let mut out = Parsed::default();
    let mut pos = 0;
    let mut line_no = 0;
    let mut last_seq = Seq(0);
    while pos < bytes.len() {
        line_no += 1;
        let Some(nl) = bytes[pos..].iter().position(|b| *b == b'\n') else {
            break; // torn tail: no newline
        };
        let text = &bytes[pos..pos + nl];
        let is_last = pos + nl + 1 >= bytes.len();
        match parse_line(text, line_no) {
            Ok(line) => {
                if line.seq <= last_seq {
                    return Err(ParseError::Corrupt {
                        line: line_no,
                        reason: "seq does not increase".into(),
                    });
                }
                last_seq = line.seq;
                out.lines.push(line);
            }
            Err(e @ ParseError::Version { .. }) => return Err(e),
            // A torn append is never valid JSON; a whole JSON line that is not a valid record
            // (an invalid path, a missing field) is corruption even when it is the last one.
            Err(_) if is_last && serde_json::from_slice::<serde_json::Value>(text).is_err() => {
                break;
            }
            Err(e) => return Err(e),
        }
        pos += nl + 1;
        out.valid_len = pos;
    }
    Ok(out)
}

fn parse_line(text: &[u8], line: usize) -> Result<Line, ParseError> {
    let value: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| ParseError::Corrupt {
            line,
            reason: e.to_string(),
        })?;
    let v = value
        .get("v")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if v == 0 || v > u64::from(JOURNAL_VERSION) {
        return Err(ParseError::Version {
            line,
            found: u32::try_from(v).unwrap_or(u32::MAX),
        });
    }
    let mut parsed: Line = serde_json::from_value(value).map_err(|e| ParseError::Corrupt {
        line,
        reason: e.to_string(),
    })?;
    parsed.rec.read_as_version(parsed.v);
    Ok(parsed)
}

/// Serialises one line, newline included.
pub fn encode(line: &Line) -> Vec<u8> {
    // Serialising these plain structs cannot fail.
    let mut v = serde_json::to_vec(line).unwrap_or_default();
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(seq: u64, n: u64) -> Line {
        Line {
            v: 1,
            seq: Seq(seq),
            time: 0,
            rec: Record::Turn {
                turn: Turn(n),
                label: None,
            },
        }
    }

    #[test]
    fn torn_last_line_is_cut_off() {
        let mut bytes = encode(&turn(1, 1));
        bytes.extend(encode(&turn(2, 2)));
        let good = bytes.len();
        bytes.extend_from_slice(br#"{"v":1,"seq":3,"ti"#);
        let p = parse(&bytes).expect("parses");
        assert_eq!(p.lines.len(), 2);
        assert_eq!(p.valid_len, good);
    }

    #[test]
    fn garbage_in_the_middle_is_corruption() {
        let mut bytes = encode(&turn(1, 1));
        bytes.extend_from_slice(b"not json\n");
        bytes.extend(encode(&turn(3, 2)));
        assert!(matches!(
            parse(&bytes),
            Err(ParseError::Corrupt { line: 2, .. })
        ));
    }

    #[test]
    fn unknown_version_is_refused() {
        let bytes = br#"{"v":9,"seq":1,"time":0,"op":"turn","turn":1}
"#;
        assert!(matches!(
            parse(bytes),
            Err(ParseError::Version { found: 9, .. })
        ));
    }

    #[test]
    fn capture_line_format_is_stable() {
        let line = Line {
            v: 1,
            seq: Seq(7),
            time: 5,
            rec: Record::Capture {
                turn: Turn(2),
                path: RelPath::new(b"a/b.txt").expect("valid"),
                pre: PreImage::Absent,
                undo_of: None,
                pid: Some(42),
                comm: Some("sed".into()),
            },
        };
        let text = String::from_utf8(encode(&line)).expect("utf8");
        assert_eq!(
            text,
            "{\"v\":1,\"seq\":7,\"time\":5,\"op\":\"capture\",\"turn\":2,\"path\":\"a/b.txt\",\"pre\":{\"kind\":\"absent\"},\"pid\":42,\"comm\":\"sed\"}\n"
        );
        assert_eq!(parse(text.as_bytes()).expect("parses").lines, vec![line]);
    }

    #[test]
    fn a_whole_last_line_that_is_not_a_record_is_corruption_not_a_torn_tail() {
        let mut bytes = encode(&turn(1, 1));
        bytes.extend_from_slice(b"{\"v\":1,\"seq\":2,\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"/etc/passwd\",\"pre\":{\"kind\":\"absent\"}}\n");
        assert!(matches!(
            parse(&bytes),
            Err(ParseError::Corrupt { line: 2, .. })
        ));
        let mut bytes = encode(&turn(1, 1));
        let good = bytes.len();
        bytes.extend_from_slice(b"\0\0\0{\"v\":1\n");
        assert_eq!(parse(&bytes).expect("a torn tail").valid_len, good);
    }

    /// A capture line of a file pre-image whose blob is `blob`.
    fn file_line(seq: u64, blob: &str) -> String {
        format!(
            "{{\"v\":1,\"seq\":{seq},\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"g\",\"pre\":{{\"kind\":\"file\",\"blob\":\"{blob}\",\"size\":3,\"mode\":420,\"uid\":0,\"gid\":0,\"ino\":2,\"nlink\":1}}}}\n"
        )
    }

    #[test]
    fn a_file_line_reads_and_writes_its_blob_id_as_hex() {
        let text = file_line(1, &"0a".repeat(32));
        let parsed = parse(text.as_bytes()).expect("parses");
        let [line] = parsed.lines.as_slice() else {
            panic!("one line: {:?}", parsed.lines);
        };
        let Record::Capture {
            pre: PreImage::File { blob, .. },
            ..
        } = &line.rec
        else {
            panic!("a file capture: {line:?}");
        };
        assert_eq!(blob.as_bytes(), &[0x0a; 32]);
        assert_eq!(String::from_utf8(encode(line)).expect("utf8"), text);
    }

    #[test]
    fn a_line_naming_a_blob_by_anything_but_a_sha256_is_corruption() {
        for bad in [
            "AB".repeat(32),
            "abc".to_string(),
            format!("{}/x", "a".repeat(62)),
            "a".repeat(65),
        ] {
            let mut bytes = encode(&turn(1, 1));
            bytes.extend_from_slice(file_line(2, &bad).as_bytes());
            let err = parse(&bytes).expect_err(&bad);
            assert!(
                matches!(&err, ParseError::Corrupt { line: 2, reason } if reason.contains("is not a sha256")),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn journal_paths_are_revalidated() {
        let bytes = b"{\"v\":1,\"seq\":1,\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"../etc/passwd\",\"pre\":{\"kind\":\"absent\"}}\n{\"v\":1,\"seq\":2,\"time\":0,\"op\":\"turn\",\"turn\":2}\n";
        assert!(matches!(
            parse(bytes),
            Err(ParseError::Corrupt { line: 1, .. })
        ));
    }
}
