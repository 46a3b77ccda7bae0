//! The checks of the steps that take an operation back or rewind only part of the folder:
//! `Undo` and `Redo` after a rewind (the folder exactly as just before it, then as just after
//! it), and `RewindPath` (`rewind N -- PATH`): the path and what lies below it as at the start
//! of turn N, and nothing else changed (every other path as it was, an ancestor that stands
//! keeps its mode, owner and xattrs, one that was missing is made as it was then), except
//! other names of a hard link a rewound path holds, which follow it, as documented.

use super::{Case, Diff, Entry, Snap, compare, diff, failed_command, show};
use std::collections::{BTreeMap, BTreeSet};

/// Which operation an `Op::Undo` or `Op::Redo` takes back or does again.
#[derive(Clone, Copy)]
pub(super) enum Direction {
    Undo,
    Redo,
}

/// Whether `q` is `p` or lies below it.
fn under(q: &str, p: &str) -> bool {
    q == p || (q.starts_with(p) && q.as_bytes().get(p.len()) == Some(&b'/'))
}

/// Whether `q` is a proper ancestor of `p`.
fn above(q: &str, p: &str) -> bool {
    p.starts_with(q) && p.as_bytes().get(q.len()) == Some(&b'/')
}

impl Case {
    /// `undo` or `redo` of the last rewind: the folder must be exactly as just before it (undo)
    /// or just after it (redo), hard-link groups included.
    pub(super) fn undo_redo(&mut self, way: Direction) -> Result<(), Vec<Diff>> {
        let Some((before, after)) = self.last_op.clone() else {
            return Ok(());
        };
        let (cmd, want) = match way {
            Direction::Undo => ("undo", &before),
            Direction::Redo => ("redo", &after),
        };
        let out = self.m.cli(&[cmd]);
        let mut diffs: Vec<Diff> = failed_command("undo-exit", cmd, &out).into_iter().collect();
        let got = self.snap();
        diffs.extend(
            compare(want, &got)
                .into_iter()
                .filter(|d| self.xattrs || d.kind != "xattr")
                .map(|d| Diff {
                    kind: if d.kind == "xattr" { "xattr" } else { "undo" },
                    line: d.line,
                }),
        );
        if diffs.is_empty() {
            return Ok(());
        }
        diffs.insert(0, diff("", format!("after {cmd} of the last rewind:")));
        Err(diffs)
    }

    /// `rewind k -- p`, then the checks above.
    pub(super) fn rewind_path(&mut self, k: u64, p: &str) -> Result<(), Vec<Diff>> {
        let then = self
            .turns
            .get(k)
            .unwrap_or_else(|| panic!("RewindPath({k}): turn {k} is not live"))
            .start
            .clone();
        let pre = self.snap();
        let out = std::process::Command::new(super::common::bin())
            .args(["rewind", &k.to_string(), "-y", "--dir"])
            .arg(&self.m.dir)
            .args(["--", p])
            .output()
            .expect("run rewind -- PATH");
        let mut diffs: Vec<Diff> =
            failed_command("rewind-exit", &format!("rewind {k} -- {p}"), &out)
                .into_iter()
                .collect();
        let got = self.snap();
        diffs.extend(partial_diffs(&pre, &then, &got, p, self.xattrs));
        self.last_op = Some((pre, got));
        if diffs.is_empty() {
            return Ok(());
        }
        diffs.insert(0, diff("", format!("after rewind {k} -- {p}:")));
        Err(diffs)
    }
}

/// The differences between what `rewind -- p` left (`got`) and what it must leave, from the
/// folder before it (`pre`) and at the start of the turn (`then`).
fn partial_diffs(pre: &Snap, then: &Snap, got: &Snap, p: &str, xattrs: bool) -> Vec<Diff> {
    // Inodes a rewound path holds now or held then: their other names may follow it.
    let rewound: BTreeSet<u64> = pre
        .ids
        .iter()
        .chain(then.ids.iter())
        .filter(|(q, id)| under(q, p) && !id.dir)
        .map(|(_, id)| id.ino)
        .collect();
    let keys: BTreeSet<&String> = pre
        .entries
        .keys()
        .chain(then.entries.keys())
        .chain(got.entries.keys())
        .collect();
    let mut out = Vec::new();
    for q in keys {
        let now = got.entries.get(q);
        let allowed = allowed_states(pre, then, p, q, &rewound);
        let same = |want: &Option<&Entry>| match (want, now) {
            (Some(w), Some(g)) if !xattrs => w.node == g.node && (w.uid, w.gid) == (g.uid, g.gid),
            (w, g) => *w == g,
        };
        if !allowed.iter().any(same) {
            let what = if under(q, p) {
                "rewound"
            } else if above(q, p) {
                "an ancestor"
            } else {
                "not asked for"
            };
            out.push(diff(
                "partial",
                format!(
                    "  {q} ({what}): expected {} / actual {}",
                    allowed
                        .iter()
                        .map(|e| show(*e))
                        .collect::<Vec<_>>()
                        .join(" or "),
                    show(now)
                ),
            ));
        }
    }
    out.extend(group_diffs(then, got, p));
    out
}

/// The states `q` may be in after `rewind -- p`: as at the start of the turn below `p`; an
/// ancestor that stands keeps its state; a file sharing an inode with a rewound path may hold
/// its own state or the rewound one; anything else is as it was before.
fn allowed_states<'a>(
    pre: &'a Snap,
    then: &'a Snap,
    p: &str,
    q: &str,
    rewound: &BTreeSet<u64>,
) -> Vec<Option<&'a Entry>> {
    if under(q, p) {
        vec![then.entries.get(q)]
    } else if above(q, p) {
        match pre.entries.get(q) {
            // A directory that stands keeps everything it has.
            Some(e) if matches!(e.node, super::Node::Dir { .. }) => vec![Some(e)],
            _ => vec![then.entries.get(q)],
        }
    } else if pre.ids.get(q).is_some_and(|id| rewound.contains(&id.ino)) {
        let mut v = vec![pre.entries.get(q)];
        v.extend(
            then.entries
                .iter()
                .filter(|(r, _)| under(r, p))
                .filter(|(r, _)| {
                    let ino = pre.ids.get(q).map(|id| id.ino);
                    [then.ids.get(*r), pre.ids.get(*r)]
                        .iter()
                        .any(|id| id.map(|id| id.ino) == ino)
                })
                .map(|(_, e)| Some(e)),
        );
        v
    } else {
        vec![pre.entries.get(q)]
    }
}

/// Hard-link groups wholly below `p` at the start of the turn that are not one inode again.
fn group_diffs(then: &Snap, got: &Snap, p: &str) -> Vec<Diff> {
    let mut out = Vec::new();
    // Hard-link groups wholly below `p` at the start of the turn are one inode again.
    let got_groups: BTreeMap<&String, &BTreeSet<String>> = got
        .links
        .iter()
        .flat_map(|g| g.iter().map(move |m| (m, g)))
        .collect();
    for g in &then.links {
        let inside: BTreeSet<&String> = g.iter().filter(|m| under(m, p)).collect();
        if inside.len() < 2 {
            continue;
        }
        let first = inside.iter().next().and_then(|m| got_groups.get(*m));
        if !first.is_some_and(|fg| inside.iter().all(|m| fg.contains(*m))) {
            out.push(diff(
                "links",
                format!("  hard-link group {inside:?} (below {p}) not one inode again"),
            ));
        }
    }
    out
}
