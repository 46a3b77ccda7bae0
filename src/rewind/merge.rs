//! `rewind --agent NAME --conflicts merge`: a text file that the agent and others both changed
//! since the start of the turn gets the agent's edits taken back line by line, and keeps every
//! line another actor changed.
//!
//! The journal cuts the file's history into spans of one owner each: the capture's pre-image
//! (the state at the start of each turn it was changed in), then a hand-off image at each
//! change of hands (`crate::store::journal::HandOff`), then the file as it is now. A span
//! runs from one image to the next and belongs to the owner that changed it then. Each span
//! of the agent's, newest first, is reverted onto the file as it is by a three-way merge
//! (base: the span's end, ours: the file, theirs: the span's start), as `git revert` does; an
//! edit that overlaps a later edit of someone else's is a conflict, and the path is kept as it
//! is, with the overlapping hunks shown. Binary files (a NUL byte, or not UTF-8), files that
//! were not regular files throughout, and files over [`MERGE_MAX`] stay whole-path conflicts.
//! `diffy` does the merge (diff3, the algorithm git and Mercurial use), so the hunks are the
//! ones a person knows from a merge conflict.

use super::report::PathActors;
use super::request::Agents;
use crate::ids::{BlobId, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::PreImage;
use crate::sys;
use std::os::fd::{AsFd, BorrowedFd};

/// The largest file merged line by line (bigger ones stay whole-path conflicts): a merge holds
/// every version of the file in memory, and a hand-off stores no bigger one.
pub const MERGE_MAX: u64 = crate::capture::HANDOFF_MAX;

/// What merging one conflict gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The agent's edits taken back, every other line kept: the file's text as it is now, and
    /// its new text.
    Clean {
        /// The file now, as the merge read it.
        now: String,
        /// The merge's result.
        merged: String,
    },
    /// An edit of the agent's overlaps another actor's: the conflicting hunks, in diff3 form.
    Overlap(String),
    /// Not merged line by line, and why.
    Whole(&'static str),
}

/// One image of the file and who changed it from there to the next image.
struct Span {
    text: String,
    ours: bool,
}

/// Merges the conflict `c` (a path the agents `agents` and others changed since the start of
/// turn `to`): the file now (reached beneath `root`) with the agents' spans reverted.
pub fn merge(
    root: BorrowedFd<'_>,
    store: &Store,
    c: &PathActors,
    to: Turn,
    agents: &Agents,
) -> Merged {
    let now = match read_now(root, &c.path) {
        Ok(t) => t,
        Err(why) => return Merged::Whole(why),
    };
    let spans = match spans(store, &c.path, to, agents) {
        Ok(s) => s,
        Err(why) => return Merged::Whole(why),
    };
    match revert(&spans, &now) {
        Ok(merged) => Merged::Clean { now, merged },
        Err(conflicted) => Merged::Overlap(conflict_hunks(&conflicted)),
    }
}

/// Reverts each span `ours` owns onto `now`, newest first. `Err` holds the merge with conflict
/// markers where an edit of ours overlaps a later one of someone else's.
fn revert(spans: &[Span], now: &str) -> Result<String, String> {
    let mut cur = now.to_string();
    for (i, span) in spans.iter().enumerate().rev() {
        if !span.ours {
            continue;
        }
        let after = spans.get(i + 1).map_or(now, |s| s.text.as_str());
        if span.text == after {
            continue;
        }
        // Base: the span's end; ours: the file as it is; theirs: the span's start.
        cur = diffy::merge(after, &cur, &span.text)?;
    }
    Ok(cur)
}

/// The file's images since the start of turn `to`, oldest first, each with whether the agents
/// owned the span from it to the next.
fn spans(
    store: &Store,
    path: &RelPath,
    to: Turn,
    agents: &Agents,
) -> Result<Vec<Span>, &'static str> {
    let index = store.index();
    let actors = &index.actors;
    let mut out = Vec::new();
    for c in index
        .captures
        .iter()
        .filter(|c| c.turn >= to && c.path == *path)
    {
        let first = actors.by_capture.get(&c.seq).and_then(|t| t.first());
        let ours =
            first.is_some_and(|t| t.agent == Some(true) && agents.covers_name(t.name.as_deref()));
        out.push(Span {
            text: text_of(store, &c.pre)?,
            ours,
        });
        for h in actors.handoffs.get(&c.seq).into_iter().flatten() {
            out.push(Span {
                text: text_of(store, &h.pre)?,
                ours: h.agent == Some(true) && agents.covers_name(h.name.as_deref()),
            });
        }
    }
    Ok(out)
}

/// The text of one image: a regular file's bytes (an absent file is empty: created in the
/// span), refused when it is no text or no regular file.
fn text_of(store: &Store, pre: &PreImage) -> Result<String, &'static str> {
    match pre {
        PreImage::Absent => Ok(String::new()),
        PreImage::File { blob, size, .. } if *size <= MERGE_MAX => text(read_blob(store, blob)?),
        PreImage::File { .. } => Err("larger than a merge reads"),
        PreImage::Skipped { .. } => Err("a version of it was not stored"),
        _ => Err("not a regular file throughout"),
    }
}

