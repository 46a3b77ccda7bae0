//! A case's steps: each operation as shell commands or the test process's own calls, then
//! the checks of a rewind.

use super::*;

impl Case {
    pub(super) fn new(template: &Template, xattrs: bool) -> Self {
        let mut host_dir = None;
        let m = Mounted::with(|d| {
            template.copy_into(d);
            host_dir = Some(std::fs::File::open(d).expect("open the folder before mounting"));
        });
        let host_dir = host_dir.expect("the setup ran");
        let host = PathBuf::from(format!("/proc/self/fd/{}", host_dir.as_raw_fd()));
        let start = Snap::take(&m.dir, &host);
        let turns = Turns::new(TurnRec {
            start,
            end: None,
            held_inos: BTreeSet::new(),
            held_paths: BTreeSet::new(),
        });
        Case {
            held: Vec::new(),
            readers: Vec::new(),
            m,
            _host_dir: host_dir,
            host,
            setup: template.name.clone(),
            turns,
            trace: vec!["// turn 1 (the mount)".to_string()],
            xattrs,
            stats: BTreeMap::new(),
            last_op: None,
        }
    }

    pub(super) fn snap(&self) -> Snap {
        Snap::take(&self.m.dir, &self.host)
    }

    pub(super) fn held_inos(&self) -> BTreeSet<u64> {
        self.held
            .iter()
            .filter_map(|(_, f)| f.metadata().ok().map(|md| md.ino()))
            .collect()
    }

    /// The paths of `snap` that name a held file, and the paths the held files were opened by.
    pub(super) fn held_paths(&self, snap: &Snap) -> BTreeSet<String> {
        let inos = self.held_inos();
        snap.ids
            .iter()
            .filter(|(_, id)| inos.contains(&id.ino))
            .map(|(p, _)| p.clone())
            .chain(self.held.iter().map(|(p, _)| p.clone()))
            .collect()
    }

    pub(super) fn current_rec(&mut self) -> &mut TurnRec {
        self.turns.current_mut()
    }

    /// Runs one step; `Err` with the differences when a rewind's checks fail. Panics (a
    /// command that could not run, a walk that failed) are turned into failures by `run`.
    pub(super) fn step(&mut self, step: &Op) -> Result<(), Vec<Diff>> {
        match step {
            Sh(s) => self.run_command(step, s),
            NextTurn(gap) => self.begin_turn(step, gap),
            Hold(p) => self.hold_writer(step, p),
            WriteLine(i, s) => match self.held.get_mut(usize::from(*i)) {
                Some((_, f)) => match f.write_all(format!("{s}\n").as_bytes()) {
                    Ok(()) => self.trace.push(format!("{step:?},")),
                    Err(e) => self.trace.push(format!("{step:?}, // {e}")),
                },
                None => self.trace.push(format!("{step:?}, // no such writer")),
            },
            CloseHeld(i) => self.release_writer(step, i),
            Rewind(k) => {
                self.trace.push(format!("{step:?},"));
                return self.rewind(*k);
            }
            RewindPaths(k, p) => {
                self.trace.push(format!("{step:?},"));
                return self.rewind_path(*k, p);
            }
            Undo => {
                self.trace.push(format!("{step:?},"));
                return self.undo_redo(undo_partial::Direction::Undo);
            }
            Redo => {
                self.trace.push(format!("{step:?},"));
                return self.undo_redo(undo_partial::Direction::Redo);
            }
            Read(p) => match std::fs::File::open(self.m.path(p)) {
                Ok(f) => {
                    self.readers.push(f);
                    self.trace.push(format!("{step:?},"));
                }
                Err(e) => self.trace.push(format!("{step:?}, // {e}")),
            },
            Settle => self.settle(step),
            _ => unimplemented!("the shell tier does not drive {step:?}"),
        }
        Ok(())
    }

    /// Runs a script in the mount, counting its exit status per kind of command.
    pub(super) fn run_command(&mut self, step: &Op, s: &str) {
        let out = self.m.sh_output(s);
        let kind = command_kind(s);
        let e = self.stats.entry(kind).or_default();
        if out.status.success() {
            e.0 += 1;
            self.trace.push(format!("{step:?},"));
        } else {
            e.1 += 1;
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err.lines().next().unwrap_or("").trim();
            self.trace.push(format!(
                "{step:?}, // exit {}: {first}",
                out.status.code().unwrap_or(-1)
            ));
        }
    }

    /// Snapshots the tree, then begins the turn `gap` above the highest used.
    pub(super) fn begin_turn(&mut self, step: &Op, gap: &u8) {
        let n = self.turns.next_number(*gap);
        let before = self.snap();
        self.current_rec().end = Some(before.clone());
        self.m.turn(n);
        self.trace.push(format!("{step:?}, // turn {n}"));
        let (held_inos, held_paths) = (self.held_inos(), self.held_paths(&before));
        self.turns.begin(
            n,
            TurnRec {
                start: before,
                end: None,
                held_inos,
                held_paths,
            },
        );
    }

