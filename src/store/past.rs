//! The folder as it was at one moment of its history: the start of a turn, live or retired by
//! a rewind, or the state just before a rewind ran.
//!
//! One rule gives it. Every change of a path is preceded in the journal by a record of what the
//! path was just before: the capture of its first change in each capture epoch, or the save of
//! an operation (rewind, undo, redo) that overwrites it. A turn begins an epoch, and so does
//! every such operation. So, for a moment that begins an epoch (journal position `at`), the
//! first pre-image recorded after `at` for a path is what the path was at `at`; a path with
//! none is as it is in the folder now. A directory renamed away had its whole subtree captured
//! first, and a name made later (by a rename too) was recorded absent, so the rule holds below
//! every directory.
//!
//! A name nothing recorded can still have changed through another name of its hard-link group
//! (a write through `b` changes `a`). Such a name holds, now, a file whose identity a recorded
//! pre-image names: what that pre-image says is what the name was too ([`Past::of_identity`]).
//! For the same reason a recorded name of a hard-linked file reads as the oldest record of any
//! name of its inode ([`Past::recorded`]), as a rewind restores a group from its oldest target.
//!
//! Pure: journal lines in, plain data out. [`Store::past`] reads the lines.

use super::journal::{Line, PreImage, Record};
use super::{Store, StoreError};
use crate::identity::FileId;
use crate::ids::Seq;
use crate::relpath::RelPath;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;

/// The first pre-images recorded after one journal position.
#[derive(Debug, Clone)]
pub struct Past {
    /// The moment: records after it count.
    at: Seq,
    /// The last journal position folded in.
    read_to: Seq,
    /// Per path, its first pre-image after `at` and that record's seq.
    first: HashMap<RelPath, (Seq, PreImage)>,
    /// Per directory path (`None`: the root), the names recorded beneath it.
    children: HashMap<Option<RelPath>, BTreeSet<OsString>>,
    /// Per identity of a file or symlink, the first pre-image that names it.
    identities: HashMap<FileId, PreImage>,
    /// Captures still staged: the capture's seq, for its `staged` record to resolve.
    staged: HashMap<Seq, RelPath>,
    /// Inode numbers the recorded files and symlinks had: a name the folder holds now with
    /// one of them may be another name of a recorded hard-link group.
    inos: std::collections::HashSet<u64>,
    /// How many bytes of the journal were read (the next catch-up reads on from there), and
    /// the numbering they belong to (a prune rewrites the journal: read again from 0).
    read_len: u64,
    journal_epoch: Option<crate::ids::Epoch>,
}

impl Past {
    /// Nothing recorded yet after `at`.
    pub fn new(at: Seq) -> Self {
        Self {
            at,
            read_to: at,
            first: HashMap::new(),
            children: HashMap::new(),
            identities: HashMap::new(),
            staged: HashMap::new(),
            inos: std::collections::HashSet::new(),
            read_len: 0,
            journal_epoch: None,
        }
    }

    /// The past at `at` the journal's `lines` describe.
    pub fn from_lines(at: Seq, lines: &[Line]) -> Self {
        let mut past = Self::new(at);
        for line in lines {
            past.fold(line);
        }
        past
    }

    /// The journal position of the moment.
    pub fn at(&self) -> Seq {
        self.at
    }

    /// The last journal position folded in: lines after it are still to come.
    pub fn read_to(&self) -> Seq {
        self.read_to
    }

    /// Takes in one journal line; lines at or before the moment, or already folded, change
    /// nothing.
    pub fn fold(&mut self, line: &Line) {
        if line.seq <= self.read_to {
            return;
        }
        self.read_to = line.seq;
        match &line.rec {
            Record::Capture { path, pre, .. } => self.first_of(line.seq, path, pre),
            Record::Staged { capture, pre } => self.resolve(*capture, pre),
            _ => {}
        }
    }

    fn first_of(&mut self, seq: Seq, path: &RelPath, pre: &PreImage) {
        if self.first.contains_key(path) {
            return;
        }
        if matches!(pre, PreImage::Staged { .. }) {
            self.staged.insert(seq, path.clone());
        }
        if let Some(id) = pre.file_id() {
            self.inos.insert(id.ino);
            self.identities.entry(id).or_insert_with(|| pre.clone());
        }
        self.children
            .entry(path.parent())
            .or_default()
            .insert(path.file_name().to_os_string());
        self.first.insert(path.clone(), (seq, pre.clone()));
    }

    /// A staged pre-image became `pre` (only a file, as the index takes it).
    fn resolve(&mut self, capture: Seq, pre: &PreImage) {
        if !matches!(pre, PreImage::File { .. } | PreImage::Skipped { .. }) {
            return;
        }
        let Some(path) = self.staged.remove(&capture) else {
            return;
        };
        if let Some((seq, slot)) = self.first.get_mut(&path)
            && *seq == capture
        {
            *slot = pre.clone();
            if let Some(id) = pre.file_id() {
                self.inos.insert(id.ino);
                // Only the staged record itself is replaced: an older record of the same
                // inode through another name (a hard link written, then renamed over) stays
                // the group's oldest, which is what its names were at the moment.
                match self.identities.get_mut(&id) {
                    Some(oldest @ PreImage::Staged { .. }) => *oldest = pre.clone(),
                    Some(_) => {}
                    None => {
                        self.identities.insert(id, pre.clone());
                    }
                }
            }
        }
    }

