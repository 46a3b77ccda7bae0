//! `diff` and `show`: what changed between two states of the folder, per path touched in
//! between. A state is the start of a turn (the oldest pre-image captured in that turn or
//! later, else the folder as it is now: the rewind rule) or now.

use crate::ids::{BlobId, Turn};
use crate::quote::quote_path;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::actors::{ActorView, actors_text};
use crate::store::journal::PreImage;
use crate::sys;
use serde::{Deserialize, Serialize};
use similar::{ChangeTag, TextDiff};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsFd, BorrowedFd};

/// Largest file diffed as text; bigger ones are summarised.
const MAX_TEXT: u64 = 8 << 20;

/// One changed path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileChange {
    /// The path (in the JSON a string, or `{"hex": …}` for a name that is not UTF-8); quoted
    /// by [`quote_path`] wherever it is printed for a person.
    pub path: RelPath,
    /// `created`, `deleted`, `modified`, `mode`, `type`, `symlink`.
    pub change: String,
    /// Lines added (text files).
    pub added: usize,
    /// Lines removed (text files).
    pub removed: usize,
    /// A unified diff, `binary files differ`, or a one-line description.
    pub text: String,
    /// Whether the content is binary (or too large to diff as text).
    #[serde(default)]
    pub binary: bool,
    /// Size in bytes before, for a regular file.
    #[serde(default)]
    pub size_before: Option<u64>,
    /// Size in bytes after, for a regular file.
    #[serde(default)]
    pub size_after: Option<u64>,
    /// The programs whose captures of this path fall in the range, as the journal recorded
    /// them (the first process to change the path in each turn).
    #[serde(default)]
    pub programs: Vec<String>,
    /// Who changed it over the range: every actor (its command name, whether it is the agent,
    /// the process of its first change and what that was), the agent first.
    #[serde(default)]
    pub actors: Vec<ActorView>,
}

/// The two states a diff compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// From the start of a turn to now.
    Since(Turn),
    /// From the start of the first turn to the start of the second (a later one).
    Between(Turn, Turn),
}

impl Range {
    fn from(self) -> Turn {
        match self {
            Self::Since(t) | Self::Between(t, _) => t,
        }
    }

    fn contains(self, t: Turn) -> bool {
        match self {
            Self::Since(from) => t >= from,
            Self::Between(from, to) => t >= from && t < to,
        }
    }
}

/// One version of a path.
enum Version {
    Absent,
    File {
        bytes: Option<Vec<u8>>,
        mode: u32,
        size: u64,
    },
    Dir {
        mode: u32,
    },
    Symlink(Vec<u8>),
    /// Anything else: a FIFO, socket or device (its `S_IFMT`).
    Other(u32),
    /// A pre-image that was not captured (too large, say): the reason.
    NotCaptured(String),
}

impl Version {
    fn kind(&self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::File { .. } => "file",
            Self::Dir { .. } => "dir",
            Self::Symlink(_) => "symlink",
            Self::Other(libc::S_IFIFO) => "fifo",
            Self::Other(_) => "special file",
            Self::NotCaptured(_) => "uncaptured file",
        }
    }

    fn size(&self) -> Option<u64> {
        match self {
            Self::File { size, .. } => Some(*size),
            _ => None,
        }
    }

    /// The version a pre-image records (its bytes read from the store when small enough to
    /// diff as text).
    fn recorded(store: &Store, pre: &PreImage) -> Self {
        match pre {
            PreImage::Absent => Self::Absent,
            PreImage::File {
                blob, mode, size, ..
            } => Self::File {
                bytes: (*size <= MAX_TEXT)
                    .then(|| blob_bytes(store, blob))
                    .flatten(),
                mode: *mode,
                size: *size,
            },
            PreImage::Dir { mode, .. } => Self::Dir { mode: *mode },
            PreImage::Symlink { target, .. } => Self::Symlink(target.0.clone()),
            PreImage::Fifo { .. } => Self::Other(libc::S_IFIFO),
            PreImage::Skipped { reason, .. } => Self::NotCaptured(reason.to_string()),
            PreImage::Staged { .. } => Self::NotCaptured("its bytes are still being stored".into()),
        }
    }

    /// What stands at `path` in the folder now, never following a symlink.
    fn now(root: BorrowedFd<'_>, path: &RelPath) -> Self {
        let Ok(fd) =
            sys::open_beneath(root, &path.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
        else {
            return Self::Absent;
        };
        let Ok(st) = sys::fstat(fd.as_fd()) else {
            return Self::Absent;
        };
        let mode = st.st_mode & 0o7777;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => {
                let size = st.st_size as u64;
                let bytes = (size <= MAX_TEXT)
                    .then(|| {
                        // without an atime update where allowed: a diff only looks
                        sys::reopen(fd.as_fd(), libc::O_RDONLY | libc::O_NOATIME)
                            .or_else(|_| sys::reopen(fd.as_fd(), libc::O_RDONLY))
                            .ok()
                            .and_then(|r| sys::read_to_end(r.as_fd()).ok())
                    })
                    .flatten();
                Self::File { bytes, mode, size }
            }
            libc::S_IFDIR => Self::Dir { mode },
            // An `O_PATH | O_NOFOLLOW` descriptor of a symlink reads it with an empty name.
            libc::S_IFLNK => Self::Symlink(sys::readlinkat(fd.as_fd(), c"").unwrap_or_default()),
            other => Self::Other(other),
        }
    }
}

