//! `prune`: retention. A prune that makes anything unrecoverable (a turn, an undo or redo step,
//! a rewound turn) shows what first and asks on a terminal, and needs `--yes` elsewhere;
//! `--dry-run` shows the same and changes nothing.

use super::{CliError, CliResult, Target};
use crate::engine::{PruneQuery, Query};
use crate::ipc::Request;
use crate::store::Store;
use crate::store::prune::{Loss, Policy, PruneReport, UndoHistory, Unrecoverable};
use crate::units::human_size;
use clap::Args;
use std::io::IsTerminal;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

/// `ckpt-mount prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Keep only this many of the newest turns (the current turn always stays); forgetting a
    /// turn forgets the undo and redo history too
    #[arg(long)]
    pub keep_turns: Option<usize>,
    /// Forget the oldest turns until the store fits in this size (K, M, G suffixes); a store
    /// over it only because of the undo and redo history keeps it (see --drop-undo)
    #[arg(long, value_parser = super::parse_size)]
    pub max_size: Option<u64>,
    /// Forget the undo and redo history (what `undo` and `redo` could still do, and the turns
    /// a rewind retired) even when no turn is forgotten; without it a prune that forgets no
    /// turn keeps that history and removes only the blobs no record names
    #[arg(long)]
    pub drop_undo: bool,
    /// Print what the prune would forget and free, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask before forgetting anything (asked only when stdin and stdout are a terminal;
    /// elsewhere a prune that forgets a turn, an undo or redo step or a rewound turn is refused
    /// without --yes)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

impl PruneArgs {
    /// The usage errors no folder is needed to know (see [`super::Cli::check`]).
    pub fn check(&self) -> CliResult {
        if self.keep_turns == Some(0) {
            return Err(CliError::usage("--keep-turns must be at least 1"));
        }
        Ok(())
    }

    fn policy(&self) -> Policy {
        Policy {
            keep_turns: self.keep_turns,
            max_size: self.max_size,
            undo: if self.drop_undo {
                UndoHistory::Drop
            } else {
                UndoHistory::Keep
            },
        }
    }
}

/// How many lost things the question before a prune lists; `--dry-run` lists them all.
const LISTED_BEFORE_ASKING: usize = 30;

/// Runs `prune` (after [`PruneArgs::check`]).
pub fn run(a: PruneArgs) -> CliResult {
    let mut pruner = Pruner::new(super::target(a.dir.clone())?, a.policy())?;
    if a.dry_run {
        let r = pruner.ask(Step::Preview)?;
        if a.json {
            print_json(&r);
        } else {
            print_preview(&r, None);
            println!("dry run, nothing changed: {}", sentence(&r, Tense::Would));
            for l in hints(&r) {
                println!("{l}");
            }
        }
        return Ok(());
    }
    let expect = if a.yes {
        None
    } else {
        let preview = pruner.ask(Step::Preview)?;
        let lost = preview.unrecoverable.clone();
        if !lost.is_empty() {
            let ask = !a.json && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
            if !ask {
                return Err(CliError::fail(refusal(&preview)));
            }
            print_preview(&preview, Some(LISTED_BEFORE_ASKING));
            println!("{}", sentence(&preview, Tense::Will));
            if !super::rewind::proceed()? {
                return Err(CliError::fail("cancelled: nothing changed"));
            }
        }
        Some(lost)
    };
    let r = pruner.ask(Step::Prune(expect))?;
    if a.json {
        print_json(&r);
    } else {
        for l in done(&r) {
            println!("{l}");
        }
    }
    Ok(())
}

fn print_json(r: &PruneReport) {
    println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
}

/// What is asked of the store.
enum Step {
    /// The plan, nothing changed.
    Preview,
    /// The prune, going ahead only if it loses what the preview said (when one was shown).
    Prune(Option<Unrecoverable>),
}

/// The folder pruned: through its daemon, or its store held open (and locked) between the
/// preview and the prune, so that nothing changes it in between.
enum Pruner {
    Mounted(PathBuf, Policy),
    Offline {
        root: OwnedFd,
        store: Box<Store>,
        name: String,
        policy: Policy,
    },
}

impl Pruner {
    fn new(t: Target, policy: Policy) -> Result<Self, CliError> {
        Ok(match t {
            Target::Mounted(folder) => Self::Mounted(folder, policy),
            Target::Offline(folder) => {
                let (root, store) = super::open_offline(&folder)?;
                Self::Offline {
                    root,
                    store: Box::new(store),
                    name: folder.display().to_string(),
                    policy,
                }
            }
        })
    }

