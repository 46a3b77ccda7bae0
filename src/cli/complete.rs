//! `ckpt-mount __complete SHELL`: the moments a completion script offers where a moment goes
//! (`rewind`, `diff`, `show`, `cat`, `restore`), asked of the binary at each TAB.
//!
//! The scripts `ckpt-mount completions SHELL` prints are clap_complete's static ones (options,
//! subcommands, files) plus a few lines that first run this hidden subcommand with the words
//! typed. It decides, with the clap definitions themselves, whether the word under the cursor
//! is a command's moment, and for which folder (`--dir`, or the current directory); exit 0 and
//! the candidates when it is (none when no mounted folder answers), exit 1 when it is not, so
//! the script goes on to clap_complete's completion. It prints nothing on stderr: a TAB must
//! never write into the user's terminal.
//!
//! Why not clap_complete's dynamic completion (`CompleteEnv`): it sits behind the
//! `unstable-dynamic` feature, whose API and registration lines may change in any release, and
//! every user's shell setup would have to change with it; the static scripts keep working as
//! they are, and this subcommand's output (`value<TAB>description` lines) is ours to keep.

use crate::info::{MomentRow, TurnRow};
use crate::moment::{Moment, Use};
use clap::{Args, CommandFactory, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// `ckpt-mount __complete`.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// The shell asking: how it passes the words, and how it wants the answer
    pub shell: Asking,
    /// bash: the text readline replaces (`$2`), which stops at `:` or `=`
    #[arg(long, allow_hyphen_values = true)]
    pub word: Option<OsString>,
    /// bash: the line up to the cursor (`${COMP_LINE:0:COMP_POINT}`); zsh and fish: the words
    /// typed after the program's name (unquoted), the last one being the word under the cursor
    #[arg(last = true, allow_hyphen_values = true)]
    pub words: Vec<OsString>,
}

/// The shells the scripts are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Asking {
    /// Values only, quoted for the line, those that start with the word.
    Bash,
    /// `value<TAB>description`, every candidate (zsh matches them itself).
    Zsh,
    /// `value<TAB>description`, every candidate (fish matches them itself).
    Fish,
}

/// The subcommands that take a moment, and what for: a rewind goes to live turns only.
const TAKE_A_MOMENT: [(&str, Use); 5] = [
    ("rewind", Use::Rewind),
    ("diff", Use::Read),
    ("show", Use::Read),
    ("cat", Use::Read),
    ("restore", Use::Read),
];

/// The argument id of the moment in each of them.
const MOMENT_ARG: &str = "turn";

/// Put in the place of the word under the cursor, to see which argument clap gives it: a valid
/// moment for every moment parser, not a number (so `diff`'s paths take it too), and none a
/// user types (so a moment typed before is not taken for it).
const PLACEHOLDER: &str = "1#18446744073709551615";

/// How long a TAB waits for the daemon: past that, no candidates rather than a frozen prompt
/// (a daemon busy with a long rewind answers later).
const WAIT: Duration = Duration::from_secs(1);

/// Descriptions longer than this are cut (a label may be a whole prompt).
const ABOUT_CHARS: usize = 60;

/// At most this many `/TEXT` offers, the newest labels that begin with what was typed: a long
/// history has thousands, more than a shell lists, and typing more narrows them.
const LABEL_OFFERS: usize = 100;

/// Where the word under the cursor goes: a moment of `command`'s, in the folder `dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The subcommand.
    pub command: String,
    /// What the moment is for.
    pub wanted: Use,
    /// `--dir` as typed, if it was.
    pub dir: Option<PathBuf>,
}

/// One candidate: the word to insert and what the shell shows beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The moment as it is typed.
    pub value: String,
    /// The label's first line (or, for a `/TEXT` form, the turn it names).
    pub about: String,
}

