//! `op restore ID` against the model: every operation of the log noted with the folder just
//! after it (the model's own snapshot, taken when it ended) and whether that moment can be
//! given back; a step `RestoreAfter(k)` restores the `k`-th most recent one and checks the whole
//! tree against that snapshot, the turns unchanged, then records it as an operation `undo`
//! takes back like a partial rewind (`turns.rs` checks the undo and the redo).

use super::*;

/// One operation of the log, as the model knows it.
#[derive(Clone)]
pub(super) struct Moment {
    /// Its id in the core's log (the model follows the log's order: the newest id appears
    /// once per operation the core recorded).
    pub(super) id: u64,
    /// The folder just after it, when the model says it can be given back: not for a relabel,
    /// nor for an undo or redo of a turn switch or a relabel (they begin no capture epoch).
    pub(super) after: Option<Tree>,
    /// The model inode of each file path then.
    pub(super) ids: BTreeMap<String, u64>,
}

impl Case {
    /// The case's first operation: the store created with turn 1, the folder as mounted.
    pub(super) fn with_first_moment(mut self) -> Self {
        let tree = self.turns.start(key_of(Turn::new(1))).tree.clone();
        self.moments.push(Moment {
            id: 1,
            after: Some(tree),
            ids: BTreeMap::new(),
        });
        self
    }

    /// The id of the core's newest operation.
    fn newest_op(&self) -> Option<u64> {
        let store = self.fs().capturer().lock();
        store.index().ops.ops.last().map(|o| o.id)
    }

    /// After a step on the history that passed its checks: the operation it recorded, if it
    /// recorded one, noted with the folder just after it; and `op show` of it lists exactly
    /// the paths whose state (kind, bytes, mode, target) differs from `before`, the folder just
    /// before the step.
    pub(super) fn note_moment(&mut self, op: Op, before: Option<Tree>) -> Result<(), Failure> {
        let Some(id) = self.newest_op() else {
            return Ok(());
        };
        if self.moments.last().is_some_and(|m| m.id >= id) {
            return Ok(()); // refused, or nothing to do: no operation
        }
        let restorable = match op {
            Relabel(..) => false,
            // What was reverted is on the other stack now.
            Undo => self.redo_stack.last().is_some_and(|u| u.folder),
            Redo => self.undo_stack.last().is_some_and(|u| u.folder),
            _ => true,
        };
        let host = self.seen.take().unwrap_or_else(|| observe(&self.core.root));
        if let Some(before) = &before {
            self.check_op_show(id, before, &host.tree)?;
        }
        self.moments.push(Moment {
            id,
            after: restorable.then(|| host.tree.clone()),
            ids: self.model.file_ids(),
        });
        self.seen = Some(host);
        Ok(())
    }

    /// `op show ID` of the operation just recorded lists the paths whose state changed from
    /// `before` to `after` (xattrs, owners and hard-link sharing are not what it shows).
    fn check_op_show(&self, id: u64, before: &Tree, after: &Tree) -> Result<(), Failure> {
        let keys: BTreeSet<&String> = before.entries.keys().chain(after.entries.keys()).collect();
        let want: BTreeSet<String> = keys
            .into_iter()
            .filter(|k| {
                before.entries.get(*k).map(|s| &s.kind) != after.entries.get(*k).map(|s| &s.kind)
            })
            .cloned()
            .collect();
        let shown = {
            let store = self.fs().capturer().lock();
            ckpt_mount::info::op_show::op_show(&store, self.fs().root(), id)
        };
        let got: BTreeSet<String> = match shown {
            Ok(s) => s.changes.iter().map(|c| c.path.to_string()).collect(),
            Err(e) => return fail("op-show", format!("op show #{id}: {e}")),
        };
        if got != want {
            return fail(
                "op-show",
                format!("op show #{id} lists {got:?}; the model says {want:?} changed"),
            );
        }
        Ok(())
    }

    /// `op restore` of the `back`-th most recent operation: the folder exactly as just after
    /// it, previewed exactly, the turns as they were; or refused with nothing changed when the
    /// model says its moment cannot be given back.
    pub(super) fn op_restore(&mut self, back: u8, seen: Option<Observed>) -> Result<(), Failure> {
        let before = seen.unwrap_or_else(|| observe(&self.core.root));
        let i = self.moments.len() - 1 - usize::from(back) % self.moments.len();
        let m = self.moments[i].clone();
        let what = format!("op restore #{}", m.id);
        let run = |mode| rewind::Request::RestoreOp { id: m.id, mode };
        let preview = self
            .fs()
            .rewind(&run(rewind::Mode::Preview), &|_, _| {})
            .map(|r| r.report);
        let r = self
            .fs()
            .rewind(&run(rewind::Mode::Apply), &|_, _| {})
            .map(|r| r.report);
        let Some(want) = &m.after else {
            return self.op_restore_refused(&what, &before, r);
        };
        let r = match r {
            Ok(r) => r,
            Err(e) => return fail("core-error", format!("{what}: {e}")),
        };
        Self::report_ok(&what, &r)?;
        Self::preview_was_exact(&what, preview, &r)?;
        let after = observe(&self.core.root);
        if let Some(d) = tree_diff(want, &after.tree, self.xattrs) {
            return fail(
                "op-restore-content",
                format!("{what}: the folder is not as just after the operation:\n{d}"),
            );
        }
        self.push_folder_op(&before, &after);
        self.adopt(&after, &m.ids)?;
        self.seen = Some(after);
        Ok(())
    }

