//! `log` and `status` (and `status --log`, the daemon's log). Both name the captures that
//! stored nothing (over `--max-blob`, sockets, devices): a rewind cannot restore those paths.
//! Sizes are printed in binary units and times to the minute in the local time zone; `--json`
//! keeps exact bytes and Unix times.

use super::{CliError, CliResult};
use crate::daemon_log::DaemonLog;
use crate::engine::Query;
use crate::ids::Turn;
use crate::info::{SkippedCapture, Status, TurnRow};
use crate::quote::quote_path;
use crate::store::journal::AgentMark;
use crate::units::{CivilTime, human_size, unix_seconds};
use clap::Args;
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::path::PathBuf;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `ckpt-mount log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Print JSON (exact bytes, Unix times and ISO 8601 UTC times)
    #[arg(long)]
    pub json: bool,
    /// Print times in UTC instead of the local time zone
    #[arg(long)]
    pub utc: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub agent: super::agent::AgentFilter,
}

/// `ckpt-mount status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Print the end of the daemon's log (.ckpt/daemon.log) instead
    #[arg(long)]
    pub log: bool,
    /// How many lines of the daemon's log to print
    #[arg(
        short = 'n',
        long,
        value_name = "LINES",
        default_value_t = 50,
        requires = "log"
    )]
    pub lines: usize,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// The engine's answer to `query` (see [`super::query`]); offline, its refusal is said as it is.
fn fetch<T>(dir: Option<PathBuf>, query: Query) -> Result<T, CliError>
where
    T: serde::de::DeserializeOwned
        + TryFrom<crate::engine::Answer, Error = crate::engine::OtherAnswer>,
{
    super::query(super::target(dir)?, query, |_, e| {
        CliError::fail(e.to_string())
    })
}

/// The width to fit tables in: `$COLUMNS` when set (as `ls` reads it), else the terminal's,
/// else (not a terminal) 100.
fn output_width() -> usize {
    const NOT_A_TERMINAL: usize = 100;
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return NOT_A_TERMINAL;
    }
    match crate::sys::terminal_columns(stdout.as_fd()) {
        Ok(n) if n > 0 => usize::from(n),
        _ => NOT_A_TERMINAL,
    }
}

/// `text` in at most `width` terminal columns: cut with `…` when longer; control characters
/// (a tab or newline in a label) become spaces so that a row stays one line.
pub(super) fn fit(text: &str, width: usize) -> String {
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.width() <= width {
        return text;
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
    }
    out
}

/// `text` padded with spaces to `width` terminal columns.
pub(super) fn pad(text: &str, width: usize) -> String {
    format!("{text}{}", " ".repeat(width.saturating_sub(text.width())))
}

/// The fixed columns of the log after the turn number, with their widths: right-aligned
/// numbers, then the size (its width decided per table).
const COUNTS: [(&str, usize); 3] = [("created", 7), ("modified", 8), ("deleted", 7)];
/// Width of a time printed to the minute (`2026-12-02 09:14`).
const TIME_WIDTH: usize = 16;
/// The fewest columns the programs and the label are cut to, however narrow the terminal.
const MIN_TEXT: usize = 8;

/// The log as a table in `width` columns: turn, when it began, created, modified, deleted,
/// bytes captured, programs and label (last, being the longest); the programs and the label
/// are cut with `…` to fit. Under a turn, a `!` line per kind of capture that stored nothing.
fn log_table(rows: &[TurnRow], utc: bool, width: usize) -> String {
    let sizes: Vec<String> = rows.iter().map(|r| human_size(r.bytes)).collect();
    // Who changed the turn: its actors (the agent marked as such), else the programs.
    let programs: Vec<String> = rows
        .iter()
        .map(|r| {
            if r.actors.is_empty() {
                crate::store::actors::programs_text(&r.programs)
            } else {
                crate::store::actors::actors_text(&r.actors)
            }
        })
        .collect();
    // The state column appears when a rewind in effect retired turns (listed, not live).
    let states: Vec<String> = rows
        .iter()
        .map(|r| {
            r.rewound_by
                .map_or_else(|| "live".into(), |op| format!("rewound #{op}"))
        })
        .collect();
    let c = LogColumns::fit(rows, &sizes, &programs, &states, width);
    let mut out = c.header(utc) + "\n";
    for (((r, size), programs), state) in rows.iter().zip(&sizes).zip(&programs).zip(&states) {
        out += c.row(r, [size, programs, state], utc).trim_end();
        out.push('\n');
        for skipped in skipped_lines(&r.skipped, false) {
            out += &format!("{:>w$}  ! {skipped}\n", "", w = c.turn);
        }
        // A prompt that began a turn in several folders names them (`rewind --all-folders`).
        if let Some(conv) = r.conversation.as_ref().filter(|v| v.folders.len() > 1) {
            let line = format!(
                "{:>w$}  = one prompt in {}",
                "",
                conv.folders.join(", "),
                w = c.turn
            );
            out += &fit(&line, width);
            out.push('\n');
        }
    }
    let mut actors = rows.iter().flat_map(|r| &r.actors).peekable();
    if actors.peek().is_some() && actors.all(|a| a.agent.is_none()) {
        out += &format!("{}\n", fit(crate::store::actors::ONE_ACTOR, width));
    }
    out
}

