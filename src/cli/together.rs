//! `rewind N --all-folders`, `undo --all-folders` and `redo --all-folders`: an agent working across several mounted
//! folders has each prompt begin a turn in all of them at once, under one prompt id (the turn
//! record's `conversation.prompt_id`); these take all of them back to that prompt together,
//! and undo that together. Every folder's plan is shown and asked about once; then each folder
//! is rewound (or undone) on its own: a failure in one does not stop the others.

use super::moment::History;
use super::ops::{Held, Step};
use super::rewind::{RewindArgs, Rewinder};
use super::{CliError, CliResult, Target};
use crate::engine::Query;
use crate::ids::Turn;
use crate::info::TurnRow;
use crate::rewind::ReportJson;
use crate::store::ops::OpRow;
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// One folder of the group, as the `--json` report lists it.
#[derive(Debug, Serialize)]
struct FolderJson {
    /// The folder.
    folder: PathBuf,
    /// Its turn of the prompt (the rewind's target); none for an undo, or a folder left alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<Turn>,
    /// What was done there (or would be, `--dry-run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<ReportJson>,
    /// Why the folder was left alone, or its run failed before reporting.
    #[serde(skip_serializing_if = "Option::is_none")]
    left_alone: Option<String>,
}

/// The `--json` report: the prompt and each folder.
#[derive(Debug, Serialize)]
struct GroupJson {
    /// The prompt's id, the same in every folder.
    prompt_id: String,
    /// Whether this was a preview.
    dry_run: bool,
    /// This folder first, then the others, then those left alone.
    folders: Vec<FolderJson>,
}

/// A folder that takes part: where, to which turn (none for an undo), and the run held open
/// between preview and run.
struct Member {
    folder: PathBuf,
    turn: Option<Turn>,
    run: Run,
}

/// A member's run: a rewind, or an undo or redo of one.
enum Run {
    Rewind(Box<Rewinder>),
    Revert(Step, Box<Held>),
}

impl Member {
    /// Runs it (a preview with `dry_run`); the report, or the one line why there is none.
    fn go(&mut self, dry_run: bool) -> Result<ReportJson, String> {
        let keep_going = (!dry_run).then(|| {
            let running = match &self.run {
                Run::Rewind(r) => r.running(),
                Run::Revert(step, h) => {
                    super::interrupt::Running::new(step.word(), &self.folder, h.in_daemon())
                }
            };
            super::interrupt::KeepGoing::start(running, indicatif::ProgressBar::hidden())
        });
        let out = match &mut self.run {
            Run::Rewind(r) => match r.run(dry_run, &super::rewind::progress_bar()) {
                Ok(a) => a.report.ok_or_else(|| a.error.unwrap_or_default()),
                Err(e) => Err(e.message),
            },
            Run::Revert(step, h) => h.run(*step, dry_run).map_err(|e| e.message),
        };
        drop(keep_going);
        out
    }
}

/// The group: its prompt, its members (this folder first) and the folders left alone.
struct Group {
    prompt_id: String,
    members: Vec<Member>,
    left_alone: Vec<(PathBuf, String)>,
}

/// Runs `rewind N --all-folders`.
pub fn rewind(a: &RewindArgs) -> CliResult {
    let t = super::target(a.dir.clone())?;
    let history = History::new(&t);
    let moment = history
        .resolve(a.turn.as_ref(), crate::moment::Use::Rewind)?
        .ok_or_else(|| CliError::usage("--all-folders needs the turn N"))?;
    let rows = history.rows()?;
    let row = rows
        .iter()
        .find(|r| r.turn == moment.turn && r.rewound_by == moment.rewound_by);
    let conversation = row.and_then(|r| r.conversation.as_ref());
    let Some(id) = conversation.and_then(|c| c.prompt_id.clone()) else {
        return Err(CliError::fail(format!(
            "turn {} was begun in this folder alone (no prompt of several folders began it): rewind it without --all-folders",
            moment.turn
        )));
    };
    let listed = conversation.map(|c| c.folders.clone()).unwrap_or_default();
    let before = super::conversations::before(&history, a);
    let this = folder_of(&t).to_path_buf();
    drop(history);
    let mut group = Group {
        prompt_id: id.clone(),
        members: vec![Member {
            folder: this.clone(),
            turn: Some(moment.turn),
            run: Run::Rewind(Box::new(Rewinder::new(
                t,
                Some(moment.turn),
                false,
                vec![],
                None,
            )?)),
        }],
        left_alone: Vec::new(),
    };
    for (folder, found) in others(&this, &listed, |f| turn_of_prompt(f, &id)) {
        match found {
            Ok(turn) => {
                let r = Rewinder::new(
                    Target::Mounted(folder.clone()),
                    Some(turn),
                    false,
                    vec![],
                    None,
                )?;
                group.members.push(Member {
                    folder,
                    turn: Some(turn),
                    run: Run::Rewind(Box::new(r)),
                });
            }
            Err(why) => group.left_alone.push((folder, why)),
        }
    }
    let opts = Opts {
        dry_run: a.dry_run,
        json: a.json,
        yes: a.yes,
        verbose: a.verbose,
    };
    go(group, &opts, |i, r| {
        if i == 0 {
            r.conversations = super::conversations::back(before.as_ref(), r);
        }
    })
}