    /// The report of `step`, or the one line of error.
    fn ask(&mut self, step: Step) -> Result<PruneReport, CliError> {
        let policy = match self {
            Self::Mounted(_, p) | Self::Offline { policy: p, .. } => *p,
        };
        let (dry_run, expect) = match step {
            Step::Preview => (true, None),
            Step::Prune(expect) => (false, expect),
        };
        let query = Query::Prune(PruneQuery {
            policy,
            dry_run,
            expect,
        });
        // A spinner on a terminal (silent otherwise): a prune that rewrites packs can take a
        // while.
        let spinner = (!dry_run).then(|| {
            let s = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            );
            s.set_message("pruning");
            s.enable_steady_tick(std::time::Duration::from_millis(120));
            s
        });
        let answer = match self {
            Self::Mounted(f, _) => super::ask_daemon(f, &Request::from(query)),
            Self::Offline {
                root, store, name, ..
            } => crate::engine::query(root.as_fd(), store, name, None, &query)
                .map_err(|e| CliError::fail(format!("{name}: {e}")))
                .and_then(|a| PruneReport::try_from(a).map_err(|e| CliError::fail(e.to_string()))),
        };
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        answer
    }
}

/// What the prune makes unrecoverable, one a line (at most `limit`, then how many more).
fn print_preview(r: &PruneReport, limit: Option<usize>) {
    let lines: Vec<String> = r.lost.iter().map(loss_line).collect();
    let shown = limit.unwrap_or(usize::MAX).min(lines.len());
    for l in &lines[..shown] {
        println!("{l}");
    }
    if shown < lines.len() {
        println!(
            "… and {} more (--dry-run lists everything)",
            lines.len() - shown
        );
    }
}

/// One thing lost, as the preview lists it.
fn loss_line(l: &Loss) -> String {
    let label =
        |label: &Option<String>| label.as_ref().map_or(String::new(), |l| format!(" {l:?}"));
    match l {
        Loss::Turn { turn, label: l } => format!("forget   turn {turn}{}", label(l)),
        Loss::Undo { op, text } => format!("no undo  #{op} {text}"),
        Loss::Redo { op, text } => format!("no redo  #{op} {text}"),
        Loss::RewoundTurn { turn, label: l, by } => format!(
            "lose     turn {turn}{}, rewound by #{by} (its undo would bring it back)",
            label(l)
        ),
    }
}

