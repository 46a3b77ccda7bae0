//! A case's own state: making one, what it touched, the held handles, and one step.

use super::*;

impl Case {
    pub(super) fn new(fx: &Fixture) -> Self {
        zero_umask();
        let core = Core::new(fx);
        let host = observe(&core.root);
        let seen = Some(host.clone());
        let root_mode = std::fs::metadata(&core.root)
            .expect("stat folder")
            .permissions()
            .mode()
            & 0o7777;
        let turns = Turns::new_at(
            key_of(Turn::new(1)),
            TurnRec {
                tree: host.tree,
                inos: host.inos,
                ids: BTreeMap::new(),
                start: 0,
                label: Some("mounted".into()),
            },
        );
        Self {
            core,
            vfs: Vfs::default(),
            model: Model {
                root_mode,
                ..Model::default()
            },
            held: Vec::new(),
            turns,
            undo_stack: Vec::new(),
            redo_stack: Vec::new(),
            step: 0,
            touched: HashMap::new(),
            trace: Vec::new(),
            who: caller(),
            actor: Actor::User,
            history: Vec::new(),
            procs: None,
            xattrs: check_xattrs(),
            links: true,
            seen,
            moments: Vec::new(),
        }
        .with_first_moment()
    }

    pub(super) fn fs(&self) -> &CkptFs {
        self.core.fs()
    }

    pub(super) fn replay(&self) -> String {
        format!(
            "replay (fixture ops, current turn {}):\n    {}",
            turn_of(self.turns.current),
            self.trace.join("\n    ")
        )
    }

    pub(super) fn touch(&mut self, p: &str) {
        self.touched.insert(p.to_string(), self.step);
    }

    pub(super) fn touch_inode(&mut self, id: u64) {
        for p in self.model.names_of(id) {
            self.touch(&p);
        }
    }

    /// Marks every path whose state, inode or hard-link group differs between two observations.
    pub(super) fn touch_changes(&mut self, before: &Observed, after: &Observed) {
        let keys: BTreeSet<&String> = before
            .tree
            .entries
            .keys()
            .chain(after.tree.entries.keys())
            .collect();
        for k in keys {
            if before.tree.entries.get(k) != after.tree.entries.get(k)
                || before.inos.get(k) != after.inos.get(k)
                || before.tree.group_of(k) != after.tree.group_of(k)
            {
                self.touched.insert(k.clone(), self.step);
            }
        }
    }

    pub(super) fn step(&mut self, op: Op) -> Result<(), Failure> {
        if !self.valid(&op) {
            self.trace.push(format!("{op:?}, // skipped: invalid here"));
            count(op.kind(), false);
            return Ok(());
        }
        self.step += 1;
        count(op.kind(), true);
        let note = match op {
            NextTurn(g) => format!(" // turn {}", turn_of(self.next_key(g))),
            _ => String::new(),
        };
        self.trace
            .push(format!("{:?},{note}", op.map(|p| p, Literal)));
        // Every step below may change the host.
        let seen = self.seen.take();
        let before = match (&seen, op.kind()) {
            (_, "As") => None,
            (Some(s), _) => Some(s.tree.clone()),
            (None, _) => Some(observe(&self.core.root).tree),
        };
        let history = match op {
            Rewind(k) => Some(self.rewind(k, seen)),
            RewindPaths(k, p) => Some(self.rewind_paths(k, p, seen)),
            Undo => Some(self.undo_redo(false, seen)),
            Redo => Some(self.undo_redo(true, seen)),
            Relabel(t, seed) => Some(self.relabel(t, seed)),
            RewindAgent(k, who, conflicts) => Some(self.rewind_agent(k, (who, conflicts), seen)),
            NextTurn(g) => Some(self.next_turn(self.next_key(g))),
            RestoreAfter(back) => Some(self.op_restore(back, seen)),
            As(agent) => {
                self.act_as(agent);
                self.seen = seen;
                return Ok(());
            }
            _ => None,
        };
        if let Some(done) = history {
            done?;
            self.check_turns()?;
            return self.note_moment(op, before);
        }
        let paths = self.changed_paths(op);
        self.mutate(op)?;
        let (step, actor) = (self.step, self.actor);
        let line = match op {
            EditLine(_, l, _) => Some(l % LINES),
            _ => None,
        };
        self.history.extend(paths.into_iter().map(|path| Change {
            step,
            path,
            actor,
            line,
        }));
        // The stager stores staged pre-images at its own pace; settle them now so that the
        // inode numbers they free are free at the same point of every run.
        drop(self.fs().capturer().lock());
        let host = observe(&self.core.root);
        if let Some(d) = tree_diff(&self.model.snapshot(), &host.tree, true) {
            return fail(
                "passthrough",
                format!("after {op:?} the folder differs from the model:\n{d}"),
            );
        }
        self.model
            .sync(&host, &self.held.iter().map(|h| h.ino).collect::<Vec<_>>())
            .or_else(|e| fail("passthrough", format!("after {op:?}: {e}")))?;
        self.seen = Some(host);
        Ok(())
    }

    pub(super) fn expect_absent(&mut self, parent: NodeId, name: &str) -> Result<(), Failure> {
        match self.fs().lookup(parent, OsStr::new(name)) {
            Err(e) if e.is(libc::ENOENT) => Ok(()),
            Err(e) => fail("core-error", format!("lookup of new name {name:?}: {e}")),
            Ok(e) => {
                self.vfs.got(e.node);
                fail(
                    "passthrough",
                    format!("{name:?} exists on the host but not in the model"),
                )
            }
        }
    }

    /// The parent's node of `p` (walked) and `p`'s name.
    pub(super) fn parent_node(
        &mut self,
        p: &'static str,
    ) -> Result<(NodeId, &'static str), Failure> {
        let parent = vfs(self.vfs.node(self.core.fs(), parent(p)))?;
        Ok((parent, file_name(p)))
    }

    pub(super) fn node(&mut self, p: &str) -> Result<NodeId, Failure> {
        vfs(self.vfs.node(self.core.fs(), p))
    }

    pub(super) fn held_at(&self, n: u8) -> usize {
        usize::from(n) % self.held.len()
    }

    pub(super) fn write_model(&mut self, id: u64, off: usize, data: &[u8]) {
        if data.is_empty() {
            return; // a write of nothing changes nothing, not even the size
        }
        let i = self.model.inodes.get_mut(&id).expect("model inode");
        if i.data.len() < off + data.len() {
            i.data.resize(off + data.len(), 0);
        }
        i.data[off..off + data.len()].copy_from_slice(data);
        self.touch_inode(id);
    }

    pub(super) fn resize_model(&mut self, id: u64, len: usize) {
        self.model
            .inodes
            .get_mut(&id)
            .expect("model inode")
            .data
            .resize(len, 0);
        self.touch_inode(id);
    }

    pub(super) fn close_held(&mut self, i: usize) {
        let h = self.held.remove(i);
        self.fs().release(h.fh);
    }

    pub(super) fn hold(&mut self, h: Held) {
        if self.held.len() >= MAX_HELD {
            self.close_held(0);
        }
        self.held.push(h);
    }

    /// The end of every case: a rewind to the turn `end` picks, its undo, then a rewind to 1.
    pub(super) fn finish(&mut self, end: u8) -> Result<(), Failure> {
        self.trace.push("// end".into());
        self.step(Rewind(self.turn_sel(end)))?;
        self.step(Undo)?;
        self.step(Redo)?;
        self.step(Undo)?;
        self.step(Rewind(1))
    }
}