/// The widths of `log`'s columns (0 for a state column not shown).
struct LogColumns {
    turn: usize,
    state: usize,
    size: usize,
    programs: usize,
    label: usize,
}

impl LogColumns {
    /// The widths for `rows` (with their sizes, programs and states as shown) on a terminal
    /// `width` wide: the label (last) keeps up to half the room left by the fixed columns; the
    /// programs get what they need of the rest, and the label whatever they leave.
    fn fit(
        rows: &[TurnRow],
        sizes: &[String],
        programs: &[String],
        states: &[String],
        width: usize,
    ) -> Self {
        let widest = |cells: &mut dyn Iterator<Item = usize>, title: &str| {
            cells.max().unwrap_or(0).max(title.len())
        };
        let turn = widest(&mut rows.iter().map(|r| r.turn.to_string().len()), "turn");
        let size = widest(&mut sizes.iter().map(String::len), "captured");
        let state = if rows.iter().any(|r| r.rewound_by.is_some()) {
            states.iter().map(String::len).max().unwrap_or(0)
        } else {
            0
        };
        let state_room = if state == 0 {
            0
        } else {
            2 + "rewound #".len() + 6
        };
        let fixed = state_room
            + turn
            + 2
            + TIME_WIDTH
            + COUNTS.iter().map(|(_, w)| 2 + w).sum::<usize>()
            + 2
            + size
            + 2;
        let room = width.saturating_sub(fixed);
        let label_need = rows
            .iter()
            .map(|r| r.label.as_deref().unwrap_or("").width())
            .max()
            .unwrap_or(0);
        let programs_need = widest(&mut programs.iter().map(|p| p.width()), "programs");
        let programs = programs_need
            .min(room.saturating_sub(label_need.min(room / 2) + 2))
            .max(MIN_TEXT);
        let label = room.saturating_sub(programs + 2).max(MIN_TEXT);
        Self {
            turn,
            state,
            size,
            programs,
            label,
        }
    }

    /// The state cell (nothing when the column is not shown).
    fn state_cell(&self, s: &str) -> String {
        if self.state == 0 {
            String::new()
        } else {
            format!("  {s:<w$}", w = self.state)
        }
    }

    /// The title line.
    fn header(&self, utc: bool) -> String {
        let began = if utc { "began (UTC)" } else { "began" };
        let mut line = format!(
            "{:>w$}{}  {began:<TIME_WIDTH$}",
            "turn",
            self.state_cell("state"),
            w = self.turn
        );
        for (name, w) in COUNTS {
            line += &format!("  {name:>w$}");
        }
        line += &format!(
            "  {:>w$}  {}  label",
            "captured",
            pad("programs", self.programs),
            w = self.size
        );
        line
    }

    /// The line of turn `r`, whose size, programs and state cells are `cells`.
    fn row(&self, r: &TurnRow, [size, programs, state]: [&String; 3], utc: bool) -> String {
        let unix = unix_seconds(r.time);
        let when = if utc {
            CivilTime::utc(unix)
        } else {
            CivilTime::local(unix)
        };
        let mut line = format!(
            "{:>w$}{}  {:<TIME_WIDTH$}",
            r.turn,
            self.state_cell(state),
            when.to_minute(),
            w = self.turn
        );
        for (n, (_, w)) in [r.created, r.modified, r.deleted].iter().zip(COUNTS) {
            line += &format!("  {n:>w$}");
        }
        line += &format!(
            "  {size:>w$}  {}  {}",
            pad(&fit(programs, self.programs), self.programs),
            fit(r.label.as_deref().unwrap_or(""), self.label),
            w = self.size
        );
        line
    }
}

