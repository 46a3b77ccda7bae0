//! `fsck`: re-hash every blob, check every journal record, report orphans and leftovers.
//!
//! Findings are collected, never fatal: a damaged store is reported whole, line by line. The
//! check only reads; it needs no lock, so it also runs beside a live daemon.

use super::blob::BlobStore;
use super::journal::{self, Line, PreImage, Record};
use crate::ids::{BlobId, Seq};
use crate::relpath::RelPath;

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::os::fd::BorrowedFd;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Harmless or repaired on open (torn tail, orphan blob, temp file).
    Warn,
    /// History is damaged: some rewind would refuse or lose data.
    Error,
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// Short kind, e.g. `blob-missing` (`layout` and `version` stop the check: see [`check`]).
    pub kind: Cow<'static, str>,
    /// What exactly.
    pub detail: String,
}

fn finding(severity: Severity, kind: &'static str, detail: String) -> Finding {
    Finding {
        severity,
        kind: Cow::Borrowed(kind),
        detail,
    }
}

/// The result of a check.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FsckReport {
    /// Journal lines read.
    pub records: usize,
    /// Blobs present.
    pub blobs: usize,
    /// Problems found.
    pub findings: Vec<Finding>,
}

impl FsckReport {
    /// Whether nothing at error level was found.
    pub fn clean(&self) -> bool {
        !self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Checks the store behind `store_dir` (the `.ckpt` directory of a folder). A store that no
/// command opens as it is (`super::layout`: a symlink, blobs without a journal, no `VERSION`)
/// is one `layout` finding and nothing more: the CLI refuses it in one line, as every other
/// command does.
pub fn check(store_dir: BorrowedFd<'_>) -> FsckReport {
    let mut report = FsckReport::default();
    let mut add = |f: Finding| report.findings.push(f);
    match super::layout::check(store_dir) {
        // Nothing recorded yet (a store just set aside by a start-over, say): nothing to check.
        Ok(super::layout::Contents::New) => return report,
        Ok(super::layout::Contents::History) => {}
        Err(e) => {
            add(finding(Severity::Error, "layout", e.to_string()));
            return report;
        }
    }
    if !check_version(store_dir, &mut add) {
        return report;
    }
    stray_entries(store_dir, &mut add);
    let bytes = match read_file(store_dir, c"journal.jsonl") {
        Ok(b) => b,
        Err(e) => {
            add(finding(
                Severity::Error,
                "journal",
                format!("journal.jsonl unreadable: {e}"),
            ));
            Vec::new()
        }
    };
    let torn_only = journal::parse(&bytes).map_or(Ok(()), |p| {
        super::layout::check_torn_only(store_dir, &p, bytes.len())
    });
    if let Err(e) = torn_only {
        add(finding(Severity::Error, "layout", e.to_string()));
        return report;
    }
    let lines = check_lines(&bytes, &mut add);
    for (seq, why) in super::actors::check_records(&lines) {
        add(finding(
            Severity::Error,
            "journal-actor",
            format!("seq {seq}: {why}"),
        ));
    }
    let blobs = match BlobStore::open_readonly(store_dir) {
        Ok(b) => b,
        Err(e) => {
            add(finding(
                Severity::Error,
                "blobs",
                format!("blobs/ unreadable: {e}"),
            ));
            report.records = lines.len();
            return report;
        }
    };
    let present: BTreeMap<BlobId, u64> = blobs.list().unwrap_or_default().into_iter().collect();
    let (referenced, staged) = references(&lines);
    check_unstored_stages(store_dir, &staged, &mut add);
    check_referenced_blobs(&blobs, &present, &referenced, &mut add);
    for id in present.keys().filter(|id| !referenced.contains_key(*id)) {
        add(finding(
            Severity::Warn,
            "blob-orphan",
            format!("blob {} is referenced by no record", id.short()),
        ));
    }
    report.records = lines.len();
    report.blobs = present.len();
    report
}

/// Whether the store's `VERSION` is one this build reads (the check goes on); a store of
/// another format is not read any further, as its records and blobs may mean something else.
fn check_version(store_dir: BorrowedFd<'_>, add: &mut dyn FnMut(Finding)) -> bool {
    match read_file(store_dir, c"VERSION") {
        // Format 1 has the same files; the next open migrates it.
        Ok(v)
            if v == super::version::STORE_VERSION.as_bytes()
                || v == super::version::STORE_VERSION_1.as_bytes() =>
        {
            true
        }
        Ok(v) => {
            add(finding(
                Severity::Error,
                "version",
                format!(
                    "VERSION is {:?}, expected {:?}",
                    String::from_utf8_lossy(&v).trim(),
                    super::version::STORE_VERSION.trim()
                ),
            ));
            false
        }
        Err(e) => {
            add(finding(
                Severity::Error,
                "version",
                format!("VERSION unreadable: {e}"),
            ));
            true
        }
    }
}

/// Blob id → (size, first path) of every blob a record refers to, and the staged pre-images
/// no later record says were stored (capture seq → (path, pre-image)).
type Referenced = BTreeMap<BlobId, (u64, String)>;
type Unstored = BTreeMap<Seq, (RelPath, PreImage)>;

/// Every blob a record of `lines` names: a prune that keeps the journal as it is removes only
/// the others (what [`check`] calls orphans), so no record is left naming a missing blob.
pub(super) fn named_blobs(lines: &[Line]) -> HashSet<BlobId> {
    references(lines).0.into_keys().collect()
}

/// What the journal's lines refer to: [`Referenced`] blobs and [`Unstored`] stages.
fn references(lines: &[Line]) -> (Referenced, Unstored) {
    let mut referenced = Referenced::new();
    let mut staged = Unstored::new();
    for line in lines {
        match &line.rec {
            Record::Capture {
                pre: PreImage::File { blob, size, .. },
                path,
                ..
            } => {
                referenced.entry(*blob).or_insert((*size, path.to_string()));
            }
            Record::Capture {
                pre: pre @ PreImage::Staged { .. },
                path,
                ..
            } => {
                staged.insert(line.seq, (path.clone(), pre.clone()));
            }
            Record::Staged { capture, pre } => {
                if let (Some((path, _)), PreImage::File { blob, size, .. }) =
                    (staged.remove(capture), pre)
                {
                    referenced.entry(*blob).or_insert((*size, path.to_string()));
                }
            }
            Record::HandOff(super::journal::HandOff {
                pre: PreImage::File { blob, size, .. },
                capture,
                ..
            }) => {
                let at = format!("a hand-off of capture {capture}");
                referenced.entry(*blob).or_insert((*size, at));
            }
            Record::OpBegin(op) => {
                for m in &op.merged {
                    if let PreImage::File { blob, size, .. } = &m.pre {
                        referenced
                            .entry(*blob)
                            .or_insert((*size, m.path.to_string()));
                    }
                }
            }
            _ => {}
        }
    }
    (referenced, staged)
}

/// Staged pre-images not stored yet: their bytes must still be in `staged/`, or (the daemon
/// stopped between the record and the move) still at their path.
fn check_unstored_stages(
    store_dir: BorrowedFd<'_>,
    staged: &Unstored,
    add: &mut dyn FnMut(Finding),
) {
    for (seq, (path, pre)) in staged {
        let name = super::Store::staged_name(*seq);
        let there = crate::sys::openat(
            store_dir,
            c"staged",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .and_then(|d| crate::sys::lstatat(std::os::fd::AsFd::as_fd(&d), &name))
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
        if there {
            continue;
        }
        if still_at_its_path(store_dir, path, pre) {
            // The daemon stopped between the record and the move: the next open of the store
            // stores it from the folder (see `Store::recover_unmoved`).
            add(finding(
                Severity::Warn,
                "staged-unmoved",
                format!(
                    "{path}: the daemon stopped before moving it into the store; it is still at its path and is stored when the store next opens"
                ),
            ));
        } else {
            add(finding(
                Severity::Error,
                "staged-missing",
                format!("{path}: its staged pre-image staged/{seq} is missing"),
            ));
        }
    }
}

/// Every referenced blob present, of its recorded size (when stored raw) and matching its hash.
/// (A record naming a blob by something else than a sha256 did not parse: see
/// [`bad_blob_id`].)
fn check_referenced_blobs(
    blobs: &BlobStore,
    present: &BTreeMap<BlobId, u64>,
    referenced: &Referenced,
    add: &mut dyn FnMut(Finding),
) {
    for (id, (size, path)) in referenced {
        let short = id.short();
        match present.get(id) {
            None => add(finding(
                Severity::Error,
                "blob-missing",
                format!("{path}: blob {short} is missing"),
            )),
            Some(actual) if actual != size && blobs.stored_form(id) == Some(false) => add(finding(
                Severity::Error,
                "blob-size",
                format!("{path}: blob {short} has {actual} bytes, the journal says {size}"),
            )),
            Some(_) => match blobs.verify(id) {
                Ok(true) => {}
                Ok(false) => add(finding(
                    Severity::Error,
                    "blob-hash",
                    format!("{path}: blob {short} does not match its hash"),
                )),
                Err(e) => add(finding(
                    Severity::Error,
                    "blob-read",
                    format!("{path}: blob {short} unreadable: {e}"),
                )),
            },
        }
    }
}

/// Entries of the store directory that are not the store's own: most often a control file
/// written from a shell standing in the folder under the mount (`echo N > .ckpt/turn`), which
/// wrote into the real store while nothing was captured.
fn stray_entries(store_dir: BorrowedFd<'_>, add: &mut dyn FnMut(Finding)) {
    use std::os::fd::AsFd;
    const KNOWN: [&str; 9] = [
        super::start_over::ATTIC,
        "VERSION",
        "journal.jsonl",
        "blobs",
        "staged",
        "lock",
        "daemon.log",
        ".gitignore",
        "journal.jsonl.new",
    ];
    let Ok(list) = crate::sys::reopen(store_dir, libc::O_RDONLY | libc::O_DIRECTORY) else {
        return;
    };
    for e in crate::sys::read_dir_all(list.as_fd(), false).unwrap_or_default() {
        let name = String::from_utf8_lossy(&e.name).into_owned();
        let guard = super::CONTROL_GUARDS.contains(&name.as_str());
        if KNOWN.contains(&name.as_str())
            || name.starts_with(".tmp-")
            || (guard && e.kind == libc::DT_DIR)
        {
            continue;
        }
        let detail = if guard {
            format!(
                "{name}: a file written into the store, most likely by `echo … > .ckpt/{name}` from a shell standing in the folder under the mount (nothing it did there was captured); remove it, and `cd \"$PWD\"` in that shell"
            )
        } else {
            format!(
                "{}: not part of the store",
                crate::quote::quote_path(&e.name)
            )
        };
        add(finding(Severity::Warn, "stray", detail));
    }
}

/// Whether the file a pending staged capture names is still at its path, proven the same
/// inode (the folder is the store directory's parent; nothing is followed on the way).
fn still_at_its_path(store_dir: BorrowedFd<'_>, path: &RelPath, pre: &PreImage) -> bool {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    crate::sys::openat(store_dir, c"..", flags, 0)
        .is_ok_and(|root| super::open_unmoved(std::os::fd::AsFd::as_fd(&root), path, pre).is_ok())
}

/// Parses line by line, reporting each bad line instead of stopping at the first.
fn check_lines(bytes: &[u8], add: &mut dyn FnMut(Finding)) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut last_seq = Seq::new(0);
    let mut begun: HashSet<Seq> = HashSet::new();
    let text_lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    for (i, raw) in text_lines.iter().enumerate() {
        let n = i + 1;
        if !raw.ends_with(b"\n") {
            add(finding(
                Severity::Warn,
                "journal-torn",
                format!(
                    "line {n} is a torn append ({} bytes); it is cut off on open",
                    raw.len()
                ),
            ));
            break;
        }
        match journal::parse(raw) {
            Ok(p) if p.lines.len() == 1 => {
                let line = p.lines[0].clone();
                check_order(n, &line, &mut last_seq, &mut begun, add);
                out.push(line);
            }
            Ok(_) => {
                let last = n == text_lines.len();
                let sev = if last {
                    Severity::Warn
                } else {
                    Severity::Error
                };
                add(finding(
                    sev,
                    "journal-corrupt",
                    format!("line {n}: {}", describe(raw)),
                ));
            }
            Err(journal::ParseError::Version { found, .. }) => add(finding(
                Severity::Error,
                "journal-corrupt",
                format!(
                    "line {n}: format version {found}; this ckpt-mount reads versions 1 to {}",
                    journal::JOURNAL_VERSION
                ),
            )),
            Err(journal::ParseError::Corrupt { .. }) => match bad_blob_id(raw, &out) {
                Some((path, id, line)) => {
                    check_order(n, &line, &mut last_seq, &mut begun, add);
                    add(finding(
                        Severity::Error,
                        "blob-id",
                        format!("{path}: blob id {id:?} is not a sha256"),
                    ));
                    // Still a record: counted, and a `staged` one still resolves its capture
                    // (its blanked pre-image refers to no blob).
                    out.push(line);
                }
                None => add(finding(
                    Severity::Error,
                    "journal-corrupt",
                    format!("line {n}: {}", describe(raw)),
                )),
            },
        }
    }
    for b in begun {
        add(finding(
            Severity::Warn,
            "rewind-unfinished",
            format!(
                "the rewind begun at seq {b} never finished; the next rewind or mount completes it"
            ),
        ));
    }
    out
}

/// A well-formed line `n` in its place: its seq after the last one, and a `rewind_done` only
/// for a rewind begun (`begun` holds those not finished yet).
fn check_order(
    n: usize,
    line: &Line,
    last_seq: &mut Seq,
    begun: &mut HashSet<Seq>,
    add: &mut dyn FnMut(Finding),
) {
    if line.seq <= *last_seq {
        add(finding(
            Severity::Error,
            "journal-seq",
            format!("line {n}: seq {} after {last_seq}", line.seq),
        ));
    }
    *last_seq = line.seq;
    match &line.rec {
        Record::RewindBegin { .. } => {
            begun.insert(line.seq);
        }
        Record::RewindDone { begin, .. } if !begun.remove(begin) => {
            add(finding(
                Severity::Error,
                "journal-rewind",
                format!("line {n}: rewind_done for unknown begin {begin}"),
            ));
        }
        Record::OpBegin(..) => {
            begun.insert(line.seq);
        }
        Record::OpDone { begin, .. } if !begun.remove(begin) => {
            add(finding(
                Severity::Error,
                "journal-op",
                format!("line {n}: op_done for unknown op_begin {begin}"),
            ));
        }
        _ => {}
    }
}

/// When all that is wrong with a line is the blob id of its file pre-image (a blob id is
/// parsed with the line, so such a line is corrupt): the path it is the pre-image of, the id,
/// and the line with that pre-image blanked to `Absent` (still checked for its seq, and
/// referring to no blob). `None` for a line with any other fault, and for a `staged` record
/// whose capture is not among `before`.
fn bad_blob_id(raw: &[u8], before: &[Line]) -> Option<(String, String, Line)> {
    let mut value: serde_json::Value = serde_json::from_slice(raw).ok()?;
    let blob = value.get_mut("pre")?.get_mut("blob")?;
    let id = blob.as_str()?.to_string();
    if id.parse::<BlobId>().is_ok() {
        return None;
    }
    *blob = serde_json::Value::String("0".repeat(64));
    let mut text = serde_json::to_vec(&value).ok()?;
    text.push(b'\n');
    let mut line = journal::parse(&text).ok()?.lines.pop()?;
    if let Record::Capture { pre, .. } | Record::Staged { pre, .. } = &mut line.rec {
        *pre = PreImage::Absent;
    }
    let path = match &line.rec {
        Record::Capture { path, .. } => path.clone(),
        Record::Staged { capture, .. } => before.iter().find_map(|l| match &l.rec {
            Record::Capture { path, .. } if l.seq == *capture => Some(path.clone()),
            _ => None,
        })?,
        _ => return None,
    };
    Some((path.to_string(), id, line))
}

/// Why a line did not parse (it is re-parsed alone, so the message names the field).
fn describe(raw: &[u8]) -> String {
    let value: Result<serde_json::Value, _> = serde_json::from_slice(raw);
    match value {
        Err(e) => format!("not JSON: {e}"),
        Ok(v) => {
            if let Some(p) = v.get("path").and_then(|p| p.as_str())
                && let Err(e) = RelPath::new(p.as_bytes())
            {
                return format!("path {p:?} refused: {e}");
            }
            match serde_json::from_value::<Line>(v) {
                Err(e) => format!("not a record: {e}"),
                Ok(_) => "unreadable".into(),
            }
        }
    }
}

use crate::sys::read_file;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Turn;
    use crate::store::Store;
    use std::os::fd::AsFd;

    fn kinds(r: &FsckReport) -> Vec<&str> {
        r.findings.iter().map(|f| f.kind.as_ref()).collect()
    }

    fn store_with_capture() -> (tempfile::TempDir, BlobId) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), b"content").expect("write");
        let root = std::fs::File::open(dir.path()).expect("open");
        let mut s = Store::for_test(root.as_fd()).expect("store");
        let f = std::fs::File::open(dir.path().join("f")).expect("open f");
        let stored = s.blobs.put_fd(f.as_fd()).expect("put");
        s.append(Record::Capture {
            turn: Turn::new(1),
            path: RelPath::new(b"f").expect("valid"),
            pre: PreImage::File {
                blob: stored.id,
                size: 7,
                mode: 0o644,
                uid: 0,
                gid: 0,
                ino: 1,
                nlink: 1,
                fh: None,
                btime: None,
                xattrs: None,
            },
            undo_of: None,
            pid: None,
            comm: None,
        })
        .expect("append");
        (dir, stored.id)
    }

    fn run(dir: &tempfile::TempDir) -> FsckReport {
        let d = std::fs::File::open(dir.path().join(".ckpt")).expect("open store");
        check(d.as_fd())
    }

    #[test]
    fn a_healthy_store_is_clean() {
        let (dir, _) = store_with_capture();
        let r = run(&dir);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.records, 2);
        assert_eq!(r.blobs, 1);
    }

    #[test]
    fn names_each_kind_of_damage() {
        let (dir, id) = store_with_capture();
        // The 7-byte blob is packed: damage its bytes in the pack.
        let _ = &id;
        let pack = dir.path().join(".ckpt/blobs/packs/pack-0.dat");
        let data = std::fs::read(&pack).expect("read pack");
        assert_eq!(data, b"content");
        std::fs::write(&pack, b"CONTENT").expect("damage blob");
        let journal = dir.path().join(".ckpt/journal.jsonl");
        let mut j = std::fs::read(&journal).expect("read");
        j.extend_from_slice(b"{\"v\":1,\"seq\":3,\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"../../etc/passwd\",\"pre\":{\"kind\":\"absent\"}}\n");
        j.extend_from_slice(b"{\"v\":1,\"seq\":4,\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"/abs\",\"pre\":{\"kind\":\"absent\"}}\n");
        j.extend_from_slice(format!("{{\"v\":1,\"seq\":5,\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"g\",\"pre\":{{\"kind\":\"file\",\"blob\":\"{}\",\"size\":3,\"mode\":420,\"uid\":0,\"gid\":0,\"ino\":2,\"nlink\":1}}}}\n", "ab".repeat(32)).as_bytes());
        j.extend_from_slice(b"{\"v\":1,\"seq\":6,\"ti");
        std::fs::write(&journal, j).expect("write");
        let r = run(&dir);
        let k = kinds(&r);
        assert!(k.contains(&"blob-hash"), "{k:?}");
        assert_eq!(
            k.iter().filter(|x| **x == "journal-corrupt").count(),
            2,
            "{:?}",
            r.findings
        );
        assert!(k.contains(&"blob-missing"), "{k:?}");
        assert!(k.contains(&"journal-torn"), "{k:?}");
        assert!(!r.clean());
        assert!(
            r.findings
                .iter()
                .any(|f| f.detail.contains("../../etc/passwd"))
        );
    }

    #[test]
    fn a_record_naming_a_blob_by_anything_but_a_sha256_is_a_blob_id_error() {
        let (dir, _) = store_with_capture();
        let journal = dir.path().join(".ckpt/journal.jsonl");
        let mut j = std::fs::read(&journal).expect("read");
        let bad = "AB".repeat(32);
        j.extend_from_slice(format!("{{\"v\":1,\"seq\":3,\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"g\",\"pre\":{{\"kind\":\"file\",\"blob\":\"{bad}\",\"size\":3,\"mode\":420,\"uid\":0,\"gid\":0,\"ino\":2,\"nlink\":1}}}}\n").as_bytes());
        std::fs::write(&journal, j).expect("write");
        let r = run(&dir);
        assert_eq!(kinds(&r), vec!["blob-id"], "{:?}", r.findings);
        assert_eq!(
            r.findings[0].detail,
            format!("g: blob id {bad:?} is not a sha256")
        );
        assert!(!r.clean());
    }

    #[test]
    fn a_staged_record_naming_a_bad_blob_id_still_resolves_its_capture() {
        let (dir, _) = store_with_capture();
        let journal = dir.path().join(".ckpt/journal.jsonl");
        let mut j = std::fs::read(&journal).expect("read");
        let bad = "AB".repeat(32);
        j.extend_from_slice(b"{\"v\":2,\"seq\":3,\"time\":0,\"op\":\"capture\",\"turn\":1,\"path\":\"old\",\"pre\":{\"kind\":\"staged\",\"size\":3,\"mode\":420,\"uid\":0,\"gid\":0,\"ino\":9,\"nlink\":1}}\n");
        j.extend_from_slice(format!("{{\"v\":2,\"seq\":4,\"time\":0,\"op\":\"staged\",\"capture\":3,\"pre\":{{\"kind\":\"file\",\"blob\":\"{bad}\",\"size\":3,\"mode\":420,\"uid\":0,\"gid\":0,\"ino\":9,\"nlink\":1}}}}\n").as_bytes());
        std::fs::write(&journal, j).expect("write");
        let r = run(&dir);
        // Only the bad id: the capture is resolved, not also reported as a missing stage.
        assert_eq!(kinds(&r), vec!["blob-id"], "{:?}", r.findings);
        assert_eq!(
            r.findings[0].detail,
            format!("old: blob id {bad:?} is not a sha256")
        );
        assert_eq!(r.records, 4, "the bad line is still a record");
    }

    #[test]
    fn orphans_are_warnings() {
        let (dir, _) = store_with_capture();
        let root = std::fs::File::open(dir.path()).expect("open");
        drop(root);
        let d = std::fs::File::open(dir.path().join(".ckpt")).expect("open");
        let b = BlobStore::open(d.as_fd(), crate::tree::Durability::Lazy).expect("blobs");
        b.put_bytes(b"nobody refers to me").expect("put");
        let r = run(&dir);
        assert_eq!(kinds(&r), vec!["blob-orphan"]);
        assert!(r.clean());
    }
}