/// Runs `undo --all-folders` or `redo --all-folders` (`step`): the group's rewind, found in
/// this folder as the operation `step` acts on next, undone or redone in every folder whose
/// next one is that prompt's rewind too.
pub fn revert(a: &super::ops::UndoArgs, step: Step) -> CliResult {
    let t = super::target(a.dir.clone())?;
    let this = folder_of(&t).to_path_buf();
    let (ops, rows) = ops_and_rows(&t)?;
    let next = ops.iter().find(|o| is_next(o, step));
    let id = next.and_then(|op| prompt_of(op, &rows, step));
    let Some(id) = id else {
        let what = next.map_or("none".to_string(), |o| format!("#{} {}", o.id, o.text));
        let word = step.word();
        return Err(CliError::fail(format!(
            "the operation {word} takes next here ({what}) is not a rewind to a prompt of several folders: {word} it without --all-folders"
        )));
    };
    let listed = rows
        .iter()
        .filter_map(|r| r.conversation.as_ref())
        .find(|c| c.prompt_id.as_deref() == Some(id.as_str()))
        .map(|c| c.folders.clone())
        .unwrap_or_default();
    let mut group = Group {
        prompt_id: id.clone(),
        members: vec![Member {
            folder: this.clone(),
            turn: None,
            run: Run::Revert(step, Box::new(Held::open(t)?)),
        }],
        left_alone: Vec::new(),
    };
    for (folder, found) in others(&this, &listed, |f| rewind_of_prompt(f, &id, step)) {
        match found {
            Ok(()) => group.members.push(Member {
                folder: folder.clone(),
                turn: None,
                run: Run::Revert(step, Box::new(Held::open(Target::Mounted(folder))?)),
            }),
            Err(why) => group.left_alone.push((folder, why)),
        }
    }
    let opts = Opts {
        dry_run: a.dry_run,
        json: a.json,
        yes: a.yes,
        verbose: a.verbose,
    };
    go(group, &opts, |_, _| {})
}

/// Whether `op` is the one `step` (undo or redo) acts on next.
fn is_next(op: &OpRow, step: Step) -> bool {
    match step {
        Step::Redo => op.next_redo,
        _ => op.next_undo,
    }
}

/// The prompt id of the rewind `op` that `step` acts on: an undo takes back a rewind in
/// effect (its target's turn is among those it retired), a redo re-applies one undone (its
/// target's turn is live again).
fn prompt_of(op: &OpRow, rows: &[TurnRow], step: Step) -> Option<String> {
    match step {
        Step::Redo => {
            let to = op.to.filter(|_| op.kind == "rewind")?;
            rows.iter()
                .find(|r| r.rewound_by.is_none() && r.turn == to)
                .and_then(|r| r.conversation.as_ref())
                .and_then(|c| c.prompt_id.clone())
        }
        _ => prompt_of_rewind(op, rows),
    }
}

/// The folder a target names.
fn folder_of(t: &Target) -> &Path {
    match t {
        Target::Mounted(f) | Target::Offline(f) => f,
    }
}

/// What a folder has of the prompt: `Ok` when it takes part, else why not.
type Found<T> = Result<T, Miss>;