fn read_blob(store: &Store, blob: &BlobId) -> Result<Vec<u8>, &'static str> {
    let mut bytes = Vec::new();
    store
        .blobs()
        .read_blob(blob, &mut |chunk| {
            bytes.extend_from_slice(chunk);
            Ok(())
        })
        .map_err(|_| "a version of it cannot be read from the store")?;
    Ok(bytes)
}

/// Bytes as text, when they are: UTF-8 without a NUL.
fn text(bytes: Vec<u8>) -> Result<String, &'static str> {
    if bytes.contains(&0) {
        return Err("binary");
    }
    String::from_utf8(bytes).map_err(|_| "binary")
}

/// The file at `path` now, as text.
fn read_now(root: BorrowedFd<'_>, path: &RelPath) -> Result<String, &'static str> {
    let parent = super::resolve::open_parent_raw(root, path).map_err(|_| "not reachable now")?;
    let name = path.file_name_cstring();
    let fd = sys::openat(
        parent.as_fd(),
        &name,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        0,
    )
    .map_err(|_| "not a file that can be read now")?;
    let st = sys::fstat(fd.as_fd()).map_err(|_| "not a file that can be read now")?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err("not a regular file now");
    }
    let limit = usize::try_from(MERGE_MAX).unwrap_or(usize::MAX);
    match sys::read_if_at_most(fd.as_fd(), limit) {
        Ok(Some(bytes)) => text(bytes),
        Ok(None) => Err("larger than a merge reads"),
        Err(_) => Err("not a file that can be read now"),
    }
}

/// The conflicting regions of a merge's output (its lines between `<<<<<<<` and `>>>>>>>`),
/// for the report.
fn conflict_hunks(conflicted: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in conflicted.lines() {
        if line.starts_with("<<<<<<<") {
            inside = true;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
        if line.starts_with(">>>>>>>") {
            inside = false;
        }
    }
    out
}

/// A unified diff from `old` to `new`, as the dry run shows a merge's result.
pub fn unified_diff(path: &RelPath, old: &str, new: &str) -> String {
    let name = crate::quote::quote_path(path.as_bytes());
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(text: &str, ours: bool) -> Span {
        Span {
            text: text.into(),
            ours,
        }
    }

    const BASE: &str = "one\ntwo\nthree\nfour\nfive\nsix\n";

    #[test]
    fn the_agents_lines_go_and_everyone_elses_stay() {
        // The agent changed line 1; then the user changed line 5; then the agent line 3.
        let a1 = "ONE\ntwo\nthree\nfour\nfive\nsix\n";
        let u = "ONE\ntwo\nthree\nfour\nFIVE\nsix\n";
        let now = "ONE\ntwo\nTHREE\nfour\nFIVE\nsix\n";
        let spans = [span(BASE, true), span(a1, false), span(u, true)];
        assert_eq!(
            revert(&spans, now).as_deref(),
            Ok("one\ntwo\nthree\nfour\nFIVE\nsix\n")
        );
        // Taking back the user's (as if the user were the agent asked for) keeps the agent's.
        let spans = [span(BASE, false), span(a1, true), span(u, false)];
        assert_eq!(
            revert(&spans, now).as_deref(),
            Ok("ONE\ntwo\nTHREE\nfour\nfive\nsix\n")
        );
    }

    #[test]
    fn an_edit_overlapping_anothers_later_edit_is_a_conflict_with_its_hunks() {
        let a1 = "ONE\ntwo\nthree\nfour\nfive\nsix\n";
        let now = "One, said the user\ntwo\nthree\nfour\nfive\nsix\n";
        let spans = [span(BASE, true), span(a1, false)];
        let conflicted = revert(&spans, now).expect_err("overlap");
        let hunks = conflict_hunks(&conflicted);
        assert!(hunks.starts_with("<<<<<<<"), "{hunks}");
        assert!(hunks.contains("One, said the user"), "{hunks}");
        assert!(hunks.contains("one\n"), "{hunks}");
        assert!(
            !hunks.contains("four"),
            "only the conflicting region: {hunks}"
        );
    }

    #[test]
    fn a_file_the_agent_created_and_another_appended_to_is_a_conflict() {
        // Every line is the agent's, and the other's line is next to them: diff3 (as git)
        // counts adjacent edits as overlapping, so nothing is guessed.
        let a = "generated 1\ngenerated 2\n";
        let now = "generated 1\ngenerated 2\nmy note\n";
        let spans = [span("", true), span(a, false)];
        assert!(revert(&spans, now).is_err());
    }

    #[test]
    fn binary_is_not_text() {
        assert_eq!(text(b"a\0b".to_vec()), Err("binary"));
        assert_eq!(text(vec![0xff, 0xfe]), Err("binary"));
        assert_eq!(text(b"fine\n".to_vec()).as_deref(), Ok("fine\n"));
    }
}
