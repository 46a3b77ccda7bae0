//! `rewind`: restore the folder to the start of a turn. `--dry-run` previews what the run would
//! change in the folder as it is now; on a terminal the run shows that preview first and asks.

use super::{CliError, CliResult, Target};
use crate::ids::Turn;
use crate::ipc::Request;
use crate::relpath::RelPath;
use crate::rewind::{self, Conflicts, Failure, PathActors, ReportJson};
use crate::store::Store;
use crate::units::human_size;
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

/// `ckpt-mount rewind`.
#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The turn whose start to return to (default: the current turn; with --agent NAME, the
    /// latest turn that agent began): N, -K (K turns before the current one), @TIME (the turn
    /// current then, local time: @10:42, @"2026-12-04 10:42") or /TEXT (the newest turn whose
    /// label contains TEXT); `diff`, `show`, `cat` and `restore` also take N#K, a turn rewind
    /// #K retired, as `log` lists it
    #[arg(value_name = "N", value_parser = super::moment::parse, allow_negative_numbers = true)]
    pub turn: Option<crate::moment::Spec>,
    /// Print what the rewind would change in the folder as it is now, and change nothing
    /// (exit code 1 when something could not be restored, or the disk lacks the room the run
    /// needs)
    #[arg(long)]
    pub dry_run: bool,
    /// Bring back the state from just before the last rewind
    #[arg(long, conflicts_with = "turn")]
    pub undo: bool,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Do not ask before changing the folder (asked only when stdin and stdout are a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// List every path the rewind changed (on a terminal the first 30 are listed, then a count;
    /// into a pipe or a file every path is)
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Rewind too every other mounted folder where the prompt that began turn N began a turn
    /// (an agent working across several folders): each goes back to the start of its turn of
    /// that prompt, after one question for all of them
    #[arg(long, requires = "turn", conflicts_with_all = ["undo", "agent", "paths"])]
    pub all_folders: bool,
    /// Rewind only what agents changed since the start of the turn: without NAME every agent's
    /// changes (commands under `ckpt-mount run`, agents whose hook is installed), with NAME
    /// (repeatable) that agent's alone, other agents counting as other processes. Paths only
    /// they changed are restored, paths others changed are kept, and paths both changed are
    /// conflicts, listed with who did what (see --conflicts). NAME is a name `ckpt-mount
    /// agents` lists: `claude-code` picks every Claude Code session, `claude-code:1f3a` one
    #[arg(
        long,
        value_name = "NAME",
        num_args = 0..=1,
        conflicts_with_all = ["undo", "paths"]
    )]
    pub agent: Option<Vec<String>>,
    /// With --agent, what to do with a path both the agent and another process changed:
    /// keep it as it is now (nobody's change is lost), or rewind it too (the other
    /// processes' changes to it go)
    #[arg(long, value_name = "WHAT", requires = "agent", default_value = "keep")]
    pub conflicts: ConflictsArg,
    /// Rewind only these paths (and what is below them), relative to the folder or absolute
    /// inside it; other paths and the turn history stay as they are
    #[arg(last = true, conflicts_with = "undo")]
    pub paths: Vec<PathBuf>,
}

/// `--conflicts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConflictsArg {
    /// Leave paths both changed as they are
    Keep,
    /// Rewind paths both changed too
    Rewind,
    /// Take back the agent's lines of a text file both changed, keeping everyone else's
    /// (overlapping edits and binary files are kept whole)
    Merge,
}

impl From<ConflictsArg> for rewind::Conflicts {
    fn from(c: ConflictsArg) -> Self {
        match c {
            ConflictsArg::Keep => Self::Keep,
            ConflictsArg::Rewind => Self::Rewind,
            ConflictsArg::Merge => Self::Merge,
        }
    }
}

impl RewindArgs {
    /// The usage errors no folder is needed to know (see [`super::Cli::check`]).
    pub fn check(&self) -> CliResult {
        if self.turn == Some(crate::moment::Spec::Turn(Turn::new(0))) {
            return Err(CliError::usage("turns start at 1"));
        }
        Ok(())
    }
}

/// How many paths the question before a rewind lists; `--dry-run` lists them all.
const LISTED_BEFORE_ASKING: usize = 30;

/// How many changed paths a rewind's report lists on a terminal (a rewind of 100,000 paths
/// would otherwise scroll its summary away); `--verbose`, or output into a pipe, lists them all.
const LISTED_ON_A_TERMINAL: usize = 30;