    /// Opens `p` with `O_APPEND | O_CREAT` and holds the writer.
    pub(super) fn hold_writer(&mut self, step: &Op, p: &str) {
        let f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.m.path(p));
        match f {
            Ok(f) => {
                let ino = f.metadata().expect("fstat a held writer").ino();
                let rec = self.current_rec();
                rec.held_inos.insert(ino);
                rec.held_paths.insert((*p).to_string());
                self.held.push(((*p).to_string(), f));
                self.trace
                    .push(format!("{step:?}, // writer {}", self.held.len() - 1));
            }
            Err(e) => self.trace.push(format!("{step:?}, // {e}")),
        }
    }

    /// Closes held writer `i`.
    pub(super) fn release_writer(&mut self, step: &Op, i: &u8) {
        let i = usize::from(*i);
        if i < self.held.len() {
            self.held.remove(i);
            self.trace.push(format!("{step:?},"));
        } else {
            self.trace.push(format!("{step:?}, // no such writer"));
        }
    }

    /// Waits until the stager has stored every file it moved aside.
    pub(super) fn settle(&mut self, step: &Op) {
        let staged = self.host.join(".ckpt/staged");
        let start = Instant::now();
        let left = || std::fs::read_dir(&staged).map_or(0, |d| d.count());
        while left() > 0 {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the stager left {} files in .ckpt/staged for 20 s",
                left()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        self.trace.push(format!("{step:?},"));
    }

    pub(super) fn rewind(&mut self, k: u64) -> Result<(), Vec<Diff>> {
        let k_rec = self
            .turns
            .get(k)
            .unwrap_or_else(|| panic!("Rewind({k}): turn {k} is not live"));
        let want = k_rec.start.clone();
        let pre = self.snap();
        let untouched = self.untouched_since(k, &pre);
        let out = self.m.cli(&["rewind", &k.to_string()]);
        let mut diffs: Vec<Diff> = failed_command("rewind-exit", &format!("rewind {k}"), &out)
            .into_iter()
            .collect();
        let got = self.snap();
        diffs.extend(
            compare(&want, &got)
                .into_iter()
                .filter(|d| self.xattrs || d.kind != "xattr"),
        );
        diffs.extend(identity_diffs(k, &untouched, &pre, &got));
        diffs.extend(self.folder_diffs(k));

        self.last_op = Some((pre.clone(), got.clone()));
        let (held_inos, held_paths) = (self.held_inos(), self.held_paths(&got));
        self.turns.rewound(
            k,
            TurnRec {
                start: got,
                end: None,
                held_inos,
                held_paths,
            },
        );
        if diffs.is_empty() {
            Ok(())
        } else {
            diffs.insert(
                0,
                diff(
                    "",
                    format!(
                        "after Rewind({k}) ({} paths untouched in the rewound turns):",
                        untouched.len()
                    ),
                ),
            );
            Err(diffs)
        }
    }

    /// The paths no live turn >= k touched: the same inode, times and entry at the start and
    /// at the end of each of them, not held open, and sharing no inode with a touched path.
    pub(super) fn untouched_since(&self, k: u64, pre: &Snap) -> BTreeSet<String> {
        // The paths no live turn >= k touched: the same inode, times and entry at the start and
        // at the end of each of them. Left out: files the test held open for writing in those
        // turns (opening captures), and paths sharing their inode with a touched path in the
        // same snapshot (restoring the touched name rewrites the shared inode in place, as
        // documented; "the same snapshot", so that a recycled number is not taken for the
        // same file).
        let mut untouched: BTreeSet<String> = pre.ids.keys().cloned().collect();
        let mut held: BTreeSet<u64> = self.held_inos();
        let mut held_paths = self.held_paths(pre);
        let mut shared: Vec<(&Snap, BTreeSet<u64>)> = Vec::new();
        for rec in self.turns.since(k) {
            let end = rec.end.as_ref().unwrap_or(pre);
            let same = |p: &String| {
                rec.start.ids.get(p) == end.ids.get(p)
                    && rec.start.entries.get(p) == end.entries.get(p)
            };
            untouched.retain(same);
            for snap in [&rec.start, end] {
                let inos = snap
                    .ids
                    .iter()
                    .filter(|(p, _)| !same(p))
                    .map(|(_, id)| id.ino)
                    .collect();
                shared.push((snap, inos));
            }
            held.extend(&rec.held_inos);
            held_paths.extend(rec.held_paths.iter().cloned());
        }
        untouched.retain(|p| {
            !held.contains(&pre.ids[p].ino)
                && !held_paths.contains(p)
                && shared
                    .iter()
                    .all(|(snap, inos)| snap.ids.get(p).is_none_or(|id| !inos.contains(&id.ino)))
        });

        untouched
    }

    /// The folder below the mount against the folder through it, and `.ckpt/turn` after a
    /// rewind to `k`.
    pub(super) fn folder_diffs(&self, k: u64) -> Vec<Diff> {
        let mut diffs = Vec::new();
        let (host_tree, mount_tree) = (tree(&self.host, true), tree(&self.m.dir, true));
        if host_tree != mount_tree {
            let keys: BTreeSet<&String> = host_tree.keys().chain(mount_tree.keys()).collect();
            for p in keys {
                if host_tree.get(p) != mount_tree.get(p) {
                    diffs.push(diff(
                        "host-view",
                        format!(
                            "  {p}: below the mount {:?} / through it {:?}",
                            host_tree.get(p).map(short),
                            mount_tree.get(p).map(short)
                        ),
                    ));
                }
            }
        }
        let turn_file = std::fs::read_to_string(self.m.path(".ckpt/turn")).unwrap_or_default();
        if turn_file.trim() != k.to_string() {
            diffs.push(diff(
                "turn-file",
                format!("  .ckpt/turn reads {:?} after rewind {k}", turn_file.trim()),
            ));
        }

        diffs
    }

    /// The case so far as a `replay` call to paste into a regression test.
    pub(super) fn context(&self, seed: Option<u64>) -> String {
        let rerun = match seed {
            Some(s) => format!("seed {s} (CKPT_SHELL_SEED={s} reruns it)"),
            None => "replayed steps".to_string(),
        };
        format!(
            "shell_turns {rerun}:\nreplay(\n    {},\n    &[\n        {}\n    ],\n);\n",
            self.setup,
            self.trace.join("\n        ")
        )
    }

    /// Runs `step` and turns a check failure or a panic into a `Failure` naming the steps.
    pub(super) fn run(&mut self, step: &Op, seed: Option<u64>) -> Result<(), Failure> {
        match catch_unwind(AssertUnwindSafe(|| self.step(step))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(diffs)) => {
                let kinds = diffs
                    .iter()
                    .map(|d| d.kind)
                    .filter(|k| !k.is_empty())
                    .collect();
                let mut lines: Vec<&str> = Vec::new();
                let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
                for d in &diffs {
                    let n = per_kind.entry(d.kind).or_default();
                    *n += 1;
                    if *n <= 15 {
                        lines.push(&d.line);
                    }
                }
                let more: usize = per_kind.values().map(|n| n.saturating_sub(15)).sum();
                Err(Failure {
                    kinds,
                    report: format!(
                        "{}differences {}\n{}{}",
                        self.context(seed),
                        diffs.len() - 1,
                        lines.join("\n"),
                        if more > 0 {
                            format!("\n  ... and {more} more")
                        } else {
                            String::new()
                        }
                    ),
                })
            }
            Err(e) => {
                self.trace
                    .push(format!("// ^ panicked: {}", panic_text(&*e)));
                Err(Failure {
                    kinds: BTreeSet::from(["panic"]),
                    report: self.context(seed),
                })
            }
        }
    }
}