    /// What `path` was at the moment, when something recorded it since (`None`: it is as the
    /// folder has it now, unless an ancestor says otherwise: [`Past::hidden_by_ancestor`]).
    /// A hard-linked file's is the oldest record of any name of its inode: its own first record
    /// may follow a change made through another name (a rewind restores the group so too).
    pub fn recorded(&self, path: &RelPath) -> Option<&PreImage> {
        let (_, own) = self.first.get(path)?;
        if let Some(id) = own.file_id()
            && let Some(oldest) = self.identities.get(&id)
            && (own.nlink() > 1 || oldest.nlink() > 1)
        {
            return Some(oldest);
        }
        Some(own)
    }

    /// Whether an ancestor of `path` was, at the moment, something other than a directory
    /// (absent, a file…): then nothing was at `path`, whatever the folder has there now.
    pub fn hidden_by_ancestor(&self, path: &RelPath) -> bool {
        let mut cur = path.parent();
        while let Some(dir) = cur {
            if let Some(pre) = self.recorded(&dir) {
                return !matches!(pre, PreImage::Dir { .. });
            }
            cur = dir.parent();
        }
        false
    }

    /// The names recorded directly in `dir` (`None`: the root), in order; absent ones too
    /// (they hide a name the folder has now).
    pub fn recorded_children(&self, dir: Option<&RelPath>) -> impl Iterator<Item = &OsString> {
        self.children.get(&dir.cloned()).into_iter().flatten()
    }

    /// What a file (or symlink) was at the moment, found by its identity: the first pre-image
    /// recorded since of any name of its hard-link group. `current` maps a recorded identity
    /// to the one that stands for it now (a rewind recreated it: `Index::current_identity`).
    pub fn of_identity(
        &self,
        now: &FileId,
        current: &dyn Fn(&FileId) -> FileId,
    ) -> Option<&PreImage> {
        if let Some(pre) = self.identities.get(now) {
            return Some(pre);
        }
        // Renewed identities are rare: a scan only when the file is linked elsewhere.
        self.identities
            .iter()
            .find(|(id, _)| current(id).is(now))
            .map(|(_, pre)| pre)
    }

    /// The identities of hard-linked files (more than one name when recorded) recorded since
    /// the moment: a name nothing recorded that holds one of them now changed with it.
    pub fn linked_identities(&self) -> impl Iterator<Item = &FileId> {
        self.identities
            .iter()
            .filter(|(_, pre)| pre.nlink() > 1)
            .map(|(id, _)| id)
    }

    /// Every path recorded since the moment (in no particular order).
    pub fn paths(&self) -> impl Iterator<Item = &RelPath> {
        self.first.keys()
    }

    /// Whether a recorded file or symlink had inode number `ino` (a cheap test before
    /// [`Past::of_identity`]).
    pub fn may_be_recorded(&self, ino: u64) -> bool {
        self.inos.contains(&ino)
    }

    /// Every path recorded since the moment with what it was then: what a rewind to the
    /// moment gives back (`op restore`). In journal order, oldest record first, as a rewind's
    /// targets are: names of one hard-linked inode are restored from the oldest record of any
    /// of them, since a later record of one name may follow a change made through another.
    pub fn targets(&self) -> Vec<(RelPath, PreImage)> {
        let mut out: Vec<(Seq, &RelPath, &PreImage)> = self
            .first
            .iter()
            .map(|(p, (seq, pre))| (*seq, p, pre))
            .collect();
        out.sort_by_key(|(seq, ..)| *seq);
        out.into_iter()
            .map(|(_, p, pre)| (p.clone(), pre.clone()))
            .collect()
    }

    /// How many paths are recorded.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// Whether nothing is recorded since the moment.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }
}

impl Store {
    /// The past at journal position `at`, read from the journal as it is on disk.
    pub fn past(&self, at: Seq) -> Result<Past, StoreError> {
        let mut past = Past::new(at);
        self.catch_up(&mut past)?;
        Ok(past)
    }

    /// The past at journal position `at` as the journal stood before position `until`: the
    /// lines from `until` on are left out (what a run cut off by a crash wrote since it began
    /// does not change what it was asked to give back).
    pub fn past_until(&self, at: Seq, until: Seq) -> Result<Past, StoreError> {
        let mut past = Past::new(at);
        for line in self.read_lines()? {
            if line.seq >= until {
                break;
            }
            past.fold(&line);
        }
        Ok(past)
    }