/// Runs `rewind` (after [`RewindArgs::check`]).
pub fn run(a: RewindArgs) -> CliResult {
    if a.all_folders {
        return super::together::rewind(&a);
    }
    let (t, paths) = super::target_with_paths(a.dir.clone(), &a.paths)?;
    // No turn given, on a terminal: the user picks one from the list (src/cli/picker.rs).
    // The turns as `log` lists them, read once for the picker, the moment and the
    // conversations.
    let history = super::moment::History::new(&t);
    let picked = super::picker::turn_for(&a, &history)?;
    let before = super::conversations::before(&history, &a);
    let agent = a.agent.map(|names| rewind::AgentScope {
        agents: rewind::Agents::from_names(names),
        conflicts: rewind::Conflicts::from(a.conflicts),
    });
    let turn = history.resolve(a.turn.as_ref(), crate::moment::Use::Rewind)?;
    // A name other than the number itself is said in the report (`--json`: `spec`).
    let spec = a
        .turn
        .as_ref()
        .filter(|s| !matches!(s, crate::moment::Spec::Turn(_)))
        .map(crate::moment::Spec::text);
    let turn = picked.or(turn.map(|m| m.turn));
    drop(history);
    let mut rewinder = Rewinder::new(t, turn, a.undo, paths, agent)?;
    let ask = !a.yes
        && !a.json
        && !a.dry_run
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal();
    if ask {
        let preview = rewinder.run(true, &progress_bar())?;
        let Some(r) = preview.report else {
            return Err(CliError::fail(preview.error.unwrap_or_default()));
        };
        if !confirm(&r)? {
            return Err(CliError::fail("cancelled: nothing changed"));
        }
    }
    let bar = progress_bar();
    // A dry run changes nothing, so Ctrl-C may end it as it ends any command.
    let keep_going =
        (!a.dry_run).then(|| super::interrupt::KeepGoing::start(rewinder.running(), bar.clone()));
    let answer = rewinder.run(a.dry_run, &bar)?;
    drop(keep_going);
    let Some(mut r) = answer.report else {
        return Err(CliError::fail(answer.error.unwrap_or_default()));
    };
    r.spec = spec;
    r.conversations = super::conversations::back(before.as_ref(), &r);
    print_report(&r, a.json, listed(a.verbose));
    if !a.json {
        super::conversations::print(&r.conversations);
    }
    if let Some(line) = no_room(&r) {
        return Err(CliError::fail(line));
    }
    let failed = &r.failed;
    match failed.first() {
        None => Ok(()),
        Some(first) if a.dry_run => {
            let n = failed.len();
            let more = if n > 1 {
                "; and more, listed above"
            } else {
                ""
            };
            Err(CliError::fail(format!(
                "{n} {} cannot be restored ({}: {}{more})",
                paths_word(n as u64),
                first.path,
                first.reason
            )))
        }
        Some(_) => Err(CliError::fail("some paths could not be restored")),
    }
}

/// Shows the preview `r` and asks; `Ok(true)` to go on. An empty preview asks nothing.
pub(super) fn confirm(r: &ReportJson) -> Result<bool, CliError> {
    if show_plan(r) { proceed() } else { Ok(true) }
}

/// Shows the preview `r` as the question before a run does; whether there is anything to ask
/// about (not when the run changes nothing, or is refused before changing anything).
pub(super) fn show_plan(r: &ReportJson) -> bool {
    if r.refused || no_room(r).is_some() {
        // The run is refused before it changes anything, and says why.
        return false;
    }
    let changes = r.restored.len() + r.deleted.len() + r.failed.len();
    if changes == 0 {
        print_agent(r);
        println!("{}", sentence(r, Tense::Nothing));
        return false;
    }
    print_preview(r, Some(LISTED_BEFORE_ASKING));
    println!("{}", sentence(r, Tense::Will));
    true
}

/// A dry run's one line when the disks lack the room the run needs (the run would be refused
/// before changing anything): the space needed and free, the largest files the rewound turns
/// created and what to do. `None` when it fits (or the report says nothing of space).
pub(super) fn no_room(r: &ReportJson) -> Option<String> {
    let space = r.space.as_ref()?;
    (!space.fits).then(|| {
        format!(
            "the run would be refused before changing anything: {}",
            space.shortfall()
        )
    })
}