/// Paths untouched in the rewound turns that the rewind to `k` changed anyway.
pub(super) fn identity_diffs(
    k: u64,
    untouched: &BTreeSet<String>,
    pre: &Snap,
    got: &Snap,
) -> Vec<Diff> {
    let mut diffs = Vec::new();
    for p in untouched {
        let (before, after) = (pre.ids[p], got.ids.get(p));
        let Some(after) = after else {
            diffs.push(diff(
                "identity",
                format!("  {p}: untouched in turns >= {k}, removed by the rewind"),
            ));
            continue;
        };
        let mut what = Vec::new();
        if after.ino != before.ino {
            what.push(format!("inode {} -> {}", before.ino, after.ino));
        }
        if !before.dir && after.mtime != before.mtime {
            what.push("mtime changed".to_string());
        }
        if got.entries.get(p) != pre.entries.get(p) {
            what.push(format!(
                "{} -> {}",
                show(pre.entries.get(p)),
                show(got.entries.get(p))
            ));
        }
        if !what.is_empty() {
            diffs.push(diff(
                "identity",
                format!(
                    "  {p}: untouched in turns >= {k}, but the rewind changed it: {}",
                    what.join("; ")
                ),
            ));
        }
    }
    diffs
}

/// Short form of a node for the host-view comparison.
pub(super) fn short(n: &Node) -> String {
    match n {
        Node::File {
            mode,
            data,
            link_group,
        } => format!("file {mode:o} {} bytes group {link_group}", data.len()),
        n => format!("{n:?}"),
    }
}