    /// An `op restore` of an operation with no moment to give back: refused, nothing changed.
    fn op_restore_refused(
        &mut self,
        what: &str,
        before: &Observed,
        r: Result<rewind::Report, RewindError>,
    ) -> Result<(), Failure> {
        match r {
            Err(RewindError::Unrestorable(_)) => {}
            Err(e) => return fail("core-error", format!("{what}: {e}")),
            Ok(_) => {
                return fail(
                    "op-restore-refused",
                    format!("{what} ran; the model says the operation has no moment to restore"),
                );
            }
        }
        let after = observe(&self.core.root);
        if let Some(d) = tree_diff(&before.tree, &after.tree, true) {
            return fail(
                "op-restore-refused",
                format!("a refused {what} changed the folder:\n{d}"),
            );
        }
        self.seen = Some(after);
        Ok(())
    }
}

/// Found by the property before a partial rewind ended its capture epoch at its `op_done`: the
/// partial rewinds of `b` and `a` captured them for the current turn, so their next changes
/// (`Create("a")` made `a` again) were not captured, and nothing recorded `a` as the second
/// partial rewind left it: `op restore` of it found `a` "as it is now".
#[test]
fn regression_op_restore_of_a_partial_rewind_whose_path_changed_after_it() {
    on_tmp(&[
        NextTurn(1), // turn 2
        Relabel(1, 0),
        Create("c", 0),
        Rename("c", "a"),
        Create("b", 0),
        RewindPaths(1, "b"),
        Create("b", 0),
        RewindPaths(1, "a"),
        Create("a", 0),
        Create("c", 0),
        RestoreAfter(5), // the second partial rewind
    ]);
}

/// The same, an `op restore` being the partial operation: after `op restore` of turn 3's
/// start, `b` was made again without a capture, and restoring that `op restore` kept it.
#[test]
fn regression_op_restore_of_an_op_restore_whose_path_changed_after_it() {
    on_tmp(&[
        NextTurn(1), // turn 2
        Relabel(1, 0),
        Relabel(1, 0),
        NextTurn(1), // turn 3
        Mkdir("b", 0o644),
        NextTurn(1),     // turn 4
        RestoreAfter(4), // the start of turn 3
        Mkdir("b", 0o644),
        RestoreAfter(0), // the op restore just before
    ]);
}

/// Every kind of moment, and the refusals: a relabel, and an undo of a turn switch, have no
/// moment to give back; a turn switch's, a partial rewind's, a rewind's (undone or not), an
/// undo's and a redo's of a folder change, and an `op restore`'s do. (`RestoreAfter(k)` counts
/// back over the operations the core recorded, newest first.)
#[test]
fn op_restore_of_each_kind_of_operation_matches_the_model() {
    on_tmp(&[
        Create("a", 1),
        Mkdir("d", 0o755),
        NextTurn(1), // turn 2
        Write("a", 2),
        Create("d/x", 3),
        Relabel(2, 4),
        RestoreAfter(0), // the relabel: refused
        NextTurn(1),     // turn 3
        Unlink("a"),
        Symlink("d", "l"),
        RewindPaths(2, "a"),
        Write("a", 5),
        Rewind(2),
        Undo,
        Create("b", 6),
        RestoreAfter(1),
        RestoreAfter(2),
        Undo,
        Redo,
        RestoreAfter(6),
        NextTurn(1),     // turn 4
        Undo,            // of the turn switch
        RestoreAfter(0), // refused
        RestoreAfter(11),
        Undo,
    ]);
}

/// Found at 2000 cases: after the undo (#3) gave back `a` and `b`, one inode, `b`'s xattr was
/// set (a capture of `b` alone), and a later rewind saved both names. `op restore` of the
/// undo took `a`'s own first record (that save, with the xattr) for the group: the targets
/// were in path order, and a group is restored from its first target. In journal order, the
/// oldest record of the inode (`b`'s capture, before the xattr) is first.
#[test]
fn regression_op_restore_takes_a_hard_link_group_from_its_oldest_record() {
    on_tmp(&[
        Create("a", 0),
        Link("a", "b"),
        Rewind(1),
        Undo,
        SetXattr("b", 0, 0),
        NextTurn(1), // turn 2
        Rewind(2),
        Rewind(1),
        NextTurn(1), // turn 3
        Relabel(1, 0),
        RestoreAfter(5), // the undo
    ]);
}
