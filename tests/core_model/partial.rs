//! Partial rewinds (`rewind_paths`) and what they must leave as it was.

use super::*;

impl Case {
    /// Rewinds `scope` to the start of turn `k` after its preview (`what` names it in a
    /// failure): the run must succeed with every path restored, and change exactly what the
    /// preview said.
    pub(super) fn previewed_rewind(
        &self,
        what: &str,
        k: u64,
        scope: rewind::Scope,
    ) -> Result<rewind::Report, Failure> {
        let req = |mode| rewind::Request::To {
            to: turn_of(k),
            scope: scope.clone(),
            mode,
        };
        let preview = self
            .fs()
            .rewind(&req(rewind::Mode::Preview), &|_, _| {})
            .map(|r| r.report);
        let r = match self.fs().rewind(&req(rewind::Mode::Apply), &|_, _| {}) {
            Ok(r) => r.report,
            Err(e) => return fail("core-error", format!("{what}: {e}")),
        };
        Self::report_ok(what, &r)?;
        Self::preview_was_exact(what, preview, &r)?;
        Ok(r)
    }

    pub(super) fn rewind_paths(
        &mut self,
        k: u64,
        o: &'static str,
        seen: Option<Observed>,
    ) -> Result<(), Failure> {
        let before = seen.unwrap_or_else(|| observe(&self.core.root));
        let rel = RelPath::new(o.as_bytes()).expect("a valid path");
        let what = format!("rewind_paths({k}, {o:?})");
        self.previewed_rewind(&what, k, rewind::Scope::Paths(vec![rel]))?;
        let after = observe(&self.core.root);
        let x = expect_partial(&before, &self.model.file_ids(), self.turns.start(k), o);
        let lines = self.partial_diffs(&x, &after);
        if !lines.is_empty() {
            return fail(
                "partial-content",
                format!(
                    "{what}: not (only) that path as at the start of turn {k}:\n{}",
                    lines.join("\n")
                ),
            );
        }
        let moved = moved_outside(&x, &before, &after);
        if !moved.is_empty() {
            return fail(
                "partial-inode",
                format!(
                    "{what}: paths outside it are on other inodes:\n{}",
                    moved.join("\n")
                ),
            );
        }
        self.record_partial(k, o, before, after)
    }

    /// The differences between the folder after a partial rewind and what it must hold: the
    /// exact paths' states, the states allowed to paths sharing an inode with a rewound one,
    /// and the hard-link groups of the paths checked exactly.
    fn partial_diffs(&self, x: &PartialExpect, after: &Observed) -> Vec<String> {
        let strip = |s: &Snap| Snap {
            kind: s.kind.clone(),
            xattrs: if self.xattrs {
                s.xattrs.clone()
            } else {
                Xattrs::new()
            },
        };
        let mut lines = Vec::new();
        let keys: BTreeSet<&String> = x
            .exact
            .keys()
            .chain(x.either.keys())
            .chain(after.tree.entries.keys())
            .collect();
        for p in keys {
            let got = after.tree.entries.get(p);
            if let Some(allowed) = x.either.get(p) {
                if !got.is_some_and(|g| allowed.iter().any(|a| a.kind == g.kind)) {
                    let a: Vec<String> = allowed.iter().map(ToString::to_string).collect();
                    lines.push(format!(
                        "  {p} (shares an inode with a rewound path): expected one of [{}] / actual {}",
                        a.join(", "),
                        show(got)
                    ));
                }
                continue;
            }
            let want = x.exact.get(p);
            if want.map(strip) != got.map(strip) {
                lines.push(format!(
                    "  {p}: expected {} / actual {}",
                    show(want),
                    show(got)
                ));
            }
        }
        let checked: BTreeSet<&String> = x.exact.keys().collect();
        let got_groups: BTreeSet<BTreeSet<String>> = after
            .tree
            .groups
            .iter()
            .map(|g| g.iter().filter(|p| checked.contains(p)).cloned().collect())
            .filter(|g: &BTreeSet<String>| g.len() > 1)
            .collect();
        if got_groups != x.groups {
            lines.push(format!(
                "  hard-link groups (of the paths checked exactly): expected {:?} / actual {got_groups:?}",
                x.groups
            ));
        }
        lines
    }

    /// A partial rewind that passed its checks: what it changed, its undo record, and the
    /// model taken from the host.
    fn record_partial(
        &mut self,
        k: u64,
        o: &'static str,
        before: Observed,
        after: Observed,
    ) -> Result<(), Failure> {
        self.push_folder_op(&before, &after);
        // What it may have recorded (more than it did: only ever read as "maybe not the agent's
        // alone"): it captures a directory it restores with everything below it, so all below
        // the topmost directory above `o` (or below `o`).
        let top = ancestors(o).first().copied().unwrap_or(o);
        let paths = self.paths_below(k, &[top], &before, &after);
        self.daemon_changed(paths);
        let hint = self.turns.start(k).ids.clone();
        self.adopt(&after, &hint)?;
        self.seen = Some(after);
        Ok(())
    }
}

/// Paths outside a partial rewind that must have kept their inode and did not.
fn moved_outside(x: &PartialExpect, before: &Observed, after: &Observed) -> Vec<String> {
    x.same_inode
        .iter()
        .filter(|p| after.inos.get(*p) != before.inos.get(*p))
        .map(|p| {
            format!(
                "  {p}: inode {:?} before, {:?} now",
                before.inos.get(p),
                after.inos.get(p)
            )
        })
        .collect()
}