/// Asks `Proceed? [y/N]` on the terminal; `Ok(true)` only for `y` or `yes` (anything else,
/// Esc, an empty line or the end of input is no).
pub(super) fn proceed() -> Result<bool, CliError> {
    print!("Proceed? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::fail(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// What the daemon or the offline rewind answered: the report (`None` when the rewind did not
/// start) and the one line of error, if any.
pub(super) struct Answer {
    pub(super) report: Option<ReportJson>,
    pub(super) error: Option<String>,
}

/// The rewind asked for, run through the daemon of a mounted folder or on the store of an
/// unmounted one (kept open, and locked, between the preview and the run).
pub(super) enum Rewinder {
    Mounted {
        folder: PathBuf,
        to: Option<Turn>,
        undo: bool,
        paths: Vec<RelPath>,
        agent: Option<rewind::AgentScope>,
    },
    Offline {
        folder: PathBuf,
        root: OwnedFd,
        store: Box<Store>,
        /// The request, its mode set for each run.
        req: rewind::Request,
    },
}

impl Rewinder {
    pub(super) fn new(
        t: Target,
        to: Option<Turn>,
        undo: bool,
        paths: Vec<RelPath>,
        agent: Option<rewind::AgentScope>,
    ) -> Result<Self, CliError> {
        Ok(match t {
            Target::Mounted(folder) => Self::Mounted {
                folder,
                to,
                undo,
                paths,
                agent,
            },
            Target::Offline(folder) => {
                let (root, store) = super::open_offline(&folder)?;
                let fields = rewind::Fields {
                    to,
                    undo,
                    paths,
                    agent,
                };
                let req = fields
                    .request(store.index(), rewind::Mode::Apply)
                    .map_err(|e| CliError::fail(e.to_string()))?;
                Self::Offline {
                    folder,
                    root,
                    store: Box::new(store),
                    req,
                }
            }
        })
    }

    /// What a Ctrl-C during the run says is running, and where.
    pub(super) fn running(&self) -> super::interrupt::Running {
        let (folder, undo, in_daemon) = match self {
            Self::Mounted { folder, undo, .. } => (folder, *undo, true),
            Self::Offline { folder, req, .. } => (
                folder,
                matches!(req, rewind::Request::UndoLast { .. }),
                false,
            ),
        };
        let what = if undo { "undo" } else { "rewind" };
        super::interrupt::Running::new(what, folder, in_daemon)
    }

    /// Runs the rewind (a preview when `dry_run`), showing its progress on `bar`.
    pub(super) fn run(
        &mut self,
        dry_run: bool,
        bar: &indicatif::ProgressBar,
    ) -> Result<Answer, CliError> {
        let answer = match self {
            Self::Mounted {
                folder,
                to,
                undo,
                paths,
                agent,
            } => {
                let req = Request::Rewind {
                    to: *to,
                    dry_run,
                    undo: *undo,
                    paths: paths.clone(),
                    agent: agent.as_ref().map(|a| a.conflicts),
                    agents: agent
                        .as_ref()
                        .map(|a| a.agents.names().to_vec())
                        .unwrap_or_default(),
                };
                let answer = crate::ipc::call_with_progress(folder, &req, &mut |done, total| {
                    bar.set_length(total);
                    bar.set_position(done);
                })
                .map_err(|e| super::call_failed(folder, e))?;
                Answer {
                    report: answer.data,
                    error: answer.error,
                }
            }
            Self::Offline {
                root, store, req, ..
            } => {
                let progress = |done: usize, total: usize| {
                    bar.set_length(total as u64);
                    bar.set_position(done as u64);
                };
                let mode = rewind::Mode::from_dry_run(dry_run);
                let req = req.clone().with_mode(mode);
                let max_blob = crate::capture::DEFAULT_MAX_BLOB;
                let result = rewind::run(root.as_fd(), store, &req, max_blob, &progress);
                match result {
                    Ok(report) => Answer {
                        report: Some(ReportJson::from(report)),
                        error: None,
                    },
                    Err(e) => Answer {
                        report: None,
                        error: Some(e.to_string()),
                    },
                }
            }
        };
        bar.finish_and_clear();
        Ok(answer)
    }
}

/// A bar on stderr when it is a terminal; drawing nothing otherwise.
pub(super) fn progress_bar() -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("rewinding {bar:40} {pos}/{len} paths")
    {
        bar.set_style(style);
    }
    bar
}

/// One failure as a report line's end: the path (quoted) and why.
fn failure(f: &Failure) -> String {
    format!("{}: {}", f.path, f.reason)
}

/// How many changed paths a report lists: all with `--verbose` or into a pipe or a file, else
/// [`LISTED_ON_A_TERMINAL`].
pub(super) fn listed(verbose: bool) -> Option<usize> {
    if verbose || !std::io::stdout().is_terminal() {
        None
    } else {
        Some(LISTED_ON_A_TERMINAL)
    }
}

/// Prints a rewind's report: the changed paths (at most `listed`, then how many more), every
/// failure, and the summary line.
pub(super) fn print_report(r: &ReportJson, json: bool, listed: Option<usize>) {
    if json {
        super::print_json(r);
        return;
    }
    if r.dry_run {
        print_preview(r, None);
        println!("dry run, nothing changed: {}", sentence(r, Tense::Would));
        return;
    }
    print_agent(r);
    let changed: Vec<String> = r
        .restored
        .iter()
        .map(|p| format!("restored {p}"))
        .chain(r.deleted.iter().map(|p| format!("deleted  {p}")))
        .collect();
    let shown = listed.unwrap_or(usize::MAX).min(changed.len());
    for l in &changed[..shown] {
        println!("{l}");
    }
    if shown < changed.len() {
        println!(
            "… and {} more changed (--verbose lists every path)",
            changed.len() - shown
        );
    }
    // Failures are always listed in full: each needs the user's attention.
    for f in &r.failed {
        println!("FAILED   {}", failure(f));
    }
    if r.unfinished {
        println!("the rewind is unfinished: fix what failed and run it again to complete it");
    }
    let what = if let Some(op) = r.op.as_deref().filter(|_| !r.undo) {
        op.to_string()
    } else if r.undo {
        "undid the last rewind".to_string()
    } else if let Some(a) = &r.agent {
        format!("rewound {} to the start of turn {}", whose_changes(a), r.to)
    } else {
        format!("rewound to the start of turn {}", r.to)
    };
    println!(
        "{what}: {} restored, {} deleted, {} failed",
        r.restored.len(),
        r.deleted.len(),
        r.failed.len()
    );
}

/// The paths a preview would delete, restore and could not restore, one a line (at most
/// `limit` lines, then how many more).
fn print_preview(r: &ReportJson, limit: Option<usize>) {
    let mut lines: Vec<String> = Vec::new();
    lines.extend(r.deleted.iter().map(|p| format!("delete   {p}")));
    lines.extend(r.restored.iter().map(|p| format!("restore  {p}")));
    lines.extend(r.failed.iter().map(|f| format!("cannot   {}", failure(f))));
    let shown = limit.unwrap_or(usize::MAX).min(lines.len());
    for l in &lines[..shown] {
        println!("{l}");
    }
    if shown < lines.len() {
        println!(
            "… and {} more (--dry-run lists every path)",
            lines.len() - shown
        );
    }
    print_agent(r);
}

/// `--agent`: the conflicts (with who did what), the paths merged line by line (with the diff
/// a preview shows) and the paths kept because only others changed them; the paths restored
/// are in the lists above.
fn print_agent(r: &ReportJson) {
    let Some(a) = &r.agent else {
        return;
    };
    let who = |p: &PathActors| {
        p.actors
            .iter()
            .map(crate::store::actors::ActorView::described)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let policy = a.conflicts_policy;
    for c in &a.conflicts {
        let what = match (&c.below, &c.above, &c.merge) {
            (Some(below), _, _) => format!("kept, {below} below it is kept"),
            (None, Some(above), _) => {
                format!("kept, {above} above it is kept and not a directory")
            }
            (None, None, Some(why)) => format!("kept; {why}"),
            (None, None, None) if policy == Conflicts::Rewind => {
                "rewound too (--conflicts rewind)".to_string()
            }
            (None, None, None) => {
                "kept (--conflicts rewind would rewind it, --conflicts merge take back only the agent's lines)".to_string()
            }
        };
        println!("conflict {}: {}; {what}", c.path, who(c));
    }
    for m in &a.merged {
        let who = m
            .actors
            .iter()
            .map(crate::store::actors::ActorView::described)
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "merge    {}: {who}; {}'s lines taken back, the others' kept",
            m.path,
            who_of(a)
        );
        if r.dry_run {
            for line in m.diff.lines() {
                println!("         {line}");
            }
        }
    }
    for k in &a.others {
        println!("keep     {}: {}", k.path, who(k));
    }
}

/// How a [`sentence`] speaks of the rewind.
#[derive(Clone, Copy, PartialEq)]
enum Tense {
    /// A dry run: what it would do.
    Would,
    /// Before asking: what it will do.
    Will,
    /// Nothing to change in the folder, said before the run.
    Nothing,
}

/// What the rewind of report `r` is, as the start of a sentence: the operation (`op`), the
/// undo of the last rewind, the completion of a cut-off one, or a rewind of everything, of some
/// paths or of the agent's changes.
fn operation_words(r: &ReportJson, op: Option<&str>, undo: bool) -> String {
    if let Some(op) = op {
        op.to_string()
    } else if undo {
        "undoing the last rewind".to_string()
    } else if r.completes_cut_off {
        format!(
            "completing the rewind to the start of turn {} that was cut off (it comes first)",
            r.to
        )
    } else {
        let only: Vec<String> = r.only.iter().map(RelPath::to_string).collect();
        let which = if let Some(a) = &r.agent {
            format!(" {}", whose_changes(a))
        } else if only.is_empty() {
            String::new()
        } else {
            format!(" {}", only.join(", "))
        };
        format!("rewinding{which} to the start of turn {}", r.to)
    }
}

/// One sentence saying what the rewind of report `r` does: to where, how many paths it
/// restores (and the bytes it writes), deletes, leaves as they are, and cannot restore.
fn sentence(r: &ReportJson, tense: Tense) -> String {
    let undo = r.undo;
    let op = r.op.as_deref().filter(|_| !undo);
    let what = operation_words(r, op, undo);
    let s = &r.summary;
    let (restored, deleted, unchanged, failed) = (
        s.restored as u64,
        s.deleted as u64,
        s.unchanged as u64,
        s.failed as u64,
    );
    if r.refused {
        return format!(
            "{what} would be refused before changing anything: {failed} {} cannot be restored from the store (ckpt-mount fsck says more)",
            paths_word(failed)
        );
    }
    if tense == Tense::Nothing {
        return if let Some(op) = op {
            format!("nothing to change in the folder for the {op}")
        } else if let Some(a) = &r.agent {
            format!(
                "nothing to change in the folder: no path {} alone changed since the start of turn {} differs from then{}",
                who_of(a),
                r.to,
                agent_counts(r)
            )
        } else if undo {
            "nothing to change in the folder: it already is as it was before the last rewind"
                .to_string()
        } else {
            format!(
                "nothing to change in the folder: it already is as it was at the start of turn {}",
                r.to
            )
        };
    }
    let mut parts = Vec::new();
    if restored > 0 {
        parts.push(format!(
            "restore {restored} {} ({} to write)",
            paths_word(restored),
            human_size(s.bytes)
        ));
    }
    if deleted > 0 {
        parts.push(format!("delete {deleted} {}", paths_word(deleted)));
    }
    if parts.is_empty() {
        parts.push("change nothing in the folder".into());
    }
    let mut out = match tense {
        Tense::Will => {
            let mut w = what;
            w[..1].make_ascii_uppercase();
            format!("{w} will {}", parts.join(" and "))
        }
        _ => format!("{what} would {}", parts.join(" and ")),
    };
    if unchanged > 0 {
        out += &format!("; {unchanged} {} unchanged", paths_word(unchanged));
    }
    if failed > 0 {
        out += &format!("; {failed} cannot be restored");
    }
    out += &agent_counts(r);
    if tense == Tense::Will {
        out.push('.');
    }
    out
}

/// `--agent [NAME]`: who is rewound, as a sentence names it: `the agent`, or the names asked
/// for (`sh`, `claude-code:1f3a and codex`).
fn who_of(a: &rewind::AgentSplit) -> String {
    if a.agents.is_empty() {
        return "the agent".into();
    }
    let names: Vec<String> = a
        .agents
        .iter()
        .map(|n| crate::store::actors::quote_name(n))
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "the agent".into(),
    }
}

/// `the agent's changes`, `sh's changes`.
fn whose_changes(a: &rewind::AgentSplit) -> String {
    format!("{}'s changes", who_of(a))
}

/// `--agent`: how many conflicts and paths of others are kept (or conflicts rewound).
fn agent_counts(r: &ReportJson) -> String {
    let Some(a) = &r.agent else {
        return String::new();
    };
    let conflicts = a.conflicts.len() as u64;
    let others = a.others.len() as u64;
    let mut out = String::new();
    if conflicts > 0 {
        let kept = if a.conflicts_policy == Conflicts::Rewind {
            "rewound"
        } else {
            "kept"
        };
        let word = if conflicts == 1 {
            "conflict"
        } else {
            "conflicts"
        };
        out += &format!("; {conflicts} {word} {kept}");
    }
    if others > 0 {
        out += &format!("; {others} {} only others changed kept", paths_word(others));
    }
    out
}

fn paths_word(n: u64) -> &'static str {
    if n == 1 { "path" } else { "paths" }
}