/// Runs `__complete`: exit 0 with the candidates, or exit 1 (nothing printed) when the word is
/// not a moment. Never an error line: whatever fails, the shell gets no candidates.
pub fn run(a: CompleteArgs) -> super::CliResult {
    let not_a_moment = || Err(super::CliError::fail(""));
    let Some((words, typed)) = words_of(&a) else {
        return not_a_moment();
    };
    let Some(slot) = slot(&words) else {
        return not_a_moment();
    };
    let current = words
        .last()
        .map(|w| w.to_string_lossy().into_owned())
        .unwrap_or_default();
    let current = current.as_str();
    let rows = rows(slot.dir.clone()).unwrap_or_default();
    let offers = offers(&rows, slot.wanted, slot.command == "diff", current);
    let mut out = String::new();
    match a.shell {
        Asking::Bash => {
            let word = a.word.as_ref().map(|w| w.to_string_lossy().into_owned());
            for o in offers.iter().filter(|o| o.value.starts_with(current)) {
                if let Some(v) = bash_reply(&o.value, &typed, word.as_deref()) {
                    out.push_str(&v);
                    out.push('\n');
                }
            }
        }
        Asking::Zsh | Asking::Fish => {
            for o in &offers {
                out.push_str(&format!("{}\t{}\n", o.value, o.about));
            }
        }
    }
    use std::io::Write;
    // A closed pipe (the shell gave up on us) is no failure worth a word.
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(())
}

/// The words after the program's name, unquoted and byte for byte (a folder's name need not be
/// UTF-8), the word under the cursor last; and that word as it was typed (bash: quotes and
/// backslashes included).
fn words_of(a: &CompleteArgs) -> Option<(Vec<OsString>, String)> {
    use std::os::unix::ffi::OsStringExt;
    match a.shell {
        Asking::Bash => {
            use std::os::unix::ffi::OsStrExt;
            let line = a.words.first()?.as_bytes();
            let mut tokens = split_line(line);
            let typed = tokens
                .last()
                .map(|t| String::from_utf8_lossy(&t.raw).into_owned())
                .unwrap_or_default();
            if tokens.is_empty() {
                return None;
            }
            tokens.remove(0);
            let words = tokens
                .into_iter()
                .map(|t| OsString::from_vec(t.value))
                .collect();
            Some((words, typed))
        }
        Asking::Zsh | Asking::Fish => {
            let typed = a
                .words
                .last()
                .map(|w| w.to_string_lossy().into_owned())
                .unwrap_or_default();
            Some((a.words.clone(), typed))
        }
    }
}

/// A word of a shell line: its value (quotes removed) and its text as typed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    value: Vec<u8>,
    raw: Vec<u8>,
}

/// Splits the line before the cursor into words as bash does (blanks, `'…'`, `"…"`, `\x`); a
/// line that ends in a blank has an empty last word, the one being completed. Expansions stay
/// as typed: only the folder's `~` matters here, and [`rows`] expands it. Bytes, not
/// characters: every byte that means something here is ASCII, and a name need not be UTF-8.
fn split_line(line: &[u8]) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut cur: Option<Token> = None;
    let mut bytes = line.iter().copied().peekable();
    let mut quote: Option<u8> = None;
    while let Some(c) = bytes.next() {
        let t = cur.get_or_insert_with(|| Token {
            value: Vec::new(),
            raw: Vec::new(),
        });
        match (quote, c) {
            (None, b' ' | b'\t' | b'\n') => {
                if let Some(t) = cur.take()
                    && !t.raw.is_empty()
                {
                    tokens.push(t);
                }
                continue;
            }
            (None, b'\'' | b'"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, b'\\') | (Some(b'"'), b'\\') => {
                t.raw.push(c);
                if let Some(next) = bytes.next() {
                    t.raw.push(next);
                    // Inside double quotes a backslash escapes only these.
                    if quote.is_some() && !matches!(next, b'"' | b'\\' | b'$' | b'`' | b'\n') {
                        t.value.push(b'\\');
                    }
                    if next != b'\n' {
                        t.value.push(next);
                    }
                }
                continue;
            }
            _ => t.value.push(c),
        }
        t.raw.push(c);
    }
    let ends_in_blank = quote.is_none() && matches!(line.last(), Some(b' ' | b'\t' | b'\n'));
    if let Some(t) = cur {
        tokens.push(t);
    }
    if ends_in_blank || tokens.is_empty() {
        tokens.push(Token {
            value: Vec::new(),
            raw: Vec::new(),
        });
    }
    tokens
}

