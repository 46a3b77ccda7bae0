//! The turn picker: `rewind` with no turn, on a terminal, lists the turns a rewind can go to
//! (the live ones, newest first) and asks which. Each line says what `log` says of the turn,
//! from the same query (through the daemon of a mounted folder, or on the store of an
//! unmounted one): its number, its label (the prompt's first line, for a turn an agent's hook
//! began), who began it (that agent; else who changed it, as `log` names them), when it began
//! (local time) and how many paths it created, modified and deleted (`+2 ~1 -0`). Typing
//! filters: each word typed must be in the label or the name, or begin the turn's number.
//!
//! Enter gives the turn back to `rewind`, which goes on as `rewind N` does: the preview, then
//! the question. Esc changes nothing and ends as a "no" to that question ends (exit 1,
//! "cancelled: nothing changed"); Ctrl-C changes nothing either and exits 130, as a Ctrl-C
//! ends the question. Off a terminal, with `--yes`, `--json`, `--dry-run` or `--undo`, and
//! with `--agent NAME` (the latest turn that agent began), no picker is shown.
//!
//! The interface is `inquire`'s `Select` on its `console` backend (`console` is already
//! indicatif's). That backend reads each key in raw mode and raises `SIGINT` itself when the
//! key is Ctrl-C; `SIGINT` is blocked while the picker runs, so the read fails with
//! `Interrupted` instead, inquire moves the cursor below its lines, and the exit is ours.

use super::CliError;
use super::moment::History;
use super::rewind::RewindArgs;
use crate::ids::Turn;
use crate::info::TurnRow;
use crate::store::actors::{actors_text, programs_text, quote_name};
use crate::units::{CivilTime, unix_seconds};
use std::io::IsTerminal;
use std::os::fd::AsFd;
use unicode_width::UnicodeWidthStr;

/// The question above the list.
const PROMPT: &str = "Rewind to the start of which turn?";
/// The line under the list.
const HELP: &str =
    "type to filter, ↑↓ to move, Enter to pick, Esc to cancel; +created ~modified -deleted";
/// How many turns are listed at once (the list scrolls).
const PAGE: usize = 12;
/// The widest the name column gets; a longer name is cut with `…`.
const WHO_WIDTH: usize = 24;
/// The fewest columns the label is cut to, however narrow the terminal.
const MIN_LABEL: usize = 12;
/// Width of a time printed to the minute (`2026-12-02 09:14`).
const TIME_WIDTH: usize = 16;
/// What the list puts before each line (`> ` or two spaces), and a column kept free so that
/// no line reaches the terminal's last column (some terminals wrap there).
const PREFIX: usize = 3;
/// A score above any position's: a word that is the turn's number puts that turn first.
const EXACT: i64 = 1 << 40;

/// The turn `rewind` should go to when it shows the picker: `Ok(None)` when it does not
/// (a turn was given, `--yes`, `--json`, `--dry-run`, `--undo` or `--agent NAME`, or stdin,
/// stdout or stderr is not a terminal), and `rewind` goes on as it did without one.
pub fn turn_for(a: &RewindArgs, history: &History<'_>) -> Result<Option<Turn>, CliError> {
    let agent_named = a.agent.as_ref().is_some_and(|names| !names.is_empty());
    if a.turn.is_some() || a.undo || a.yes || a.json || a.dry_run || agent_named {
        return Ok(None);
    }
    if !(std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
        && std::io::stderr().is_terminal())
    {
        return Ok(None);
    }
    let rows = history.rows()?;
    if rows.iter().all(|r| r.rewound_by.is_some()) {
        return Ok(None);
    }
    pick(rows).map(Some)
}

/// Shows the picker over `rows` (as `log` answers them, in turn order; the turns a rewind
/// retired are left out) and returns the turn picked. Esc is a refusal with exit code 1,
/// Ctrl-C one with exit code 130; both say that nothing changed.
pub fn pick(rows: &[TurnRow]) -> Result<Turn, CliError> {
    let choices = choices(rows, columns());
    let held = crate::sys::block_sigint()
        .map_err(|e| log::debug!("cannot block SIGINT: {e}"))
        .is_ok();
    let answer = inquire::Select::new(PROMPT, choices)
        .with_help_message(HELP)
        .with_page_size(PAGE)
        .with_scorer(&score)
        .with_formatter(&|o| o.value.summary.clone())
        .raw_prompt();
    let interrupted = match &answer {
        Err(inquire::InquireError::OperationInterrupted) => true,
        Err(inquire::InquireError::IO(e)) => e.kind() == std::io::ErrorKind::Interrupted,
        _ => false,
    };
    if interrupted {
        // The SIGINT the backend raised stays pending, and blocked, until the exit.
        return Err(CliError {
            message: "cancelled: nothing changed".into(),
            code: super::interrupt::INTERRUPTED,
        });
    }
    if held && let Err(e) = crate::sys::unblock_sigint() {
        log::debug!("cannot unblock SIGINT: {e}");
    }
    match answer {
        Ok(o) => Ok(o.value.turn),
        Err(inquire::InquireError::OperationCanceled) => {
            Err(CliError::fail("cancelled: nothing changed"))
        }
        Err(e) => Err(CliError::fail(format!("cannot show the turn picker: {e}"))),
    }
}

