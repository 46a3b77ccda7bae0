//! The journal: an append-only file of JSON lines, one record per line, each with its format
//! version `"v"`: 1, or 2 for the lines only version 2 has (staged pre-images).
//!
//! Invariants: records are only ever appended, each with one `write(2)` on an `O_APPEND`
//! descriptor, so a killed daemon leaves at most one torn last line; a torn last line is cut
//! off when the journal is opened; any other unreadable line is corruption and is refused.

use crate::ids::Seq;
use serde::{Deserialize, Serialize};

mod record;

pub use crate::identity::Handle;
pub use crate::xattrs::Xattr;
pub use record::{
    AgentMark, ArchivedOp, Conversation, HandOff, LinkTarget, MergedTarget, OpBegin, OpCounts,
    OpKind, PreImage, Pruned, Record, Touch, Xattrs,
};

/// The newest journal format version: what this build reads (every version up to it) and
/// writes. Version 3 lines carry each pre-image's inode identity (file handle or birth time),
/// its extended attributes and, for symlinks, the inode; a line of version 1 or 2 says nothing
/// of extended attributes (read as "unknown": a rewind leaves them as they are) and identifies
/// inodes by number only (never trusted as proof that a file is the same; see SEMANTICS.md).
/// Version 4 adds who changed what (`touched` and `agent` records, `crate::store::actors`) and
/// the operation log (`crate::store::ops`): `op_begin`, `op_done`, `relabel`, `pruned`, and a
/// `rewind_done` that carries its counts. Version 5 names agents: an `agent` mark's name, the
/// agent a `touched` record's process descends from, and the agent whose hook began a `turn`
/// (several agents in one folder, each rewound on its own). Version 6 adds the `op_begin` of
/// `op restore` (`kind` `restore_op`): a build that reads only up to 5 would not know the
/// operation, so it refuses the store instead of misreading it. Version 7 adds steps within a
/// turn (`"turn": "5.3"`, begun at an agent's tool call): every line naming a step is version 7,
/// so a build that reads only up to 6 refuses the store rather than read a rewind to step 5.3
/// as one to turn 5.
pub const JOURNAL_VERSION: u32 = 7;

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
    let mut last_seq = Seq::new(0);
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
    use crate::ids::Turn;
    use crate::relpath::RelPath;

    fn turn(seq: u64, n: u64) -> Line {
        Line {
            v: 1,
            seq: Seq::new(seq),
            time: 0,
            rec: Record::Turn {
                turn: Turn::new(n),
                label: None,
                by: None,
                conversation: None,
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
            seq: Seq::new(7),
            time: 5,
            rec: Record::Capture {
                turn: Turn::new(2),
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
    fn a_turn_line_keeps_where_the_conversation_stood() {
        let rec = Record::Turn {
            turn: Turn::new(2),
            label: Some("make it blue".into()),
            by: Some("claude-code:abc".into()),
            conversation: Some(Conversation {
                session: Some("abc".into()),
                transcript: Some("/home/u/.claude/projects/p/abc.jsonl".into()),
                prompt: Some("make it blue".into()),
                ..Default::default()
            }),
        };
        let line = Line {
            v: rec.version(),
            seq: Seq::new(6),
            time: 9,
            rec,
        };
        let text = String::from_utf8(encode(&line)).expect("utf8");
        assert_eq!(
            text,
            "{\"v\":5,\"seq\":6,\"time\":9,\"op\":\"turn\",\"turn\":2,\"label\":\"make it blue\",\"by\":\"claude-code:abc\",\"conversation\":{\"session\":\"abc\",\"transcript\":\"/home/u/.claude/projects/p/abc.jsonl\",\"prompt\":\"make it blue\"}}\n"
        );
        assert_eq!(parse(text.as_bytes()).expect("parses").lines, vec![line]);
    }

    /// A field this build does not know is ignored, not refused: a version-5 build before
    /// `conversation` reads the lines of one that writes it (without it), as this build reads
    /// a field added later.
    #[test]
    fn a_turn_line_with_a_field_unknown_here_still_reads() {
        let text = "{\"v\":5,\"seq\":1,\"time\":0,\"op\":\"turn\",\"turn\":1,\"by\":\"codex\",\"later\":{\"x\":1}}\n";
        let lines = parse(text.as_bytes()).expect("parses").lines;
        assert_eq!(
            lines[0].rec,
            Record::Turn {
                turn: Turn::new(1),
                label: None,
                by: Some("codex".into()),
                conversation: None,
            }
        );
    }

    #[test]
    fn an_op_restore_line_is_version_6_as_format_md_says() {
        let rec = Record::OpBegin(OpBegin {
            kind: OpKind::RestoreOp,
            to: None,
            paths: Vec::new(),
            target: Some(4),
            merged: Vec::new(),
        });
        let line = Line {
            v: rec.version(),
            seq: Seq::new(9),
            time: 5,
            rec,
        };
        let text = String::from_utf8(encode(&line)).expect("utf8");
        assert_eq!(
            text,
            "{\"v\":6,\"seq\":9,\"time\":5,\"op\":\"op_begin\",\"kind\":\"restore_op\",\"target\":4}\n"
        );
        assert_eq!(parse(text.as_bytes()).expect("parses").lines, vec![line]);
        // An undo keeps the version it always had: older builds still read it.
        let undo = Record::OpBegin(OpBegin {
            kind: OpKind::Undo,
            to: None,
            paths: Vec::new(),
            target: Some(4),
            merged: Vec::new(),
        });
        assert_eq!(undo.version(), 4);
    }

    #[test]
    fn a_line_naming_a_step_is_version_7_and_a_turn_stays_a_number() {
        let step = Turn::with_step(5, 3);
        let rec = Record::Turn {
            turn: step,
            label: Some("Bash: npm install".into()),
            by: None,
            conversation: None,
        };
        let line = Line {
            v: rec.version(),
            seq: Seq::new(9),
            time: 5,
            rec,
        };
        let text = String::from_utf8(encode(&line)).expect("utf8");
        assert_eq!(
            text,
            "{\"v\":7,\"seq\":9,\"time\":5,\"op\":\"turn\",\"turn\":\"5.3\",\"label\":\"Bash: npm install\"}\n"
        );
        assert_eq!(parse(text.as_bytes()).expect("parses").lines, vec![line]);
        let rewind = Record::RewindBegin {
            to: step,
            from: Turn::with_step(5, 4),
        };
        assert_eq!(rewind.version(), 7);
        let whole = Record::RewindBegin {
            to: Turn::new(5),
            from: Turn::new(6),
        };
        assert_eq!(whole.version(), 1);
        // A whole turn written as a string is no turn: the line does not fit.
        let odd = "{\"v\":7,\"seq\":9,\"time\":5,\"op\":\"turn\",\"turn\":\"5\"}\n";
        assert!(parse(odd.as_bytes()).map_or(true, |j| j.lines.is_empty()));
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