/// Whether the last of `words` (typed after the program's name) is a moment, and of which
/// command: clap parses the words with [`PLACEHOLDER`] in its place, and it is a moment when
/// clap gives it to the moment argument (the clap definitions decide, not a copy of them). A
/// word that starts with `-` is left to the options (`-K` is a moment too, but `-` is where
/// the options are asked for).
pub fn slot(words: &[OsString]) -> Option<Slot> {
    use std::os::unix::ffi::OsStrExt;
    let (current, before) = words.split_last()?;
    if current.as_bytes().starts_with(b"-") {
        return None;
    }
    let mut cmd = super::Cli::command();
    // A required argument not typed yet (`cat`'s path, `restore --to`) must not make the
    // parse fail: it comes later on the line.
    for (name, _) in TAKE_A_MOMENT {
        cmd = cmd.mut_subcommand(name, |sub| {
            let required: Vec<clap::Id> = sub
                .get_arguments()
                .filter(|a| a.is_required_set())
                .map(|a| a.get_id().clone())
                .collect();
            required
                .into_iter()
                .fold(sub, |sub, id| sub.mut_arg(id, |a| a.required(false)))
        });
    }
    let argv: Vec<&std::ffi::OsStr> = std::iter::once("ckpt-mount".as_ref())
        .chain(before.iter().map(OsString::as_os_str))
        .chain(std::iter::once(PLACEHOLDER.as_ref()))
        .collect();
    let matches = cmd.try_get_matches_from(&argv).ok()?;
    let (name, sub) = matches.subcommand()?;
    let wanted = TAKE_A_MOMENT
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, w)| *w)?;
    // The value, not its index: clap counts `--dir=X` as two indices.
    let value = sub.try_get_raw(MOMENT_ARG).ok().flatten()?.next()?;
    if value != PLACEHOLDER {
        return None;
    }
    let dir = sub.try_get_one::<PathBuf>("dir").ok().flatten().cloned();
    Some(Slot {
        command: name.to_string(),
        wanted,
        dir,
    })
}

/// The moments `log` lists for the folder `dir` names (none: the one containing the current
/// directory), when that folder is mounted and its daemon answers within [`WAIT`]; `None`
/// otherwise. An unmounted folder's store is not opened: a keypress must not take its lock.
fn rows(dir: Option<PathBuf>) -> Option<Vec<MomentRow>> {
    let folder = match dir {
        Some(d) => {
            let given = expand_home(d).canonicalize().ok()?;
            crate::mounts::find_folder(&given).unwrap_or(given)
        }
        None => crate::mounts::find_folder(&std::env::current_dir().ok()?)?,
    };
    if crate::mounts::state(&folder) != crate::mounts::MountState::Live {
        return None;
    }
    ask_moments(&folder)
}

/// The moments the daemon of `folder` answers within [`WAIT`] a question, `None` otherwise.
fn ask_moments(folder: &std::path::Path) -> Option<Vec<MomentRow>> {
    use crate::ipc::{Answer, Request, call_within};
    let answer: Answer<Vec<MomentRow>> = call_within(folder, &Request::Moments, WAIT).ok()?;
    if answer.ok {
        return answer.data;
    }
    // A daemon started by an older binary knows no `Moments`: its log has them too.
    let log: Answer<Vec<TurnRow>> = call_within(folder, &Request::Log, WAIT).ok()?;
    let rows = log.ok.then_some(log.data).flatten()?;
    Some(rows.into_iter().map(MomentRow::from).collect())
}