/// One turn in the picker: its line, and what typing is matched against.
struct Choice {
    turn: Turn,
    /// The line shown.
    line: String,
    /// What the answer line says once the turn is picked (`turn 3: fix the parser`).
    summary: String,
    /// The turn's number as typed.
    number: String,
    /// The label, lower case.
    label: String,
    /// Who began or changed the turn, as shown and by name, lower case.
    who: String,
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

/// The terminal's width (stderr's, where the picker draws; `$COLUMNS` when set), else 80.
fn columns() -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    match crate::sys::terminal_columns(std::io::stderr().as_fd()) {
        Ok(n) if n > 0 => usize::from(n),
        _ => 80,
    }
}

/// Who began turn `r` (the agent whose hook did), else who changed it, as `log` names them.
fn who(r: &TurnRow) -> String {
    if let Some(by) = &r.by {
        quote_name(by)
    } else if r.actors.is_empty() {
        programs_text(&r.programs)
    } else {
        actors_text(&r.actors)
    }
}

/// The live turns of `rows`, newest first (each turn's steps under it), each as a line `width` columns wide at most:
/// number, label, who, when it began (local time), counts. The label takes the room left,
/// and no more than the longest needs.
fn choices(rows: &[TurnRow], width: usize) -> Vec<Choice> {
    let mut live: Vec<&TurnRow> = rows.iter().filter(|r| r.rewound_by.is_none()).collect();
    // Turns newest first, each with its steps (tool calls) under it in the order they ran, as
    // an agent's own list shows a prompt and then what it did.
    live.sort_by_key(|r| (std::cmp::Reverse(r.turn.get()), r.turn.step()));
    let whos: Vec<String> = live.iter().map(|r| who(r)).collect();
    let counts: Vec<String> = live
        .iter()
        .map(|r| format!("+{} ~{} -{}", r.created, r.modified, r.deleted))
        .collect();
    let widest = |cells: &mut dyn Iterator<Item = usize>| cells.max().unwrap_or(0);
    let turn_w = widest(&mut live.iter().map(|r| r.turn.to_string().len()));
    let who_w = widest(&mut whos.iter().map(|w| w.width())).min(WHO_WIDTH);
    let counts_w = widest(&mut counts.iter().map(String::len));
    let who_room = if who_w == 0 { 0 } else { who_w + 2 };
    let fixed = PREFIX + turn_w + 2 + 2 + who_room + TIME_WIDTH + 2 + counts_w;
    let label_need = widest(
        &mut live
            .iter()
            .map(|r| r.label.as_deref().unwrap_or("").width() + 2 * usize::from(r.turn.is_step())),
    );
    let label_w = label_need.min(width.saturating_sub(fixed).max(MIN_LABEL));
    live.iter()
        .zip(whos)
        .zip(counts)
        .map(|((r, who), counts)| {
            let label = r.label.as_deref().unwrap_or("");
            let shown_label = if r.turn.is_step() {
                format!("  {label}")
            } else {
                label.to_string()
            };
            let when = CivilTime::local(unix_seconds(r.time)).to_minute();
            let who_cell = if who_w == 0 {
                String::new()
            } else {
                format!(
                    "{}  ",
                    super::info::pad(&super::info::fit(&who, who_w), who_w)
                )
            };
            let line = format!(
                "{:>turn_w$}  {}  {who_cell}{when:<TIME_WIDTH$}  {counts}",
                r.turn,
                super::info::pad(&super::info::fit(&shown_label, label_w), label_w),
            );
            let by = r.by.as_deref().unwrap_or("");
            Choice {
                turn: r.turn,
                summary: format!("turn {}: {}", r.turn, super::info::fit(label, label_w)),
                line: line.trim_end().to_string(),
                number: r.turn.to_string(),
                label: label.to_lowercase(),
                who: format!("{who} {by}").to_lowercase(),
            }
        })
        .collect()
}