/// Runs `log`.
pub fn log(a: LogArgs) -> CliResult {
    a.agent.check(a.dir.as_deref())?;
    let rows: Vec<TurnRow> = fetch(a.dir, Query::Log)?;
    let agents = a.agent.agents();
    let rows: Vec<TurnRow> = rows
        .into_iter()
        .filter(|r| {
            a.agent.keeps(&r.actors)
                || agents
                    .as_ref()
                    .is_some_and(|g| r.by.is_some() && g.covers_name(r.by.as_deref()))
        })
        .collect();
    if a.json {
        super::print_json(&rows);
        return Ok(());
    }
    print!("{}", log_table(&rows, a.utc, output_width()));
    Ok(())
}

/// Sentences naming the captures that stored nothing: per turn, one for the files over
/// `--max-blob`, one per kind for sockets and devices (at most five names each), and one per
/// file skipped for another reason; `with_turn` says which turn (the log prints them under the
/// turn's row).
fn skipped_lines(skipped: &[SkippedCapture], with_turn: bool) -> Vec<String> {
    let mut turns: Vec<Turn> = skipped.iter().map(|c| c.turn).collect();
    turns.dedup();
    let mut out = Vec::new();
    for t in turns {
        let in_turn = if with_turn {
            format!(" in turn {t}")
        } else {
            String::new()
        };
        let of_turn: Vec<&SkippedCapture> = skipped.iter().filter(|c| c.turn == t).collect();
        let big: Vec<&SkippedCapture> = of_turn
            .iter()
            .copied()
            .filter(|c| c.over_max_blob)
            .collect();
        if !big.is_empty() {
            let what = if big.len() == 1 {
                "file over --max-blob".to_string()
            } else {
                "files over --max-blob".to_string()
            };
            out.push(skipped_group(&big, &what, &in_turn, true));
        }
        for kind in ["socket", "device"] {
            let group: Vec<&SkippedCapture> =
                of_turn.iter().copied().filter(|c| c.was == kind).collect();
            if !group.is_empty() {
                let what = if group.len() == 1 {
                    kind.to_string()
                } else {
                    format!("{kind}s")
                };
                out.push(skipped_group(&group, &what, &in_turn, false));
            }
        }
        let others = of_turn
            .iter()
            .filter(|c| !c.over_max_blob && !matches!(c.was.as_str(), "socket" | "device"));
        for c in others {
            out.push(format!(
                "{} was not captured{in_turn} ({}); a rewind cannot restore it",
                quote_path(c.path.as_bytes()),
                c.reason
            ));
        }
    }
    out
}

/// `N WHAT was/were not captured IN_TURN: names (sizes); a rewind cannot restore it/them`.
fn skipped_group(group: &[&SkippedCapture], what: &str, in_turn: &str, sizes: bool) -> String {
    const NAMED: usize = 5;
    let mut names: Vec<String> = group
        .iter()
        .take(NAMED)
        .map(|c| {
            let name = quote_path(c.path.as_bytes());
            if sizes {
                format!("{name} ({})", human_size(c.size))
            } else {
                name.into_owned()
            }
        })
        .collect();
    if group.len() > NAMED {
        names.push(format!("and {} more", group.len() - NAMED));
    }
    let (were, them) = if group.len() == 1 {
        ("was", "it")
    } else {
        ("were", "them")
    };
    format!(
        "{} {what} {were} not captured{in_turn}: {}; a rewind cannot restore {them}",
        group.len(),
        names.join(", ")
    )
}

/// Runs `status`.
pub fn status(a: StatusArgs) -> CliResult {
    if a.log {
        return daemon_log(a);
    }
    let v: Status = fetch(a.dir, Query::Status)?;
    if a.json {
        super::print_json(&v);
        return Ok(());
    }
    print!("{}", status_text(&v));
    Ok(())
}