/// `~` and `~/…` as the shell would expand them (the words reach us as typed).
fn expand_home(p: PathBuf) -> PathBuf {
    let Some(home) = std::env::var_os("HOME") else {
        return p;
    };
    match p.strip_prefix("~") {
        Ok(rest) => PathBuf::from(home).join(rest),
        Err(_) => p,
    }
}

/// What to offer for `current` among `rows` (in `log`'s order): the turns by number as `log`
/// names them (`3`, `3#5` for one a rewind retired; a rewind only to live ones), described by
/// their labels; or, for a word that starts with `/`, the labels as `/TEXT` (those that begin
/// with what follows the `/`, case ignored, newest first, at most [`LABEL_OFFERS`]),
/// described by the turn each names. With `span` (`diff`), a word `A..` completes its second
/// moment.
pub fn offers(rows: &[MomentRow], wanted: Use, span: bool, current: &str) -> Vec<Offer> {
    let (prefix, word) = match current.split_once("..") {
        Some((a, b)) if span && !current.starts_with('/') => (format!("{a}.."), b),
        _ => (String::new(), current),
    };
    let usable: Vec<&MomentRow> = rows
        .iter()
        .filter(|r| wanted == Use::Read || r.rewound_by.is_none())
        .collect();
    if !word.starts_with('/') {
        return usable
            .iter()
            .map(|r| Offer {
                value: format!("{prefix}{}", moment_of(r)),
                about: about(r.label.as_deref().unwrap_or("")),
            })
            .collect();
    }
    // `/TEXT` names the newest turn whose label contains TEXT, case ignored (`Spec::resolve`):
    // the same rule here, on labels lowered once, newest first (ties as `max_by_key` breaks
    // them: the last in `log`'s order), so that a long history costs a scan per offer.
    let typed = word.trim_start_matches('/').to_lowercase();
    let mut newest_first: Vec<(&MomentRow, String)> = usable
        .iter()
        .map(|r| (*r, r.label.as_deref().unwrap_or("").to_lowercase()))
        .collect();
    newest_first.sort_by_key(|(r, _)| {
        std::cmp::Reverse((r.time, r.rewound_by.is_none(), r.turn, r.rewound_by))
    });
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<Offer> = Vec::new();
    for (r, _) in &newest_first {
        if out.len() == LABEL_OFFERS {
            break;
        }
        let Some(text) = r.label.as_deref().map(label_text) else {
            continue;
        };
        let lower = text.to_lowercase();
        if text.is_empty() || !lower.starts_with(&typed) || !seen.insert(text) {
            continue;
        }
        // Which may be another turn than this one's: say which.
        let Some((named, _)) = newest_first.iter().find(|(_, l)| l.contains(&lower)) else {
            continue;
        };
        out.push(Offer {
            value: format!("{prefix}/{text}"),
            about: format!("turn {}", moment_of(named)),
        });
    }
    out
}

fn moment_of(r: &MomentRow) -> Moment {
    Moment {
        turn: r.turn,
        rewound_by: r.rewound_by,
    }
}

/// A label as the text of `/TEXT`: up to its first control character (a tab, a newline), the
/// blanks at its end dropped. `/TEXT` matches a part of a label, so the turn stays named, and
/// no candidate carries a character that the shells' line protocols or line editors trip on.
fn label_text(label: &str) -> &str {
    label
        .split(|c: char| c.is_control())
        .next()
        .unwrap_or("")
        .trim_end()
}