/// Whether choice `c` (at `index` in the list, newest first) matches what was typed, and how
/// well: each word must begin the turn's number (`3`, `#3`) or be in the label or the name,
/// case aside. The list keeps its order, but a word that is the whole number puts that turn
/// first. `None` hides the choice.
fn score(typed: &str, c: &Choice, _line: &str, index: usize) -> Option<i64> {
    let mut score = -i64::try_from(index).unwrap_or(i64::MAX);
    for word in typed.to_lowercase().split_whitespace() {
        let number = word.strip_prefix('#').unwrap_or(word);
        if c.number == number {
            score = score.saturating_add(EXACT);
        } else if !(c.number.starts_with(number) || c.label.contains(word) || c.who.contains(word))
        {
            return None;
        }
    }
    Some(score)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(turn: u64, label: &str, by: Option<&str>, rewound: bool) -> TurnRow {
        serde_json::from_value(serde_json::json!({
            "turn": turn, "label": label, "time": 1_700_000_000u64 + turn * 60,
            "created": turn, "modified": 1, "deleted": 0, "bytes": 0,
            "programs": ["sh"], "skipped": [],
            "by": by, "rewound_by": if rewound { Some(9) } else { None },
        }))
        .expect("a log row")
    }

    fn rows() -> Vec<TurnRow> {
        vec![
            row(1, "mounted", None, false),
            row(
                2,
                "add the parser",
                Some("claude-code:1f3a2b4c5d6e7f8091a2"),
                false,
            ),
            row(3, "tidy the docs\nsecond line", Some("codex"), false),
            row(4, "retired work", Some("codex"), true),
        ]
    }

    fn shown(typed: &str) -> Vec<u64> {
        let cs = choices(&rows(), 100);
        let mut scored: Vec<(i64, u64)> = cs
            .iter()
            .enumerate()
            .filter_map(|(i, c)| score(typed, c, &c.line, i).map(|s| (s, c.turn.get())))
            .collect();
        scored.sort_by_key(|(s, _)| std::cmp::Reverse(*s));
        scored.into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn the_live_turns_are_listed_newest_first_in_the_width_given() {
        let cs = choices(&rows(), 100);
        let turns: Vec<u64> = cs.iter().map(|c| c.turn.get()).collect();
        assert_eq!(turns, [3, 2, 1], "the rewound turn 4 is left out");
        for c in &cs {
            assert!(c.line.width() <= 100 - PREFIX, "{:?}", c.line);
            assert_eq!(c.line.lines().count(), 1, "{:?}", c.line);
        }
        assert!(cs[0].line.contains("tidy the docs second line"));
        assert!(cs[0].line.contains("codex"));
        assert!(cs[0].line.ends_with("+3 ~1 -0"), "{:?}", cs[0].line);
        assert!(
            cs[1].line.contains("claude-code:1f3a2b4c…"),
            "{:?}",
            cs[1].line
        );
        assert!(cs[2].line.contains("sh"), "who changed an unmarked turn");
        let narrow = choices(&rows(), 40);
        assert!(
            narrow[1].line.contains("add the par…"),
            "{:?}",
            narrow[1].line
        );
    }

    #[test]
    fn steps_are_listed_under_their_turn_in_the_order_they_ran() {
        let step = |turn: &str, label: &str| -> TurnRow {
            serde_json::from_value(serde_json::json!({
                "turn": turn, "label": label, "time": 1_700_000_500u64,
                "created": 0, "modified": 1, "deleted": 0, "bytes": 0,
                "programs": ["sh"], "skipped": [], "by": "claude-code",
            }))
            .expect("a log row")
        };
        let mut rs = rows();
        rs.insert(2, step("2.1", "Edit: src/a.rs"));
        rs.insert(3, step("2.2", "Bash: npm install"));
        let cs = choices(&rs, 100);
        let order: Vec<String> = cs.iter().map(|c| c.turn.to_string()).collect();
        assert_eq!(order, ["3", "2", "2.1", "2.2", "1"]);
        assert!(
            cs[3].line.contains("  Bash: npm install"),
            "{:?}",
            cs[3].line
        );
        let typed: Vec<String> = cs
            .iter()
            .enumerate()
            .filter(|(i, c)| score("npm", c, &c.line, *i).is_some())
            .map(|(_, c)| c.turn.to_string())
            .collect();
        assert_eq!(typed, ["2.2"]);
    }

    #[test]
    fn typing_filters_by_label_name_or_number() {
        assert_eq!(shown(""), [3, 2, 1]);
        assert_eq!(shown("PARSER"), [2]);
        assert_eq!(shown("codex"), [3]);
        assert_eq!(shown("claude 1f3a"), [2]);
        assert_eq!(shown("#1"), [1]);
        assert_eq!(shown("2"), [2], "the whole number");
        assert_eq!(shown("d"), [3, 2, 1], "in the labels, in order");
        assert_eq!(
            shown("retired"),
            Vec::<u64>::new(),
            "rewound turns are not offered"
        );
        assert!(shown("nothing like it").is_empty());
    }
}