/// How a [`sentence`] speaks of the prune.
#[derive(Clone, Copy, PartialEq)]
enum Tense {
    /// A dry run: what it would do.
    Would,
    /// Before asking: what it will do.
    Will,
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What the prune forgets, counted (`2 turns and 3 undo steps`); empty when nothing.
fn forgotten(r: &PruneReport) -> String {
    let count = |f: fn(&Loss) -> bool| r.lost.iter().filter(|l| f(l)).count();
    let parts: Vec<String> = [
        (count(|l| matches!(l, Loss::Turn { .. })), "turn", "turns"),
        (
            count(|l| matches!(l, Loss::Undo { .. })),
            "undo step",
            "undo steps",
        ),
        (
            count(|l| matches!(l, Loss::Redo { .. })),
            "redo step",
            "redo steps",
        ),
        (
            count(|l| matches!(l, Loss::RewoundTurn { .. })),
            "rewound turn",
            "rewound turns",
        ),
    ]
    .into_iter()
    .filter(|(n, ..)| *n > 0)
    .map(|(n, one, many)| plural(n, one, many))
    .collect();
    match parts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// One sentence saying what the prune of report `r` forgets and frees.
fn sentence(r: &PruneReport, tense: Tense) -> String {
    let will = match tense {
        Tense::Would => "would",
        Tense::Will => "will",
    };
    let what = match (forgotten(r), r.undo_history) {
        (f, UndoHistory::Keep) if f.is_empty() => "keep every turn, undo and redo".to_string(),
        (f, UndoHistory::Drop) if f.is_empty() => "forget nothing".to_string(),
        (f, _) => format!("forget {f}"),
    };
    let blobs = match (r.removed_blobs, r.undo_history) {
        (0, UndoHistory::Keep) => "free nothing (every blob is named in the journal)".to_string(),
        (0, UndoHistory::Drop) if r.freed_bytes == 0 => {
            "free nothing (every blob is in use)".to_string()
        }
        (0, UndoHistory::Drop) => format!("free {} of the journal", human_size(r.freed_bytes)),
        (n, UndoHistory::Keep) => format!(
            "free {} ({} no record names)",
            human_size(r.freed_bytes),
            plural(n, "blob", "blobs")
        ),
        (n, UndoHistory::Drop) => format!(
            "free {} ({})",
            human_size(r.freed_bytes),
            plural(n, "blob", "blobs")
        ),
    };
    let size = format!("the store {will} be {}", human_size(r.store_bytes));
    match tense {
        Tense::Would => format!("the prune would {what}, and {blobs}; {size}"),
        Tense::Will if r.unrecoverable.is_empty() => {
            format!("The prune will {what}, and {blobs}; {size}.")
        }
        Tense::Will => {
            format!("The prune will {what}, and {blobs}; {size}. This cannot be undone.")
        }
    }
}

/// What a dry run adds: whether the store stays over `--max-size`, and what the other ways
/// to free space would free.
fn hints(r: &PruneReport) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(limit) = r.over_max_size {
        out.push(format!(
            "the store would still be over --max-size {}",
            human_size(limit)
        ));
    }
    if let Some(b) = r.with_drop_undo {
        out.push(format!(
            "with --drop-undo it would free {}, forgetting the undo and redo history",
            human_size(b)
        ));
    }
    if let Some(b) = r.keeping_one_turn {
        out.push(format!(
            "ckpt-mount prune --keep-turns 1 would free {}, forgetting every turn but the current one and the undo and redo history",
            human_size(b)
        ));
    }
    out
}

/// At most five numbers of `ids`, each after `prefix`, then how many more.
fn some_ids(ids: &[impl std::fmt::Display], prefix: &str) -> String {
    let mut s: Vec<String> = ids.iter().take(5).map(|i| format!("{prefix}{i}")).collect();
    if ids.len() > 5 {
        s.push(format!("and {} more", ids.len() - 5));
    }
    s.join(", ")
}

/// The one line that refuses a prune that would make something unrecoverable, where no
/// question can be asked.
fn refusal(r: &PruneReport) -> String {
    let u = &r.unrecoverable;
    let mut parts = Vec::new();
    if !u.dropped_turns.is_empty() {
        parts.push(format!(
            "forget {} ({})",
            plural(u.dropped_turns.len(), "turn", "turns"),
            some_ids(&u.dropped_turns, "")
        ));
    }
    if !u.lost_ops.is_empty() {
        parts.push(format!(
            "make {} impossible to undo or redo ({})",
            plural(u.lost_ops.len(), "operation", "operations"),
            some_ids(&u.lost_ops, "#")
        ));
    }
    if !u.lost_rewound_turns.is_empty() {
        parts.push(format!(
            "lose {} ({})",
            plural(u.lost_rewound_turns.len(), "rewound turn", "rewound turns"),
            some_ids(&u.lost_rewound_turns, "")
        ));
    }
    let what = match parts.as_slice() {
        [init @ .., last] if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => parts.join(""),
    };
    format!(
        "not pruned: the prune would {what}; pass --yes to prune, or --dry-run to see all it would forget"
    )
}

/// What a prune that ran prints.
fn done(r: &PruneReport) -> Vec<String> {
    // Turns and operation ids alike.
    fn list(v: &[impl std::fmt::Display]) -> String {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
    let removed = plural(r.removed_blobs, "blob", "blobs");
    let mut out = Vec::new();
    let dropped = &r.unrecoverable.dropped_turns;
    match r.undo_history {
        UndoHistory::Keep if r.removed_blobs == 0 => out.push(format!(
            "pruned nothing; kept [{}] and every undo and redo; every blob is named in the journal; the store is {}",
            list(&r.kept_turns),
            human_size(r.store_bytes)
        )),
        UndoHistory::Keep => out.push(format!(
            "pruned no turn; kept [{}] and every undo and redo; removed {removed} no record named, freed {}; the store is {}",
            list(&r.kept_turns),
            human_size(r.freed_bytes),
            human_size(r.store_bytes)
        )),
        UndoHistory::Drop => {
            out.push(format!(
                "pruned {}; kept [{}]; removed {removed}, freed {}; the store is {}",
                if dropped.is_empty() {
                    "no turn".to_string()
                } else {
                    format!("turns [{}]", list(dropped))
                },
                list(&r.kept_turns),
                human_size(r.freed_bytes),
                human_size(r.store_bytes)
            ));
            if !r.unrecoverable.lost_ops.is_empty() {
                out.push(format!(
                    "operations that can no longer be undone or redone: {}",
                    list(&r.unrecoverable.lost_ops)
                ));
            }
            if !r.unrecoverable.lost_rewound_turns.is_empty() {
                out.push(format!(
                    "rewound turns no undo can bring back any more: [{}]",
                    list(&r.unrecoverable.lost_rewound_turns)
                ));
            }
        }
    }
    if let Some(limit) = r.over_max_size {
        out.push(format!(
            "the store is still over --max-size {} (ckpt-mount prune --dry-run says what else would free space)",
            human_size(limit)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Turn;

    /// Turns numbered `ns`.
    fn turns(ns: impl IntoIterator<Item = u64>) -> Vec<Turn> {
        ns.into_iter().map(Turn::new).collect()
    }

    /// A prune of turns 1 and 2 (of 3) after a rewind to turn 3 from turn 4, with an undone
    /// relabel to redo.
    fn forgetting() -> PruneReport {
        PruneReport {
            dry_run: true,
            unrecoverable: Unrecoverable {
                dropped_turns: turns([1, 2]),
                lost_ops: vec![2, 3, 5, 6],
                lost_rewound_turns: turns([4]),
            },
            lost: vec![
                Loss::Turn {
                    turn: Turn::new(1),
                    label: Some("mounted".into()),
                },
                Loss::Turn {
                    turn: Turn::new(2),
                    label: Some("tab\tand \"quote\"".into()),
                },
                Loss::Undo {
                    op: 2,
                    text: "turn 2 begins (after turn 1)".into(),
                },
                Loss::Undo {
                    op: 3,
                    text: "turn 3 begins (after turn 2)".into(),
                },
                Loss::Undo {
                    op: 5,
                    text: "rewind to turn 3 (from turn 4) (restored 1, deleted 2)".into(),
                },
                Loss::Redo {
                    op: 6,
                    text: "label turn 3 \"x\"".into(),
                },
                Loss::RewoundTurn {
                    turn: Turn::new(4),
                    label: None,
                    by: 5,
                },
            ],
            kept_turns: turns([3]),
            undo_history: UndoHistory::Drop,
            removed_blobs: 7,
            freed_bytes: 3 << 20,
            store_bytes: 12 << 10,
            over_max_size: None,
            op: Some(8),
            with_drop_undo: None,
            keeping_one_turn: None,
        }
    }

    /// A prune that forgets nothing, over its `--max-size` because of the undo history.
    fn keeping() -> PruneReport {
        PruneReport {
            dry_run: true,
            kept_turns: turns([1, 2, 3]),
            undo_history: UndoHistory::Keep,
            removed_blobs: 1,
            freed_bytes: 2048,
            store_bytes: 5 << 20,
            over_max_size: Some(4 << 20),
            with_drop_undo: Some(3 << 20),
            keeping_one_turn: Some(4 << 20),
            ..PruneReport::default()
        }
    }

    /// Everything the CLI prints of report `r`, as each case prints it.
    fn texts(r: &PruneReport) -> String {
        let mut out = String::from("-- dry run\n");
        for l in r.lost.iter().map(loss_line) {
            out += &format!("{l}\n");
        }
        out += &format!("dry run, nothing changed: {}\n", sentence(r, Tense::Would));
        for l in hints(r) {
            out += &format!("{l}\n");
        }
        out += &format!("-- asked\n{}\n", sentence(r, Tense::Will));
        if !r.unrecoverable.is_empty() {
            out += &format!("-- refused\nckpt-mount: {}\n", refusal(r));
        }
        out += "-- done\n";
        for l in done(&PruneReport {
            dry_run: false,
            ..r.clone()
        }) {
            out += &format!("{l}\n");
        }
        out
    }

    /// `--drop-undo` alone: every turn kept, one undo step forgotten.
    fn dropping_undo() -> PruneReport {
        PruneReport {
            unrecoverable: Unrecoverable {
                lost_ops: vec![2],
                ..Unrecoverable::default()
            },
            lost: vec![Loss::Undo {
                op: 2,
                text: "turn 2 begins (after turn 1)".into(),
            }],
            kept_turns: turns([1, 2]),
            undo_history: UndoHistory::Drop,
            freed_bytes: 120,
            store_bytes: 900,
            op: Some(3),
            ..PruneReport::default()
        }
    }

    #[test]
    fn a_prune_says_what_it_forgets_and_frees() {
        insta::assert_snapshot!(format!(
            "{}\n{}\n{}",
            texts(&forgetting()),
            texts(&keeping()),
            texts(&dropping_undo())
        ));
    }

    #[test]
    fn a_refusal_lists_at_most_five_of_each() {
        let r = PruneReport {
            unrecoverable: Unrecoverable {
                dropped_turns: turns(1..=12),
                ..Unrecoverable::default()
            },
            ..PruneReport::default()
        };
        assert_eq!(
            refusal(&r),
            "not pruned: the prune would forget 12 turns (1, 2, 3, 4, 5, and 7 more); pass --yes to prune, or --dry-run to see all it would forget"
        );
    }

    #[test]
    fn nothing_to_prune_says_so() {
        let r = PruneReport {
            kept_turns: turns([1]),
            store_bytes: 300,
            ..PruneReport::default()
        };
        assert_eq!(
            sentence(&r, Tense::Would),
            "the prune would keep every turn, undo and redo, and free nothing (every blob is named in the journal); the store would be 300 B"
        );
        assert_eq!(
            done(&r),
            vec![
                "pruned nothing; kept [1] and every undo and redo; every blob is named in the journal; the store is 300 B"
            ]
        );
    }
}