/// Why a folder does not take part.
enum Miss {
    /// It has nothing of the prompt.
    Nothing,
    /// Its turns cannot be read (another user's mount, a daemon that does not answer).
    Unreadable(String),
    /// It has a turn of the prompt, and this says why it is left alone all the same.
    Why(String),
}

/// The other folders of the group: every mounted ckpt-mount folder (each once) but `this`,
/// and each folder the prompt's record lists, with what `probe` finds there. A folder not
/// listed that has nothing of the prompt, or that this user cannot read, is left out without
/// a word; one listed is said to be left alone, and why.
fn others<T>(
    this: &Path,
    listed: &[String],
    probe: impl Fn(&Path) -> Found<T>,
) -> Vec<(PathBuf, Result<T, String>)> {
    let this_dev = crate::mounts::mount_at(this).map(|m| m.dev);
    let mut devs: Vec<String> = this_dev.into_iter().collect();
    let mut out = Vec::new();
    let mut seen: Vec<PathBuf> = vec![this.to_path_buf()];
    for m in crate::mounts::mounts().into_iter().filter(|m| m.is_ckpt()) {
        if devs.contains(&m.dev) || seen.contains(&m.point) {
            continue;
        }
        devs.push(m.dev.clone());
        seen.push(m.point.clone());
        let is_listed = listed.iter().any(|l| Path::new(l) == m.point);
        let found = match probe(&m.point) {
            Ok(found) => Ok(found),
            Err(Miss::Why(why)) => Err(why),
            Err(_) if !is_listed => continue,
            Err(Miss::Nothing) => Err("it has no turn of this prompt".into()),
            Err(Miss::Unreadable(e)) => Err(format!("cannot read its turns: {e}")),
        };
        out.push((m.point, found));
    }
    for l in listed {
        let p = PathBuf::from(l);
        if !seen.contains(&p) {
            seen.push(p.clone());
            out.push((p, Err("it is not mounted".into())));
        }
    }
    out
}

/// The live turn of prompt `id` in the mounted folder `folder`, else why not.
fn turn_of_prompt(folder: &Path, id: &str) -> Found<Turn> {
    let rows = rows_of(folder).map_err(|e| Miss::Unreadable(e.message))?;
    let of_prompt = |r: &&TurnRow| {
        r.conversation
            .as_ref()
            .is_some_and(|c| c.prompt_id.as_deref() == Some(id))
    };
    if let Some(r) = rows
        .iter()
        .filter(of_prompt)
        .find(|r| r.rewound_by.is_none())
    {
        return Ok(r.turn);
    }
    match rows.iter().find(of_prompt) {
        Some(r) => Err(Miss::Why(format!(
            "its turn {} of this prompt was retired by rewind #{}",
            r.turn,
            r.rewound_by.unwrap_or_default()
        ))),
        None => Err(Miss::Nothing),
    }
}

/// `Ok` when the operation `step` (undo or redo) acts on next in `folder` is a rewind to a
/// turn of prompt `id`, else why not.
fn rewind_of_prompt(folder: &Path, id: &str, step: Step) -> Found<()> {
    let (ops, rows) = ops_and_rows(&Target::Mounted(folder.to_path_buf()))
        .map_err(|e| Miss::Unreadable(e.message))?;
    let next = ops.iter().find(|o| is_next(o, step));
    if next.and_then(|op| prompt_of(op, &rows, step)).as_deref() == Some(id) {
        return Ok(());
    }
    let has = rows.iter().any(|r| {
        r.conversation
            .as_ref()
            .is_some_and(|c| c.prompt_id.as_deref() == Some(id))
    });
    if !has {
        return Err(Miss::Nothing);
    }
    Err(Miss::Why(match next {
        Some(op) => format!(
            "the operation {} takes next there (#{} {}) is not the rewind to this prompt",
            step.word(),
            op.id,
            op.text
        ),
        None => format!("it has nothing to {}", step.word()),
    }))
}