/// What `status` prints, from the daemon's (or the store's) answer: sizes in binary units,
/// and what the store holds against what it takes on disk.
fn status_text(v: &Status) -> String {
    let mut out = format!("folder:   {}\n", v.folder);
    match v.pid {
        Some(pid) => out += &format!("mounted:  yes (daemon pid {pid}, uid {})\n", or_null(v.uid)),
        None => out += "mounted:  no\n",
    }
    if let Some(io) = &v.io {
        out += &format!("file I/O: {io}\n");
    }
    out += &format!(
        "turn:     {} ({} paths captured in it)\n",
        v.turn, v.captures_this_turn
    );
    let blobs = v.blobs;
    out += &format!(
        "store:    {} on disk ({blobs} {}, journal {})\n",
        human_size(v.store_bytes),
        if blobs == 1 { "blob" } else { "blobs" },
        human_size(v.journal_bytes)
    );
    if v.preimage_bytes == 0 {
        out += "          no file pre-images kept\n";
    } else {
        out += &format!(
            "          stored {} for {} of file pre-images ({:.1}× by dedup and compression)\n",
            human_size(v.preimage_blob_bytes),
            human_size(v.preimage_bytes),
            v.dedup_ratio
        );
    }
    if v.unused_blob_bytes > 0 {
        out += &format!(
            "          {} in blobs no turn or undo needs (ckpt-mount prune --dry-run says what a prune frees)\n",
            human_size(v.unused_blob_bytes)
        );
    }
    out += &pending_text(v);
    let disk = disk_warning(v);
    if disk.is_empty() {
        out += &size_warning(v);
    } else {
        // The store's size against a free space of next to nothing says nothing more.
        out += &disk;
    }
    out += &agent_text(v.agents.as_deref());
    for line in skipped_lines(&v.skipped, true) {
        out += &format!("warning:  {line}\n");
    }
    out
}

/// A number of an answer as JSON writes it: `null` when the answer has none.
fn or_null(n: Option<u32>) -> String {
    n.map_or_else(|| "null".to_string(), |n| n.to_string())
}

/// The `pending:` line of `status`: a rewind, undo or redo that began and did not end, and
/// the command that completes it. On an unmounted folder it was cut off by a crash, or left
/// open by a path it could not restore (the journal cannot tell which), and mounting completes
/// it; while mounted, the daemon completed whatever a crash cut off when it started, so what
/// is left was stopped by a path that could not be restored.
fn pending_text(v: &Status) -> String {
    let Some(p) = &v.pending else {
        return String::new();
    };
    let dir = &v.folder;
    let what = p.with_article();
    if v.pid.is_some() {
        format!(
            "pending:  {what} is unfinished: a path it could not restore stopped it; fix that path, then `ckpt-mount rewind --dir {dir}` completes it first\n"
        )
    } else {
        format!(
            "pending:  {what} was cut off by a crash (or stopped by a path it could not restore); `ckpt-mount mount {dir}` completes it (or, unmounted, `ckpt-mount rewind --dir {dir}`)\n"
        )
    }
}

/// The `warning:` line of `status` when the disk holding the store is full or nearly
/// ([`crate::info::disk_nearly_full`]): what that breaks and what to do. Nothing for an answer
/// without the disk's size (an older daemon).
fn disk_warning(v: &Status) -> String {
    let (Some(free), Some(disk)) = (v.free_bytes, v.disk_bytes) else {
        return String::new();
    };
    if !crate::info::disk_nearly_full(free, disk) {
        return String::new();
    }
    let state = if free == 0 { "full" } else { "nearly full" };
    format!(
        "warning:  the disk holding the store is {state} ({} free of {}): a change whose capture cannot be stored fails (No space left on device), and a rewind needs room for what it saves; free space on that disk (delete or move files), or see what a prune would free: ckpt-mount prune --dry-run\n",
        human_size(free),
        human_size(disk)
    )
}

/// The `warning:` line of `status` when the store is over the size it warns at: what the size
/// is measured against (1 GiB, or 10 % of the free space on the store's disk), and the dry run
/// that says what a prune would free.
fn size_warning(v: &Status) -> String {
    let (size, warn) = (v.store_bytes, v.warn_bytes);
    if size <= warn {
        return String::new();
    }
    let limit = match v.free_bytes {
        Some(free) if free / 10 <= warn => format!(
            "more than 10 % of the {} free on its disk",
            human_size(free)
        ),
        _ => format!("more than {}", human_size(warn)),
    };
    format!(
        "warning:  the store holds {}, {limit}; see what a prune would free: ckpt-mount prune --dry-run\n",
        human_size(size)
    )
}