/// Paths on the same inode in both observations.
pub(super) fn kept_inodes(before: &Observed, after: &Observed) -> BTreeMap<String, HKey> {
    before
        .inos
        .iter()
        .filter(|(p, ino)| after.inos.get(*p) == Some(ino))
        .map(|(p, ino)| (p.clone(), *ino))
        .collect()
}

pub(super) fn parent_path(p: &str) -> &str {
    parent(p)
}

/// What a partial rewind of `o` to a turn whose start was `t` must leave, from the tree before
/// it (`c`).
pub(super) struct PartialExpect {
    /// Paths whose state is known exactly (xattrs aside, unless checked).
    pub(super) exact: BTreeMap<String, Snap>,
    /// Files sharing an inode with a rewound path, now or at the target turn: either state.
    pub(super) either: BTreeMap<String, Vec<Snap>>,
    /// Hard-link groups among the `exact` paths.
    pub(super) groups: BTreeSet<BTreeSet<String>>,
    /// Paths that must keep their inode.
    pub(super) same_inode: BTreeSet<String>,
}

pub(super) fn expect_partial(
    c: &Observed,
    c_ids: &BTreeMap<String, u64>,
    turn: &TurnRec,
    o: &str,
) -> PartialExpect {
    let cur = &c.tree;
    let t = &turn.tree;
    let closure: BTreeSet<String> = cur
        .entries
        .keys()
        .chain(t.entries.keys())
        .filter(|p| under(p, o))
        .cloned()
        .collect();
    let mut exact: BTreeMap<String, Snap> = cur
        .entries
        .iter()
        .filter(|(p, _)| !closure.contains(*p))
        .map(|(p, s)| (p.clone(), s.clone()))
        .collect();
    for p in &closure {
        if let Some(s) = t.entries.get(p) {
            exact.insert(p.clone(), s.clone());
        }
    }
    let (above, above_kept) = dirs_above(o, t, &mut exact);
    let either = shared_with_rewound(&closure, &above, c_ids, turn, cur, &mut exact);
    let outside: BTreeSet<String> = exact
        .keys()
        .filter(|p| !closure.contains(*p) && !above.contains(*p))
        .cloned()
        .collect();
    let restrict = |g: &BTreeSet<String>, to: &BTreeSet<String>| -> BTreeSet<String> {
        g.iter().filter(|p| to.contains(*p)).cloned().collect()
    };
    let groups = t
        .groups
        .iter()
        .map(|g| restrict(g, &closure))
        .chain(cur.groups.iter().map(|g| restrict(g, &outside)))
        .filter(|g| g.len() > 1)
        .collect();
    let mut same_inode = outside;
    same_inode.extend(above_kept);
    PartialExpect {
        exact,
        either,
        groups,
        same_inode,
    }
}

/// The directories above `o` that were directories at the target turn's start: those that
/// stand now are kept (their state in `exact` unchanged), the others made as they were then.
/// Returns (all of them, those kept).
fn dirs_above(
    o: &str,
    t: &Tree,
    exact: &mut BTreeMap<String, Snap>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    // The directories above `o` that were directories then are directories again: one that
    // stands now keeps its mode, extended attributes and inode (nobody asked to rewind it);
    // one missing (or something else now) is made as it was then.
    let mut above: BTreeSet<String> = BTreeSet::new();
    let mut above_kept: BTreeSet<String> = BTreeSet::new();
    for a in ancestors(o) {
        let Some(then) = t.entries.get(a) else {
            break;
        };
        let Kind::Dir { mode } = &then.kind else {
            break;
        };
        above.insert(a.to_string());
        match exact.get(a) {
            Some(Snap {
                kind: Kind::Dir { .. },
                ..
            }) => {
                above_kept.insert(a.to_string());
            }
            _ => {
                exact.insert(
                    a.to_string(),
                    Snap {
                        kind: Kind::Dir { mode: *mode },
                        xattrs: then.xattrs.clone(),
                    },
                );
            }
        }
    }
    (above, above_kept)
}

/// Files outside the rewound paths (and the directories above them) that are, now, the inode
/// a rewound path is now or was then: they may hold either state, so they leave `exact`.
fn shared_with_rewound(
    closure: &BTreeSet<String>,
    above: &BTreeSet<String>,
    c_ids: &BTreeMap<String, u64>,
    turn: &TurnRec,
    cur: &Tree,
    exact: &mut BTreeMap<String, Snap>,
) -> BTreeMap<String, Vec<Snap>> {
    let t = &turn.tree;
    // Files that are, now, the inode a rewound path is now or was then: either state.
    let rewound: HashSet<u64> = closure
        .iter()
        .flat_map(|p| [c_ids.get(p), turn.ids.get(p)])
        .flatten()
        .copied()
        .collect();
    let mut either: BTreeMap<String, Vec<Snap>> = BTreeMap::new();
    for (q, id) in c_ids {
        if closure.contains(q) || above.contains(q) || !rewound.contains(id) {
            continue;
        }
        let mut allowed = vec![cur.entries[q].clone()];
        allowed.extend(
            closure
                .iter()
                .filter(|p| c_ids.get(*p) == Some(id) || turn.ids.get(*p) == Some(id))
                .filter_map(|p| t.entries.get(p).cloned()),
        );
        either.insert(q.clone(), allowed);
        exact.remove(q);
    }
    either
}