/// The prompt id of the turn the rewind `op` went back to: the first of the turns it retired
/// (a rewind to the start of turn N retires N and every later turn). None for another kind of
/// operation, or a turn of one folder.
fn prompt_of_rewind(op: &OpRow, rows: &[TurnRow]) -> Option<String> {
    if op.kind != "rewind" {
        return None;
    }
    rows.iter()
        .filter(|r| r.rewound_by == Some(op.id))
        .min_by_key(|r| r.turn)
        .and_then(|r| r.conversation.as_ref())
        .and_then(|c| c.prompt_id.clone())
}

/// The turns of a mounted folder as `log` lists them.
fn rows_of(folder: &Path) -> Result<Vec<TurnRow>, CliError> {
    super::query(Target::Mounted(folder.to_path_buf()), Query::Log, |_, e| {
        CliError::fail(e.to_string())
    })
}

/// The operation log and the turns of a folder.
fn ops_and_rows(t: &Target) -> Result<(Vec<OpRow>, Vec<TurnRow>), CliError> {
    let fail = |_: &Path, e: crate::engine::EngineError| CliError::fail(e.to_string());
    let ops: Vec<OpRow> = super::query(t.clone(), Query::OpLog, fail)?;
    let rows: Vec<TurnRow> = super::query(t.clone(), Query::Log, fail)?;
    Ok((ops, rows))
}

/// How the command was asked to run.
struct Opts {
    dry_run: bool,
    json: bool,
    yes: bool,
    verbose: bool,
}

/// Previews every member (asking once on a terminal), then runs each, and reports each
/// folder; `fix` completes member `i`'s report before it is printed. Fails when any folder
/// failed, after all have run.
fn go(mut group: Group, o: &Opts, fix: impl Fn(usize, &mut ReportJson)) -> CliResult {
    let ask = !o.yes
        && !o.json
        && !o.dry_run
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal();
    if ask && !confirm(&mut group)? {
        return Err(CliError::fail("cancelled: nothing changed"));
    }
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for (i, m) in group.members.iter_mut().enumerate() {
        let result = m.go(o.dry_run);
        let ok =
            matches!(&result, Ok(r) if r.failed.is_empty() && super::rewind::no_room(r).is_none());
        if !ok {
            failed.push(m.folder.display().to_string());
        }
        let (report, error) = match result {
            Ok(mut r) => {
                fix(i, &mut r);
                (Some(r), None)
            }
            Err(e) => (None, Some(e)),
        };
        if !o.json {
            print_folder(&m.folder, report.as_ref(), error.as_deref(), o.verbose);
        }
        out.push(FolderJson {
            folder: m.folder.clone(),
            turn: m.turn,
            report,
            left_alone: error,
        });
    }
    for (folder, why) in &group.left_alone {
        if !o.json {
            println!("{}: left alone: {why}", folder.display());
        }
        out.push(FolderJson {
            folder: folder.clone(),
            turn: None,
            report: None,
            left_alone: Some(why.clone()),
        });
    }
    if o.json {
        super::print_json(&GroupJson {
            prompt_id: group.prompt_id,
            dry_run: o.dry_run,
            folders: out,
        });
    }
    if failed.is_empty() {
        Ok(())
    } else {
        let what = if o.dry_run {
            "not everything can be restored"
        } else {
            "not everything was restored"
        };
        Err(CliError::fail(format!("{what} in {}", failed.join(", "))))
    }
}

/// Shows every member's plan under its folder's name, and the folders left alone, then asks
/// once; `Ok(true)` to go on (also when nothing needs asking).
fn confirm(group: &mut Group) -> Result<bool, CliError> {
    let mut any = false;
    for m in &mut group.members {
        println!("{}:", m.folder.display());
        match m.go(true) {
            Ok(r) => any |= super::rewind::show_plan(&r),
            Err(e) => println!("cannot preview: {e}"),
        }
    }
    for (folder, why) in &group.left_alone {
        println!("{}: left alone: {why}", folder.display());
    }
    if any {
        super::rewind::proceed()
    } else {
        Ok(true)
    }
}

/// One folder's report, under its name.
fn print_folder(folder: &Path, report: Option<&ReportJson>, error: Option<&str>, verbose: bool) {
    println!("{}:", folder.display());
    if let Some(r) = report {
        super::rewind::print_report(r, false, super::rewind::listed(verbose));
        super::conversations::print(&r.conversations);
    }
    if let Some(e) = error {
        println!("FAILED   {e}");
    }
}