/// The `agent:` line of `status`: the last process marked as the agent (and how many marks
/// there were), or that none was and every change counts as one actor. Nothing for an answer
/// without the field (an older daemon).
fn agent_text(agents: Option<&[AgentMark]>) -> String {
    let Some(marks) = agents else {
        return String::new();
    };
    let Some(last) = marks.last() else {
        return format!(
            "agent:    {}\n          (to tell the agent's changes apart, {})\n",
            crate::store::actors::ONE_ACTOR,
            crate::store::actors::HOW_TO_MARK
        );
    };
    let session = match &last.session {
        Some(s) => format!(", session {s}"),
        None => String::new(),
    };
    let earlier = match marks.len() - 1 {
        0 => String::new(),
        1 => "; 1 earlier mark".to_string(),
        n => format!("; {n} earlier marks"),
    };
    let mut names: Vec<String> = Vec::new();
    for m in marks {
        let n = crate::store::actors::quote_name(&m.name());
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let others = if names.len() > 1 {
        format!(
            "          {} agents: {} (`ckpt-mount agents` lists them)\n",
            names.len(),
            names.join(", ")
        )
    } else {
        String::new()
    };
    format!(
        "agent:    {} (pid {}, marked by {} as {}{session}) and what it runs{earlier}\n{others}",
        quote_path(last.comm.as_bytes()),
        last.pid,
        last.via,
        crate::store::actors::quote_name(&last.name()),
    )
}

/// Runs `status --log`: the end of the daemon's log, read through the daemon when the folder is
/// mounted (the store is hidden from the mount) and from the store itself when it is not.
fn daemon_log(a: StatusArgs) -> CliResult {
    let v: DaemonLog = fetch(a.dir, Query::DaemonLog { lines: a.lines })?;
    if a.json {
        super::print_json(&v);
        return Ok(());
    }
    if !v.exists {
        println!(
            "no daemon log: .ckpt/daemon.log does not exist (a daemon run with --foreground logs to its terminal)"
        );
        return Ok(());
    }
    for line in &v.lines {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_width::UnicodeWidthStr;

    fn row(turn: u64, label: Option<&str>, programs: &[&str], bytes: u64) -> TurnRow {
        TurnRow {
            turn: Turn::new(turn),
            label: label.map(String::from),
            // 2026-12-02 09:14:05 UTC
            time: 1_796_202_845 + turn * 600,
            time_iso: String::new(),
            created: 8,
            modified: 12,
            deleted: 3,
            bytes,
            programs: programs.iter().map(|p| p.to_string()).collect(),
            actors: Vec::new(),
            skipped: Vec::new(),
            rewound_by: None,
            by: None,
            conversation: None,
        }
    }

    fn rows() -> Vec<TurnRow> {
        let mut skipped = row(9, Some("big files"), &["cp"], 0);
        skipped.skipped = vec![SkippedCapture {
            turn: Turn::new(9),
            path: crate::relpath::RelPath::new(b"data/big.bin").expect("a valid path"),
            was: "file".into(),
            size: 3 << 30,
            over_max_blob: true,
            reason: "over the --max-blob limit".into(),
        }];
        vec![
            row(1, None, &["touch"], 0),
            row(
                2,
                Some("refactor the parser into its own module and add tests for every error path"),
                &[
                    "cargo", "rustc", "sed", "sh", "git", "python3", "npm", "node",
                ],
                41 << 20,
            ),
            row(3, Some("修正: ラベル\tand a tab"), &["vim"], 1536),
            skipped,
            row(10, Some("short"), &[], 7),
        ]
    }

    #[test]
    fn the_log_fits_the_width_it_is_given() {
        for width in [80, 100, 140] {
            let table = log_table(&rows(), true, width);
            for line in table.lines().filter(|l| !l.trim_start().starts_with('!')) {
                assert!(line.width() <= width, "{width}: {line:?}");
            }
        }
        insta::assert_snapshot!(log_table(&rows(), true, 100));
    }

    #[test]
    fn a_narrow_terminal_cuts_programs_and_label_first() {
        insta::assert_snapshot!(log_table(&rows(), true, 80));
    }

    #[test]
    fn text_is_cut_with_an_ellipsis_in_terminal_columns() {
        assert_eq!(fit("short", 8), "short");
        assert_eq!(fit("exactly8", 8), "exactly8");
        assert_eq!(fit("nine char", 8), "nine ch…");
        // Each of these takes two columns.
        assert_eq!(fit("ラベルです", 6), "ラベ…");
        assert_eq!(fit("a\nb", 8), "a b");
        assert_eq!(fit("abc", 0), "");
    }

    /// A status answer as the daemon writes it, fields left out as an older daemon leaves them.
    fn status(v: serde_json::Value) -> Status {
        serde_json::from_value(v).expect("a status")
    }

    #[test]
    fn status_says_what_the_store_holds_in_binary_units() {
        let v = status(serde_json::json!({
            "folder": "/src/site",
            "pid": null,
            "turn": 3,
            "captures_this_turn": 0,
            "store_bytes": 12_900_000u64,
            "journal_bytes": 8_300u64,
            "blobs": 40,
            "preimage_bytes": 42_000_000u64,
            "preimage_blob_bytes": 12_000_000u64,
            "unused_blob_bytes": 891_700u64,
            "dedup_ratio": 3.5,
            "turns": [1, 2, 3],
            "warn_bytes": 10_000_000u64,
            "free_bytes": 100_000_000u64,
            "skipped": [],
        }));
        insta::assert_snapshot!(status_text(&v));
    }

    #[test]
    fn a_pending_operation_is_said_with_the_command_that_completes_it() {
        let pending = serde_json::json!({"kind": "undo", "what": "undo of #4"});
        let offline = status(serde_json::json!({"folder": "/p", "pid": null, "pending": pending}));
        assert_eq!(
            pending_text(&offline),
            "pending:  an undo of #4 was cut off by a crash (or stopped by a path it could not restore); `ckpt-mount mount /p` completes it (or, unmounted, `ckpt-mount rewind --dir /p`)\n"
        );
        let mounted = status(serde_json::json!({"folder": "/p", "pid": 42, "pending": pending}));
        assert!(
            pending_text(&mounted).starts_with(
                "pending:  an undo of #4 is unfinished: a path it could not restore stopped it;"
            ),
            "{}",
            pending_text(&mounted)
        );
        assert_eq!(
            pending_text(&status(serde_json::json!({"folder": "/p"}))),
            ""
        );
    }

    #[test]
    fn a_full_disk_is_said_in_one_line_instead_of_the_size_warning() {
        let v = |free: u64, disk: Option<u64>| {
            status(
                serde_json::json!({"store_bytes": 1u64 << 20, "warn_bytes": 1024, "free_bytes": free, "disk_bytes": disk}),
            )
        };
        let full = status_text(&v(0, Some(16 << 20)));
        assert!(
            full.contains("warning:  the disk holding the store is full (0 B free of 16.0 MiB): a change whose capture cannot be stored fails (No space left on device), and a rewind needs room for what it saves; free space on that disk (delete or move files), or see what a prune would free: ckpt-mount prune --dry-run\n"),
            "{full}"
        );
        assert!(!full.contains("the store holds"), "{full}");
        let nearly = status_text(&v(100 << 20, Some(100 << 30)));
        assert!(
            nearly.contains("is nearly full (100.0 MiB free of 100.0 GiB)"),
            "{nearly}"
        );
        // Room enough, or an older daemon's answer without the disk's size: the size warning.
        for roomy in [v(2 << 30, Some(100 << 30)), v(0, None)] {
            let text = status_text(&roomy);
            assert!(!text.contains("the disk holding"), "{text}");
            assert!(text.contains("warning:  the store holds 1.0 MiB"), "{text}");
        }
    }

    #[test]
    fn the_size_warning_says_what_its_number_is() {
        let v = |store: u64, warn: u64, free: Option<u64>| {
            status(
                serde_json::json!({"store_bytes": store, "warn_bytes": warn, "free_bytes": free}),
            )
        };
        assert_eq!(size_warning(&v(5, 10, Some(100))), "", "under the limit");
        assert_eq!(
            size_warning(&v(3 << 20, 1 << 20, Some(10 << 20))),
            "warning:  the store holds 3.0 MiB, more than 10 % of the 10.0 MiB free on its disk; see what a prune would free: ckpt-mount prune --dry-run\n"
        );
        assert_eq!(
            size_warning(&v(3 << 30, 1 << 30, Some(100 << 30))),
            "warning:  the store holds 3.0 GiB, more than 1.0 GiB; see what a prune would free: ckpt-mount prune --dry-run\n"
        );
        // An older daemon's answer has no free space in it.
        assert_eq!(
            size_warning(&v(3 << 20, 1 << 20, None)),
            "warning:  the store holds 3.0 MiB, more than 1.0 MiB; see what a prune would free: ckpt-mount prune --dry-run\n"
        );
    }
}