fn is_text(b: &[u8]) -> bool {
    !b.contains(&0) && std::str::from_utf8(b).is_ok()
}

fn text_diff(path: &RelPath, old: &[u8], new: &[u8]) -> (String, usize, usize) {
    if !is_text(old) || !is_text(new) {
        return (BINARY.into(), 0, 0);
    }
    let (o, n) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    let d = TextDiff::from_lines(o.as_ref(), n.as_ref());
    let (mut added, mut removed) = (0, 0);
    for c in d.iter_all_changes() {
        match c.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    // Quoted as git quotes a header's name: the whole `a/…`, so that a name holding a newline
    // cannot make a line of the diff.
    let side = |prefix: &[u8]| quote_path(&[prefix, path.as_bytes()].concat()).into_owned();
    let text = d
        .unified_diff()
        .context_radius(3)
        .header(&side(b"a/"), &side(b"b/"))
        .to_string();
    (text, added, removed)
}

fn blob_bytes(store: &Store, id: &BlobId) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    store
        .blobs()
        .read_blob(id, &mut |chunk| {
            out.extend_from_slice(chunk);
            Ok(())
        })
        .ok()?;
    Some(out)
}

/// The changes over `range`, limited to `only` (paths or their parents) when given, sorted
/// by path.
pub fn diff(
    root: BorrowedFd<'_>,
    store: &Store,
    range: Range,
    only: &[RelPath],
) -> Vec<FileChange> {
    let index = store.index();
    // The end state: the start of a later turn where a path was captured then or after, else
    // the folder now.
    let end: HashMap<RelPath, PreImage> = match range {
        Range::Since(_) => HashMap::new(),
        Range::Between(_, to) => index.plan_targets(to).into_iter().collect(),
    };
    let captures = index.captures.iter().filter(|c| range.contains(c.turn));
    let states = index
        .plan_targets(range.from())
        .into_iter()
        .map(|(path, pre)| {
            let after = end.get(&path).cloned();
            (path, Some(pre), after)
        });
    changes(root, store, captures, states, only)
}

/// The changes from the folder at one moment of its past to another one's, or to now
/// (`to: None`): the moments a rewind retired are read this way (`crate::store::past`).
/// `captures` are those taken in between, for who changed what.
pub fn diff_past<'a>(
    root: BorrowedFd<'_>,
    store: &Store,
    pasts: (&crate::store::past::Past, Option<&crate::store::past::Past>),
    captures: impl Iterator<Item = &'a crate::store::Capture> + Clone,
    only: &[RelPath],
) -> Vec<FileChange> {
    diff_past_with(root, store, pasts, captures, (&[], only))
}

/// [`diff_past`] over the recorded paths and the names `extra` (names nothing recorded, such as
/// other names of a hard-linked file a recorded name changed).
pub fn diff_past_with<'a>(
    root: BorrowedFd<'_>,
    store: &Store,
    (from, to): (&crate::store::past::Past, Option<&crate::store::past::Past>),
    captures: impl Iterator<Item = &'a crate::store::Capture> + Clone,
    (extra, only): (&[RelPath], &[RelPath]),
) -> Vec<FileChange> {
    let index = store.index();
    let of = |past: &crate::store::past::Past, path: &RelPath| {
        crate::versions::in_past(past, index, root, path)
    };
    let states = from.paths().chain(extra.iter()).filter_map(|path| {
        let before = of(from, path);
        let after = to.and_then(|t| of(t, path));
        // Unchanged over the range: changed only after its end, or never at all.
        let same = match (&before, &after) {
            (Some(a), Some(b)) => a == b,
            (None, None) => to.is_some(),
            _ => false,
        };
        (!same).then(|| (path.clone(), before, after))
    });
    changes(root, store, captures, states, only)
}