/// A label as a description: its first line, control characters as blanks, blanks collapsed,
/// cut at [`ABOUT_CHARS`].
fn about(label: &str) -> String {
    let first = label.split(['\n', '\r']).next().unwrap_or("");
    let words: Vec<&str> = first
        .split(|c: char| c.is_control() || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let text = words.join(" ");
    if text.chars().count() <= ABOUT_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(ABOUT_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// A candidate as bash inserts it: quoted for the line, or, inside a quote the user opened
/// (readline replaces what follows it, and closes it), quoted for inside that quote. When
/// readline's word (`word`) is only the end of the word typed (bash splits words at `:` and
/// `=` too), the reply is cut to that end: what readline replaces. `None` when the reply would
/// not extend what was typed.
fn bash_reply(value: &str, typed: &str, word: Option<&str>) -> Option<String> {
    if typed.starts_with('\'') {
        return Some(value.replace('\'', "'\\''"));
    }
    if typed.starts_with('"') {
        let mut out = String::with_capacity(value.len());
        for c in value.chars() {
            if matches!(c, '"' | '\\' | '$' | '`') {
                out.push('\\');
            }
            out.push(c);
        }
        return Some(out);
    }
    let quoted = bash_quote(value);
    match word {
        Some(w) if typed.len() > w.len() && typed.ends_with(w) => {
            let head = &typed[..typed.len() - w.len()];
            quoted.strip_prefix(head).map(str::to_string)
        }
        _ => Some(quoted),
    }
}

/// `value` with a backslash before every character bash would read as anything but itself.
fn bash_quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let plain = c.is_alphanumeric() || "_./#@%+,:=-".contains(c) || !c.is_ascii();
        if !plain {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_of(line: &str) -> Option<(String, Use, Option<PathBuf>)> {
        use std::os::unix::ffi::OsStringExt;
        let tokens = split_line(line.as_bytes());
        let words: Vec<OsString> = tokens
            .into_iter()
            .skip(1)
            .map(|t| OsString::from_vec(t.value))
            .collect();
        slot(&words).map(|s| (s.command, s.wanted, s.dir))
    }

    #[test]
    fn a_moment_goes_where_clap_puts_the_turn() {
        let moment = |line: &str, cmd: &str| {
            assert_eq!(
                slot_of(line).map(|s| s.0),
                Some(cmd.to_string()),
                "{line:?}"
            );
        };
        moment("ckpt-mount rewind ", "rewind");
        moment("ckpt-mount rewind --dry-run ", "rewind");
        moment("ckpt-mount rewind /fi", "rewind");
        moment("ckpt-mount diff ", "diff");
        moment("ckpt-mount diff --stat 2..", "diff");
        moment("ckpt-mount show ", "show");
        moment("ckpt-mount cat ", "cat");
        moment("ckpt-mount restore --to x ", "restore");
        moment("ckpt-mount restore ", "restore");
        let not = |line: &str| assert_eq!(slot_of(line), None, "{line:?}");
        not("ckpt-mount ");
        not("ckpt-mount rew");
        not("ckpt-mount rewind 2 ");
        not("ckpt-mount rewind -");
        not("ckpt-mount rewind --dir ");
        not("ckpt-mount rewind --agent ");
        not("ckpt-mount rewind 2 -- ");
        not("ckpt-mount cat 2 ");
        not("ckpt-mount cat -- ");
        not("ckpt-mount diff 2 ");
        not("ckpt-mount restore --to ");
        not("ckpt-mount turn ");
        not("ckpt-mount log ");
        not("ckpt-mount rewind --help ");
    }

    #[test]
    fn the_folder_is_the_dir_typed_before() {
        assert_eq!(
            slot_of("ckpt-mount rewind --dir '/a b' "),
            Some(("rewind".into(), Use::Rewind, Some(PathBuf::from("/a b"))))
        );
        assert_eq!(
            slot_of("ckpt-mount cat --dir=~/s ").map(|s| s.2),
            Some(Some(PathBuf::from("~/s")))
        );
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(b"/x\xff".to_vec());
        let words = ["rewind".into(), "--dir".into(), odd.clone(), "".into()];
        assert_eq!(slot(&words).and_then(|s| s.dir), Some(PathBuf::from(odd)));
        assert_eq!(
            expand_home(PathBuf::from("~/s")),
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join("s")
        );
    }

    #[test]
    fn the_line_splits_as_bash_reads_it() {
        let values = |line: &[u8]| -> Vec<Vec<u8>> {
            split_line(line).into_iter().map(|t| t.value).collect()
        };
        let text = |line: &str| -> Vec<String> {
            values(line.as_bytes())
                .into_iter()
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .collect()
        };
        assert_eq!(
            text("a 'b c' \"d\\\"e\" f\\ g "),
            ["a", "b c", "d\"e", "f g", ""]
        );
        assert_eq!(text("a /fix\\ th"), ["a", "/fix th"]);
        assert_eq!(text("a '/fix th"), ["a", "/fix th"]);
        assert_eq!(split_line(b"a '/fix th")[1].raw, b"'/fix th");
        assert_eq!(text(""), [""]);
        // A name that is not UTF-8 keeps its bytes, quoted or not.
        assert_eq!(
            values(b"a --dir '/x\xff y' /z\xfe"),
            [&b"a"[..], b"--dir", b"/x\xff y", b"/z\xfe"]
        );
    }

    fn row(turn: u64, label: Option<&str>, by: Option<u64>) -> MomentRow {
        serde_json::from_value(serde_json::json!({
            "turn": turn, "label": label, "time": 1000 + turn, "rewound_by": by,
        }))
        .unwrap_or_else(|e| panic!("a row: {e}"))
    }

    fn values(offers: &[Offer]) -> Vec<&str> {
        offers.iter().map(|o| o.value.as_str()).collect()
    }

    #[test]
    fn numbers_as_log_names_them_and_labels_after_a_slash() {
        let rows = [
            row(1, None, None),
            row(2, Some("fix the build"), Some(5)),
            row(2, Some("fix the\tbuild\nsecond line"), None),
            row(3, Some("fix"), None),
        ];
        assert_eq!(
            values(&offers(&rows, Use::Read, false, "")),
            ["1", "2#5", "2", "3"]
        );
        assert_eq!(
            values(&offers(&rows, Use::Rewind, false, "")),
            ["1", "2", "3"]
        );
        let read = offers(&rows, Use::Read, false, "/");
        assert_eq!(values(&read), ["/fix", "/fix the", "/fix the build"]);
        assert_eq!(read[1].about, "turn 2", "{read:?}");
        assert_eq!(read[2].about, "turn 2#5", "{read:?}");
        assert_eq!(
            offers(&rows, Use::Read, false, "")[2].about,
            "fix the build",
            "the first line, a tab as a blank"
        );
        assert_eq!(
            values(&offers(&rows, Use::Read, true, "1..")),
            ["1..1", "1..2#5", "1..2", "1..3"]
        );
        assert_eq!(
            values(&offers(&rows, Use::Read, true, "1../f"))[0],
            "1../fix"
        );
        let long = "x".repeat(200);
        assert_eq!(about(&long).chars().count(), ABOUT_CHARS);
    }

    #[test]
    fn a_label_offer_names_the_turn_spec_resolve_names() {
        use crate::moment::{Candidate, Spec};
        let rows = [
            row(1, Some("dup"), None),
            row(2, Some("dup more"), Some(3)),
            row(2, Some("dup more"), Some(5)),
            row(2, Some("Dup"), None),
            row(3, Some("other"), Some(5)),
        ];
        let candidates: Vec<Candidate> = rows
            .iter()
            .map(|r| Candidate {
                moment: moment_of(r),
                time: r.time,
                label: r.label.clone(),
            })
            .collect();
        for wanted in [Use::Read, Use::Rewind] {
            let offers = offers(&rows, wanted, false, "/");
            assert!(!offers.is_empty());
            for o in offers {
                let text = o.value.trim_start_matches('/').to_string();
                let named = Spec::Label(text)
                    .resolve(&candidates, wanted)
                    .map(|m| format!("turn {m}"));
                assert_eq!(named.as_ref(), Ok(&o.about), "{wanted:?} {o:?}");
            }
        }
        assert_eq!(
            values(&offers(&rows, Use::Read, false, "/D")),
            ["/Dup", "/dup more", "/dup"],
            "those that begin with what is typed, case ignored, newest first"
        );
        let many: Vec<MomentRow> = (1..=500)
            .map(|t| row(t, Some(&format!("label {t}")), None))
            .collect();
        let offered = offers(&many, Use::Read, false, "/");
        assert_eq!(offered.len(), LABEL_OFFERS);
        assert_eq!(offered[0].value, "/label 500");
    }

    /// A daemon on the control socket of a made-up folder, answering with `answer`.
    fn fake_daemon(
        name: &str,
        answer: impl Fn(crate::ipc::Request) -> crate::ipc::Response + Send + Sync + 'static,
    ) -> PathBuf {
        let folder = PathBuf::from(format!(
            "/nonexistent/ckpt-complete-{name}-{}",
            std::process::id()
        ));
        let listener = crate::ipc::listen(&folder).unwrap_or_else(|e| panic!("listen: {e}"));
        // Serves until the test process ends.
        std::thread::spawn(move || crate::ipc::serve(listener, move |req, _| answer(req).into()));
        folder
    }

    #[test]
    fn an_older_daemon_is_asked_its_log_and_a_busy_one_not_waited_for() {
        use crate::ipc::{Request, Response};
        let log_row = serde_json::json!({
            "turn": 2, "label": "from the log", "time": 7, "created": 0, "modified": 0,
            "deleted": 0, "bytes": 0, "programs": [], "skipped": [],
        });
        // A daemon started before `Moments` existed refuses it as a bad request.
        let older = fake_daemon("older", move |req| match req {
            Request::Log => Response::ok(&vec![log_row.clone()]),
            _ => Response::fail("bad request: unknown variant `moments`"),
        });
        let rows = ask_moments(&older).unwrap_or_default();
        assert_eq!(values(&offers(&rows, Use::Read, false, "")), ["2"]);
        assert_eq!(rows[0].label.as_deref(), Some("from the log"));

        let current = fake_daemon("current", |req| match req {
            Request::Moments => Response::ok(&vec![row(3, Some("x"), Some(4))]),
            _ => Response::fail("only moments"),
        });
        let rows = ask_moments(&current).unwrap_or_default();
        assert_eq!(values(&offers(&rows, Use::Read, false, "")), ["3#4"]);

        let busy = fake_daemon("busy", |_| {
            std::thread::sleep(WAIT * 5);
            Response::fail("too late")
        });
        let asked = std::time::Instant::now();
        assert_eq!(ask_moments(&busy), None);
        assert!(asked.elapsed() < WAIT * 3, "{:?}", asked.elapsed());
    }

    #[test]
    fn bash_gets_quoted_words_cut_where_readline_splits() {
        assert_eq!(bash_quote("/it's \"x\" $y"), "/it\\'s\\ \\\"x\\\"\\ \\$y");
        assert_eq!(bash_quote("3#5"), "3#5");
        assert_eq!(
            bash_reply("/a:b c", "/a:", Some("")).as_deref(),
            Some("b\\ c")
        );
        assert_eq!(
            bash_reply("/a b", "'/a", Some("'/a")).as_deref(),
            Some("/a b")
        );
        assert_eq!(
            bash_reply("/a b", "/a", Some("/a")).as_deref(),
            Some("/a\\ b")
        );
        // Inside a quote the user opened, quoted for inside it.
        assert_eq!(
            bash_reply("/it's \"$x\"", "'/it", Some("/it")).as_deref(),
            Some("/it'\\''s \"$x\"")
        );
        assert_eq!(
            bash_reply("/it's \"$x\"", "\"/it", Some("/it")).as_deref(),
            Some("/it's \\\"\\$x\\\"")
        );
    }
}
