//! Generated steps resolved against the model just before they run, and which resolved
//! operations are valid for the tree they meet.

use super::*;

impl Case {
    pub(super) fn entries(&self) -> Vec<&'static str> {
        self.model.tree.keys().map(|k| intern(k)).collect()
    }

    pub(super) fn files(&self) -> Vec<&'static str> {
        self.model
            .tree
            .iter()
            .filter(|(_, e)| matches!(e, MEntry::File(_)))
            .map(|(k, _)| intern(k))
            .collect()
    }

    /// A new name in the directory `dir` picks (among those not too deep and `ok`), trying the
    /// names in order from `name`.
    pub(super) fn new_name(
        &self,
        dir: u8,
        name: u8,
        ok: impl Fn(&str) -> bool,
    ) -> Option<&'static str> {
        let mut dirs: Vec<&str> = vec![""];
        dirs.extend(
            self.model
                .tree
                .iter()
                .filter(|(_, e)| matches!(e, MEntry::Dir { .. }))
                .map(|(k, _)| k.as_str()),
        );
        dirs.retain(|d| depth(d) < MAX_DEPTH && ok(d));
        let d = pick(dir, &dirs)?;
        (0..NAMES.len())
            .map(|i| join(d, NAMES[(usize::from(name) + i) % NAMES.len()]))
            .find(|p| !self.model.tree.contains_key(p))
            .map(|p| intern(&p))
    }

    /// Locality, as an agent has it: an even selector picks among the (up to) three candidates
    /// touched last, an odd one among all.
    pub(super) fn local(&self, sel: u8, cands: Vec<&'static str>) -> Option<&'static str> {
        if sel % 2 == 1 {
            return pick(sel / 2, &cands);
        }
        let mut recent = cands;
        recent.sort_by_key(|p| std::cmp::Reverse(self.touched.get(*p).copied().unwrap_or(0)));
        recent.truncate(3);
        pick(sel / 2, &recent)
    }

    /// An even selector picks one of the last two turns, an odd one any turn.
    pub(super) fn turn_sel(&self, sel: u8) -> u64 {
        let turns: Vec<u64> = self.turns.live();
        let from = if sel.is_multiple_of(2) {
            &turns[turns.len().saturating_sub(2)..]
        } else {
            &turns[..]
        };
        from[usize::from(sel / 2) % from.len()]
    }

    pub(super) fn resolve(&self, g: &G) -> Option<Op> {
        match g {
            G::Create { .. }
            | G::EditLine { .. }
            | G::Write { .. }
            | G::Append { .. }
            | G::Replace { .. }
            | G::Truncate { .. }
            | G::Mkdir { .. }
            | G::Symlink { .. }
            | G::Link { .. } => self.resolve_made(g),
            G::Unlink { .. }
            | G::UnlinkHeld { .. }
            | G::Rmdir { .. }
            | G::Rename { .. }
            | G::Exchange { .. } => self.resolve_removed(g),
            G::Chmod { .. } | G::SetXattr { .. } | G::RemoveXattr { .. } => self.resolve_attrs(g),
            G::Open { .. }
            | G::WriteHeld { .. }
            | G::TruncHeld { .. }
            | G::CloseHeld { .. }
            | G::Forget => self.resolve_held(g),
            G::NextTurn { .. }
            | G::Rewind { .. }
            | G::RewindPaths { .. }
            | G::Undo
            | G::Redo
            | G::Relabel { .. }
            | G::RestoreAfter { .. }
            | G::As { .. }
            | G::RewindAgent { .. } => self.resolve_history(g),
        }
    }

    /// A step that makes or writes a file, a directory or a link.
    fn resolve_made(&self, g: &G) -> Option<Op> {
        Some(match *g {
            G::Create {
                dir,
                name,
                seed,
                hold,
            } => {
                let p = self.new_name(dir, name, |_| true)?;
                if hold {
                    CreateHeld(p, seed)
                } else {
                    Create(p, seed)
                }
            }
            G::Write { file, seed } => Write(self.local(file, self.files())?, seed),
            G::EditLine { file, line, seed } => {
                EditLine(self.local(file, self.files())?, line, seed)
            }
            G::Append { file, seed } => Append(self.local(file, self.files())?, seed),
            G::Replace { file, seed } => Replace(self.local(file, self.files())?, seed),
            G::Truncate { file, len } => Truncate(self.local(file, self.files())?, len),
            G::Mkdir { dir, name, mode } => Mkdir(
                self.new_name(dir, name, |_| true)?,
                modes()[usize::from(mode) % modes().len()],
            ),
            G::Symlink { target, dir, name } => Symlink(
                TARGETS[usize::from(target) % TARGETS.len()],
                self.new_name(dir, name, |_| true)?,
            ),
            G::Link { .. } if !self.links => return None,
            G::Link { file, dir, name } => Link(
                self.local(file, self.files())?,
                self.new_name(dir, name, |_| true)?,
            ),
            _ => unreachable!("another group: {g:?}"),
        })
    }

    /// A step that removes or moves an entry.
    fn resolve_removed(&self, g: &G) -> Option<Op> {
        let m = &self.model;
        Some(match *g {
            G::Unlink { entry } => {
                let c: Vec<&'static str> = self
                    .entries()
                    .into_iter()
                    .filter(|p| !m.is_dir(p))
                    .collect();
                Unlink(self.local(entry, c)?)
            }
            G::UnlinkHeld { n } => {
                let h = pick(n, &self.held.iter().map(|h| h.ino).collect::<Vec<_>>())?;
                Unlink(intern(m.names_of(h).first()?))
            }
            G::Rmdir { entry } => {
                let c: Vec<&'static str> = self
                    .entries()
                    .into_iter()
                    .filter(|p| m.is_dir(p) && !m.has_children(p))
                    .collect();
                Rmdir(pick(entry, &c)?)
            }
            G::Rename { src, dst, new } => {
                let a = self.local(src, self.entries())?;
                let a_dir = m.is_dir(a);
                let onto: Vec<&'static str> = self
                    .entries()
                    .into_iter()
                    .filter(|b| m.rename_ok(a, b))
                    .collect();
                let b = match (new, pick(dst, &onto)) {
                    (None, Some(b)) => b,
                    _ => {
                        let (dir, name) = new.unwrap_or((dst, 0));
                        self.new_name(dir, name, |d| !(a_dir && under(d, a)))?
                    }
                };
                Rename(a, b)
            }
            G::Exchange { a, b } => {
                let a = pick(a, &self.entries())?;
                let with: Vec<&'static str> = self
                    .entries()
                    .into_iter()
                    .filter(|b| m.exchange_ok(a, b))
                    .collect();
                Exchange(a, pick(b, &with)?)
            }
            _ => unreachable!("another group: {g:?}"),
        })
    }

    /// A step that changes a mode or an xattr.
    fn resolve_attrs(&self, g: &G) -> Option<Op> {
        let m = &self.model;
        Some(match *g {
            G::Chmod { entry, mode } => {
                let c: Vec<&'static str> = self
                    .entries()
                    .into_iter()
                    .filter(|p| !matches!(m.tree.get(*p), Some(MEntry::Symlink(_))))
                    .collect();
                Chmod(pick(entry, &c)?, modes()[usize::from(mode) % modes().len()])
            }
            G::SetXattr { entry, name, seed } => {
                let c: Vec<&'static str> = self
                    .entries()
                    .into_iter()
                    .filter(|p| m.xattrs(p).is_some())
                    .collect();
                SetXattr(pick(entry, &c)?, name, seed)
            }
            G::RemoveXattr { entry } => {
                let c: Vec<(&'static str, u8)> = self
                    .entries()
                    .into_iter()
                    .flat_map(|p| {
                        (0..XNAMES.len() as u8)
                            .filter(move |n| {
                                m.xattrs(p)
                                    .is_some_and(|x| x.contains_key(XNAMES[usize::from(*n)]))
                            })
                            .map(move |n| (p, n))
                    })
                    .collect();
                let (p, n) = pick(entry, &c)?;
                RemoveXattr(p, n)
            }
            _ => unreachable!("another group: {g:?}"),
        })
    }

    /// A step on the held handles, or the kernel's forget.
    fn resolve_held(&self, g: &G) -> Option<Op> {
        Some(match *g {
            G::Open { file } => Open(self.local(file, self.files())?),
            G::WriteHeld { n, off, seed } => {
                if self.held.is_empty() {
                    return None;
                }
                WriteHeld(n, off, seed)
            }
            G::TruncHeld { n, len } => {
                if self.held.is_empty() {
                    return None;
                }
                TruncHeld(n, len)
            }
            G::CloseHeld { n } => {
                if self.held.is_empty() {
                    return None;
                }
                CloseHeld(n)
            }
            G::Forget if !forgets() => return None,
            G::Forget => Forget,
            _ => unreachable!("another group: {g:?}"),
        })
    }

    /// A step on the history: turns, rewinds, undo, redo, labels, actors.
    fn resolve_history(&self, g: &G) -> Option<Op> {
        Some(match *g {
            G::NextTurn { gap } => NextTurn(gap),
            G::Rewind { turn } => Rewind(self.turn_sel(turn)),
            G::RewindPaths { turn, entry } => {
                let to = self.turn_sel(turn);
                let mut c: BTreeSet<&'static str> = self.entries().into_iter().collect();
                c.extend(self.turns.start(to).tree.entries.keys().map(|k| intern(k)));
                RewindPaths(to, self.local(entry, c.into_iter().collect())?)
            }
            G::Undo => Undo,
            G::Redo => Redo,
            G::Relabel { turn, seed } => Relabel(self.turn_sel(turn), seed),
            G::RestoreAfter { back } => RestoreAfter(back),
            G::As { actor } => As(actor),
            G::RewindAgent {
                turn,
                who,
                conflicts,
            } => RewindAgent(self.turn_sel(turn), who, conflicts),
            _ => unreachable!("another group: {g:?}"),
        })
    }

    /// Whether a resolved operation is valid for the tree it meets now.
    pub(super) fn valid(&self, op: &Op) -> bool {
        let m = &self.model;
        match *op {
            Create(p, _) | CreateHeld(p, _) | Mkdir(p, _) | Symlink(_, p) => m.can_make(p),
            Write(p, _)
            | Append(p, _)
            | Replace(p, _)
            | Truncate(p, _)
            | Open(p)
            | EditLine(p, ..) => m.file(p).is_some(),
            Link(a, b) => m.file(a).is_some() && m.can_make(b),
            Unlink(p) => m.tree.contains_key(p) && !m.is_dir(p),
            Rmdir(p) => !p.is_empty() && m.is_dir(p) && !m.has_children(p),
            Rename(a, b) => m.rename_ok(a, b),
            Exchange(a, b) => m.exchange_ok(a, b),
            Chmod(p, _) => {
                m.tree.contains_key(p) && !matches!(m.tree.get(p), Some(MEntry::Symlink(_)))
            }
            SetXattr(p, n, _) => usize::from(n) < XNAMES.len() && m.xattrs(p).is_some(),
            RemoveXattr(p, n) => m
                .xattrs(p)
                .is_some_and(|x| x.contains_key(XNAMES[usize::from(n) % XNAMES.len()])),
            WriteHeld(..) | TruncHeld(..) | CloseHeld(..) => !self.held.is_empty(),
            // 0: a step, within the current turn (there is one from the mount on).
            NextTurn(_) => true,
            Rewind(t) | RewindPaths(t, _) | Relabel(t, _) => self.turns.get(t).is_some(),
            RewindAgent(t, ..) => self.turns.get(t).is_some() && self.procs.is_some(),
            As(_) => self.procs.is_some(),
            Forget | Undo | Redo | RestoreAfter(_) => true,
            // Made through the core as `Mkdir` and `Unlink`/`Rmdir` steps, never as one.
            MkdirAll(_) | RemoveAll(_) => false,
            // The shell tier's: no shell and no process of the test's own here.
            Hold(_) | WriteLine(..) | Read(_) | Sh(_) | Settle => false,
        }
    }
}