/// The changes of `states` (each path, with what it was before and after: a pre-image, or
/// `None` for the folder now), with the programs and actors of `captures`.
fn changes<'a>(
    root: BorrowedFd<'_>,
    store: &Store,
    captures: impl Iterator<Item = &'a crate::store::Capture> + Clone,
    states: impl Iterator<Item = (RelPath, Option<PreImage>, Option<PreImage>)>,
    only: &[RelPath],
) -> Vec<FileChange> {
    let index = store.index();
    let wanted = |p: &RelPath| only.is_empty() || only.iter().any(|o| p.starts_with(o));
    let mut programs: HashMap<&RelPath, BTreeSet<String>> = HashMap::new();
    for c in captures.clone() {
        if let Some(comm) = &c.comm {
            programs
                .entry(&c.path)
                .or_default()
                .insert(comm.to_string());
        }
    }
    let actors = index.actors_by_path(captures);
    let version = |path: &RelPath, pre: Option<&PreImage>| match pre {
        Some(pre) => Version::recorded(store, pre),
        None => Version::now(root, path),
    };
    let mut out = Vec::new();
    for (path, before, after) in states {
        if !wanted(&path) {
            continue;
        }
        let before = version(&path, before.as_ref());
        let after = version(&path, after.as_ref());
        let p = path.clone();
        let who: Vec<String> = programs
            .get(&path)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let by = actors.get(&path).cloned().unwrap_or_default();
        let (size_before, size_after) = (before.size(), after.size());
        let mut push = |change: &str, added: usize, removed: usize, text: String| {
            out.push(FileChange {
                path: p.clone(),
                change: change.into(),
                added,
                removed,
                binary: text == BINARY || text.starts_with(LARGE),
                text,
                size_before,
                size_after,
                programs: who.clone(),
                actors: by.clone(),
            });
        };
        changes_between(&path, before, after, &mut push);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The text of a change between binary contents.
const BINARY: &str = "binary files differ\n";
/// How the text of a change between files too large to diff starts.
const LARGE: &str = "large file: ";

/// The changes of one path `p` from `before` to `after`, each given to `push` as (kind of
/// change, lines added, lines removed, text).
fn changes_between(
    p: &RelPath,
    before: Version,
    after: Version,
    push: &mut dyn FnMut(&str, usize, usize, String),
) {
    match (before, after) {
        (Version::Absent, Version::Absent) => {}
        (Version::NotCaptured(reason), _) => {
            push("modified", 0, 0, format!("not captured: {reason}\n"))
        }
        (_, Version::NotCaptured(reason)) => {
            push("modified", 0, 0, format!("not captured: {reason}\n"))
        }
        (Version::Absent, Version::File { bytes, size, .. }) => match bytes {
            Some(b) => {
                let (text, added, _) = text_diff(p, b"", &b);
                push("created", added, 0, text);
            }
            None => push("created", 0, 0, format!("{LARGE}{size} bytes\n")),
        },
        (Version::Absent, _) => push("created", 0, 0, "created\n".into()),
        (
            Version::File { bytes, mode, size },
            Version::File {
                bytes: b2,
                mode: m2,
                size: s2,
            },
        ) => file_changes(p, (bytes, mode, size), (b2, m2, s2), push),
        (Version::File { bytes, size, .. }, Version::Absent) => match bytes {
            Some(b) => {
                let (text, _, removed) = text_diff(p, &b, b"");
                push("deleted", 0, removed, text);
            }
            None => push("deleted", 0, 0, format!("{LARGE}{size} bytes\n")),
        },
        (Version::Dir { mode }, Version::Dir { mode: m2 }) => {
            if mode != m2 {
                push("mode", 0, 0, format!("mode {mode:o} -> {m2:o}\n"));
            }
        }
        (Version::Symlink(t1), Version::Symlink(t2)) => {
            if t1 != t2 {
                push(
                    "symlink",
                    0,
                    0,
                    // Quoted like names: a target is any bytes, a newline or an escape too.
                    format!("symlink {} -> {}\n", quote_path(&t1), quote_path(&t2)),
                );
            }
        }
        (Version::Other(a), Version::Other(b)) if a == b => {}
        (before, Version::Absent) => push("deleted", 0, 0, format!("{} deleted\n", before.kind())),
        (before, after) => push(
            "type",
            0,
            0,
            format!("was a {}, now a {}\n", before.kind(), after.kind()),
        ),
    }
}

/// A regular file before and after: its content (a text diff, or sizes for a large file) and
/// its mode.
fn file_changes(
    p: &RelPath,
    (old, mode, size): (Option<Vec<u8>>, u32, u64),
    (new, m2, s2): (Option<Vec<u8>>, u32, u64),
    push: &mut dyn FnMut(&str, usize, usize, String),
) {
    match (old, new) {
        (Some(old), Some(new)) => {
            if old != new {
                let (text, a, r) = text_diff(p, &old, &new);
                push("modified", a, r, text);
            }
        }
        _ => push("modified", 0, 0, format!("{LARGE}{size} -> {s2} bytes\n")),
    }
    if mode != m2 {
        push("mode", 0, 0, format!("mode {mode:o} -> {m2:o}\n"));
    }
}

/// The `--stat` summary of a diff: one row per path (sorted), with the lines changed for text
/// and the sizes for binary or large files, and who changed it (the agent marked as such);
/// when no agent was marked, a last line says that every change counts as one actor.
pub fn stat(changes: &[FileChange], fold: Fold) -> String {
    let mut rows: Vec<&FileChange> = changes.iter().collect();
    rows.sort_by(|a, b| a.path.cmp(&b.path));
    let folds = match fold {
        Fold::Folded => folds(&rows),
        Fold::Expanded => Vec::new(),
    };
    let folded = |c: &FileChange| folds.iter().any(|f| c.path.starts_with(&f.dir));
    rows.retain(|c| !folded(c));
    let amount = |c: &FileChange| {
        if c.binary {
            let size = |s: Option<u64>| s.map_or("-".to_string(), crate::units::human_size);
            format!("bin {} -> {}", size(c.size_before), size(c.size_after))
        } else {
            let bar = format!(
                "{}{}",
                "+".repeat(c.added.min(40)),
                "-".repeat(c.removed.min(40))
            );
            format!("{:>5} {bar}", c.added + c.removed)
        }
    };
    let amounts: Vec<String> = rows.iter().map(|c| amount(c)).collect();
    // Quoted names are ASCII: their length is their width.
    let names: Vec<Cow<'_, str>> = rows.iter().map(|c| quote_path(c.path.as_bytes())).collect();
    let fold_names: Vec<String> = folds
        .iter()
        .map(|f| format!("{}/", quote_path(f.dir.as_bytes())))
        .collect();
    let width = names
        .iter()
        .map(|n| n.len())
        .chain(fold_names.iter().map(String::len))
        .max()
        .unwrap_or(0);
    let amount_width = amounts.iter().map(String::len).max().unwrap_or(0);
    let mut s = String::new();
    for (f, dir) in folds.iter().zip(&fold_names) {
        let line = format!(
            " {:<width$} | {} paths ({})  {}",
            dir,
            group_digits(f.paths),
            f.kinds,
            f.who,
        );
        s.push_str(line.trim_end());
        s.push('\n');
    }
    for ((c, amount), name) in rows.iter().zip(&amounts).zip(&names) {
        let who = if c.actors.is_empty() {
            crate::store::actors::programs_text(&c.programs)
        } else {
            actors_text(&c.actors)
        };
        let line = format!(
            " {:<width$} | {:<8} {:<amount_width$}  {who}",
            name, c.change, amount,
        );
        s.push_str(line.trim_end());
        s.push('\n');
    }
    let (a, r): (usize, usize) = changes
        .iter()
        .fold((0, 0), |(a, r), c| (a + c.added, r + c.removed));
    s.push_str(&format!(
        " {} paths changed, {a} insertions(+), {r} deletions(-)\n",
        changes.len()
    ));
    if unmarked(changes) {
        s.push_str(&format!(" {}\n", crate::store::actors::ONE_ACTOR));
    }
    s
}

/// Whether `--stat` folds large trees into one line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// A directory with [`FOLD_AT`] changed paths or more below it is one line (`show` and
    /// `diff --stat` by default).
    Folded,
    /// Every path on its own line (`--expand`).
    Expanded,
}

/// How many changed paths below a directory fold it into one line of `--stat`.
pub const FOLD_AT: usize = 50;

/// A directory `--stat` shows as one line: how many paths changed below it, how (`1,779
/// created`), and by whom.
struct Folded {
    dir: RelPath,
    paths: usize,
    kinds: String,
    who: String,
}

/// The directories to fold among `rows` (sorted by path): the topmost ones with [`FOLD_AT`]
/// changed paths or more below them (never the folder itself).
fn folds(rows: &[&FileChange]) -> Vec<Folded> {
    let mut counts: std::collections::BTreeMap<RelPath, usize> = std::collections::BTreeMap::new();
    for c in rows {
        let mut up = c.path.parent();
        while let Some(d) = up {
            up = d.parent();
            *counts.entry(d).or_default() += 1;
        }
    }
    let mut dirs: Vec<RelPath> = Vec::new();
    for (d, n) in &counts {
        if *n >= FOLD_AT && !dirs.iter().any(|top| d.starts_with(top)) {
            dirs.push(d.clone());
        }
    }
    dirs.into_iter()
        .map(|dir| {
            let below: Vec<&&FileChange> =
                rows.iter().filter(|c| c.path.starts_with(&dir)).collect();
            let mut kinds: std::collections::BTreeMap<&str, usize> =
                std::collections::BTreeMap::new();
            for c in &below {
                *kinds.entry(c.change.as_str()).or_default() += 1;
            }
            let kinds: Vec<String> = kinds
                .iter()
                .map(|(k, n)| format!("{} {k}", group_digits(*n)))
                .collect();
            let mut actors: Vec<ActorView> = Vec::new();
            let mut programs: Vec<String> = Vec::new();
            for c in &below {
                for a in &c.actors {
                    if !actors.iter().any(|b| b.actor() == a.actor()) {
                        actors.push(a.clone());
                    }
                }
                for p in &c.programs {
                    if !programs.contains(p) {
                        programs.push(p.clone());
                    }
                }
            }
            crate::store::actors::sort_actors(&mut actors);
            let who = if actors.is_empty() {
                crate::store::actors::programs_text(&programs)
            } else {
                actors_text(&actors)
            };
            Folded {
                paths: below.len(),
                dir,
                kinds: kinds.join(", "),
                who,
            }
        })
        .collect()
}

/// `1779` as `1,779`.
fn group_digits(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Whether `changes` name actors and none of them was classified (no agent was marked).
pub fn unmarked(changes: &[FileChange]) -> bool {
    let mut actors = changes.iter().flat_map(|c| &c.actors).peekable();
    actors.peek().is_some() && actors.all(|a| a.agent.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, comm: &str) -> FileChange {
        FileChange {
            path: RelPath::new(path.as_bytes()).expect("a valid path"),
            change: "created".into(),
            added: 1,
            removed: 0,
            text: String::new(),
            binary: false,
            size_before: None,
            size_after: Some(2),
            programs: vec![comm.into()],
            actors: Vec::new(),
        }
    }

    #[test]
    fn stat_quotes_names_and_lines_them_up_by_what_is_printed() {
        let changes = [
            change("ok.txt", "sh"),
            change("é\nforged | created 9 +", "ev\x1bil"),
        ];
        assert_eq!(
            stat(&changes, Fold::Folded),
            concat!(
                " ok.txt                           | created      1 +  sh\n",
                r#" "\303\251\nforged | created 9 +" | created      1 +  "ev\033il""#,
                "\n 2 paths changed, 2 insertions(+), 0 deletions(-)\n",
            )
        );
    }

    #[test]
    fn a_large_tree_is_one_line_until_expanded() {
        let mut changes: Vec<FileChange> = (0..1779)
            .map(|i| change(&format!("node_modules/p{}/f{i}.js", i % 300), "npm"))
            .collect();
        changes.push(change("package.json", "npm"));
        changes.push(change("src/a.js", "vim"));
        let folded = stat(&changes, Fold::Folded);
        assert_eq!(
            folded,
            concat!(
                " node_modules/ | 1,779 paths (1,779 created)  npm\n",
                " package.json  | created      1 +  npm\n",
                " src/a.js      | created      1 +  vim\n",
                " 1781 paths changed, 1781 insertions(+), 0 deletions(-)\n",
            )
        );
        let expanded = stat(&changes, Fold::Expanded);
        assert_eq!(expanded.lines().count(), 1782);
        assert_eq!(group_digits(1234567), "1,234,567");
        assert_eq!(group_digits(12), "12");
    }

    #[test]
    fn a_patch_header_quotes_the_whole_side() {
        let path = RelPath::new(b"d/new\nline").expect("valid");
        let (text, added, removed) = text_diff(&path, b"", b"x\n");
        assert_eq!((added, removed), (1, 0));
        let head: Vec<&str> = text.lines().take(2).collect();
        assert_eq!(head, [r#"--- "a/d/new\nline""#, r#"+++ "b/d/new\nline""#]);
    }
}