    /// Folds into `past` the lines written since it last read (none when it is up to date):
    /// only the journal's bytes after those it read.
    pub fn catch_up(&self, past: &mut Past) -> Result<(), StoreError> {
        if past.journal_epoch == Some(self.epoch) && past.read_to() >= self.index.last_seq {
            return Ok(());
        }
        if past.journal_epoch != Some(self.epoch) || self.journal_len() < past.read_len {
            // Never read, or the journal was rewritten since (a prune renumbers it), or cut
            // back after a refused operation.
            *past = Past::new(past.at());
            past.journal_epoch = Some(self.epoch);
        }
        let (lines, read) = self.read_lines_from(past.read_len)?;
        past.read_len += read;
        for line in &lines {
            past.fold(line);
        }
        Ok(())
    }
}

/// Journal lines for the tests of what reads a past (here and `crate::past_tree`).
#[cfg(test)]
pub(crate) mod test_lines {
    use super::*;
    use crate::ids::Turn;

    /// A capture of `path` in turn 1 at `seq`, recording `pre`.
    pub(crate) fn capture(seq: u64, path: &str, pre: PreImage) -> Line {
        Line {
            v: 5,
            seq: Seq::new(seq),
            time: 0,
            rec: Record::Capture {
                turn: Turn::new(1),
                path: RelPath::new(path.as_bytes()).expect("path"),
                pre,
                undo_of: None,
                pid: None,
                comm: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_lines::capture;
    use super::*;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("path")
    }

    fn file(ino: u64, blob: char) -> PreImage {
        PreImage::File {
            blob: crate::ids::BlobId::of(blob.to_string().as_bytes()),
            size: 1,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino,
            nlink: 2,
            fh: None,
            btime: Some(7),
            xattrs: None,
        }
    }

    #[test]
    fn a_staged_name_resolved_later_keeps_its_groups_oldest_record() {
        // `a` and `b` one inode: `a` recorded before a write, then `b` (its last name by
        // then) renamed over, staged, and stored with the written bytes.
        let mut written = file(9, 'w');
        if let PreImage::File { nlink, .. } = &mut written {
            *nlink = 1;
        }
        let staged = PreImage::Staged {
            size: 1,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: 9,
            nlink: 1,
            fh: None,
            btime: Some(7),
        };
        let lines = [
            capture(2, "a", file(9, 'o')),
            capture(3, "b", staged),
            Line {
                v: 5,
                seq: Seq::new(4),
                time: 0,
                rec: Record::Staged {
                    capture: Seq::new(3),
                    pre: written,
                },
            },
        ];
        let past = Past::from_lines(Seq::new(1), &lines);
        for name in ["a", "b"] {
            assert_eq!(past.recorded(&rp(name)), Some(&file(9, 'o')), "{name}");
        }
    }

    #[test]
    fn the_first_record_after_the_moment_wins_and_earlier_ones_do_not_count() {
        let lines = [
            capture(1, "a", file(1, 'a')),
            capture(3, "a", file(1, 'b')),
            capture(4, "d/x", PreImage::Absent),
            capture(5, "a", file(1, 'c')),
            capture(6, "d", PreImage::Absent),
        ];
        let past = Past::from_lines(Seq::new(2), &lines);
        assert_eq!(past.recorded(&rp("a")), Some(&file(1, 'b')));
        assert_eq!(past.recorded(&rp("d/x")), Some(&PreImage::Absent));
        assert_eq!(past.recorded(&rp("b")), None);
        assert!(past.hidden_by_ancestor(&rp("d/y")), "d did not exist");
        assert!(!past.hidden_by_ancestor(&rp("e/y")));
        let root: Vec<_> = past.recorded_children(None).cloned().collect();
        assert_eq!(root, vec![OsString::from("a"), OsString::from("d")]);
        let id = FileId {
            ino: 1,
            fh: None,
            btime: Some(7),
        };
        assert_eq!(past.of_identity(&id, &|i| i.clone()), Some(&file(1, 'b')));
    }

    #[test]
    fn a_hard_linked_name_reads_as_the_oldest_record_of_its_inode() {
        // `b` is captured first (its xattr about to change, through `b`), `a`, the same
        // inode, only later, with the change: at the moment both held the first state.
        let lines = [
            capture(3, "b", file(1, 'x')),
            capture(4, "c", file(2, 'c')),
            capture(5, "a", file(1, 'y')),
        ];
        let past = Past::from_lines(Seq::new(2), &lines);
        assert_eq!(past.recorded(&rp("a")), Some(&file(1, 'x')));
        assert_eq!(past.recorded(&rp("b")), Some(&file(1, 'x')));
        assert_eq!(past.recorded(&rp("c")), Some(&file(2, 'c')));
        let order: Vec<String> = past.targets().iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(order, ["b", "c", "a"], "journal order");
    }

    #[test]
    fn a_staged_capture_reads_as_what_it_became() {
        let staged = PreImage::Staged {
            size: 1,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: 9,
            nlink: 1,
            fh: None,
            btime: None,
        };
        let lines = [
            capture(2, "s", staged),
            Line {
                v: 5,
                seq: Seq::new(3),
                time: 0,
                rec: Record::Staged {
                    capture: Seq::new(2),
                    pre: file(9, 'e'),
                },
            },
        ];
        let past = Past::from_lines(Seq::new(1), &lines);
        assert_eq!(past.recorded(&rp("s")), Some(&file(9, 'e')));
    }
}
