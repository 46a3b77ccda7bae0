//! The command line without a folder or a mount: clap's usage errors, our own usage errors
//! ([`Cli::check`]), every `--help` text, and every example those texts show. What the binary
//! prints is compared whole with reviewed snapshots (`src/cli/snapshots/`); the cases that
//! need a folder or a mount are in `tests/bad_input.rs`.

use super::*;
use crate::ids::Turn;
use crate::moment::Spec;
use clap::CommandFactory;

/// A `--dir` that does not exist: a case that reached the folder would answer "cannot open"
/// (exit 1), not a usage error (exit 2).
const NO_DIR: &str = "/nonexistent/ckpt-unit-folder";
/// A second one, for the cases that name two folders.
const NO_DIR_2: &str = "/nonexistent/ckpt-unit-other";

/// What the binary answers to its arguments when it refuses them before running anything.
struct Answer {
    /// The exit code.
    code: i32,
    /// Whether the text goes to stderr (clap prints a help asked for on stdout).
    on_stderr: bool,
    /// What it prints.
    text: String,
}

fn argv(args: &[&str]) -> Vec<String> {
    std::iter::once("ckpt-mount")
        .chain(args.iter().copied())
        .map(|a| a.replace("{D}", NO_DIR).replace("{D2}", NO_DIR_2))
        .collect()
}

/// What `ckpt-mount ARGS` answers, as `main` does: clap's error (printed and exited with by
/// `Cli::parse`), or our own usage error as one `ckpt-mount: ` line. Panics when the
/// arguments are accepted: only refusals are asked about here.
fn answer(args: &[&str]) -> Answer {
    let argv = argv(args);
    let cli = match Cli::try_parse_from(&argv) {
        Err(e) => {
            return Answer {
                code: e.exit_code(),
                on_stderr: e.use_stderr(),
                text: e.to_string(),
            };
        }
        Ok(cli) => cli,
    };
    let Err(e) = cli.check() else {
        panic!("{argv:?} was accepted");
    };
    // `run` refuses the same way before it opens anything: with a folder that does not exist,
    // a case that got as far as the folder would fail to open it instead.
    let again = run(Cli::try_parse_from(&argv).expect("parsed once already"));
    let again = again.err().map(|e| (e.code, e.message));
    assert_eq!(
        again,
        Some((e.code, e.message.clone())),
        "{argv:?}: run answers otherwise than check"
    );
    Answer {
        code: e.code,
        on_stderr: true,
        text: format!("ckpt-mount: {}\n", e.message),
    }
}

/// The arguments as a shell command line: a word that is empty or holds anything but
/// letters, digits and `-_./:=^` is single-quoted.
fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=^".contains(c);
            if !a.is_empty() && a.chars().all(plain) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a case must answer.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// clap's usage error: exit 2, the first stderr line starts with `error:`.
    Clap,
    /// No subcommand at all: clap prints the help on stderr and exits 2.
    Help,
    /// Our own usage error: exit 2, one stderr line starting `ckpt-mount: ` with this text.
    Usage(&'static str),
}

/// Checks each case and returns the transcript of what the binary prints, for a snapshot.
fn refusals(cases: &[(&[&str], Want)]) -> String {
    let mut failures = Vec::new();
    let mut transcript = String::new();
    for (args, want) in cases {
        let a = answer(args);
        let lines: Vec<&str> = a.text.lines().collect();
        let problem = match *want {
            _ if !a.on_stderr => Some("a refusal is printed on stderr".to_string()),
            _ if a.code != 2 => Some("usage errors exit 2".into()),
            Want::Clap if !lines.first().is_some_and(|l| l.starts_with("error:")) => {
                Some("the first stderr line must start with error:".into())
            }
            Want::Help if !a.text.contains("Usage:") => {
                Some("no subcommand: the help, on stderr".into())
            }
            Want::Usage(_) if lines.len() != 1 => {
                Some(format!("exactly one stderr line, not {}", lines.len()))
            }
            Want::Usage(t) if !a.text.contains(t) => Some(format!("stderr must contain {t:?}")),
            Want::Usage(_) if !a.text.starts_with("ckpt-mount: ") => {
                Some("the line must start with ckpt-mount:".into())
            }
            _ => None,
        };
        if let Some(p) = problem {
            failures.push(format!(
                "{args:?} ({want:?}): {p}\n    exit {}, stderr: {:?}",
                a.code, a.text
            ));
        }
        transcript.push_str(&format!(
            "$ {}\nexit {}, stderr:\n{}\n",
            shell_line(&argv(args)),
            a.code,
            a.text.trim_end()
        ));
        transcript.push('\n');
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    transcript
}

use Want::*;

#[test]
fn no_subcommand_or_an_unknown_one_is_refused() {
    let cases: &[(&[&str], Want)] = &[(&[], Help), (&["frobnicate"], Clap), (&["--bogus"], Clap)];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn mount_and_unmount_refuse_bad_arguments() {
    let cases: &[(&[&str], Want)] = &[
        (&["mount"], Clap),
        (&["mount", "{D}", "{D2}"], Clap),
        (&["mount", "{D}", "--bogus"], Clap),
        (&["mount", "{D}", "--max-blob"], Clap),
        (&["mount", "{D}", "--max-blob", "abc"], Clap),
        (&["mount", "{D}", "--max-blob", "5Q"], Clap),
        (&["mount", "{D}", "--max-blob", "99999999999T"], Clap),
        (&["mount", "{D}", "--threads", "-1"], Clap),
        (&["mount", "{D}", "--ttl", "x"], Clap),
        (&["unmount"], Clap),
        (&["unmount", "{D}", "{D2}"], Clap),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn turn_refuses_bad_arguments() {
    let cases: &[(&[&str], Want)] = &[
        (&["turn", "abc", "--dir", "{D}"], Clap),
        (&["turn", "-1", "--dir", "{D}"], Clap),
        (&["turn", "-5"], Clap),
        (&["turn", "1.", "--dir", "{D}"], Clap),
        (&["turn", "1.0", "--dir", "{D}"], Clap),
        (&["turn", "1.5.2", "--dir", "{D}"], Clap),
        (&["turn", "5", "--step", "--dir", "{D}"], Clap),
        (&["turn", "1e3", "--dir", "{D}"], Clap),
        (&["turn", "", "--dir", "{D}"], Clap),
        (&["turn", "99999999999999999999999", "--dir", "{D}"], Clap),
        (&["turn", "4", "5", "--dir", "{D}"], Clap),
        (&["turn", "--dir"], Clap),
        (&["turn", "4", "-m"], Clap),
        (&["turn", "--offline", "--dir", "{D}"], Clap),
        (
            &["turn", "0", "--dir", "{D}"],
            Usage("from 1 to 4294967295"),
        ),
        (
            &["turn", "4294967296", "--dir", "{D}"],
            Usage("from 1 to 4294967295"),
        ),
        (
            &["turn", "9007199254740991", "--offline", "--dir", "{D}"],
            Usage("from 1 to 4294967295"),
        ),
        (
            &["turn", "-m", "label", "--dir", "{D}"],
            Usage("--message needs a turn number"),
        ),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn rewind_refuses_bad_arguments() {
    let cases: &[(&[&str], Want)] = &[
        (&["rewind", "abc", "--dir", "{D}"], Clap),
        (&["rewind", "abc"], Clap),
        (&["rewind", "-0", "--dir", "{D}"], Clap),
        (&["rewind", "3#x", "--dir", "{D}"], Clap),
        (&["rewind", "@25:00", "--dir", "{D}"], Clap),
        (&["rewind", "two", "--dir", "{D}"], Clap),
        (&["rewind", "99999999999999999999999", "--dir", "{D}"], Clap),
        (&["rewind", "--undo", "2", "--dir", "{D}"], Clap),
        (&["rewind", "2", "--bogus", "--dir", "{D}"], Clap),
        (&["rewind", "--undo", "--dir", "{D}", "--", "a"], Clap),
        (
            &["rewind", "2", "--conflicts", "rewind", "--dir", "{D}"],
            Clap,
        ),
        (
            &[
                "rewind",
                "2",
                "--agent",
                "--conflicts",
                "mine",
                "--dir",
                "{D}",
            ],
            Clap,
        ),
        (&["rewind", "2", "--agent", "--dir", "{D}", "--", "a"], Clap),
        (&["rewind", "--agent", "--undo", "--dir", "{D}"], Clap),
        (&["rewind", "0", "--dir", "{D}"], Usage("turns start at 1")),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn log_status_and_fsck_refuse_bad_arguments() {
    let cases: &[(&[&str], Want)] = &[
        (&["log", "extra", "--dir", "{D}"], Clap),
        (&["log", "--bogus", "--dir", "{D}"], Clap),
        (&["status", "extra", "--dir", "{D}"], Clap),
        (&["status", "--json=yes", "--dir", "{D}"], Clap),
        (&["fsck", "extra", "--dir", "{D}"], Clap),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn op_show_and_op_restore_refuse_what_is_not_an_operation_id() {
    let cases: &[(&[&str], Want)] = &[
        (&["op", "show", "--dir", "{D}"], Clap),
        (&["op", "show", "abc", "--dir", "{D}"], Clap),
        (&["op", "show", "0", "--dir", "{D}"], Clap),
        (&["op", "show", "##4", "--dir", "{D}"], Clap),
        (&["op", "show", "4", "5", "--dir", "{D}"], Clap),
        (&["op", "restore", "--dir", "{D}"], Clap),
        (&["op", "restore", "-3", "--dir", "{D}"], Clap),
        (&["op", "restore", "#+3", "--dir", "{D}"], Clap),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn diff_refuses_bad_arguments() {
    let cases: &[(&[&str], Want)] = &[
        (&["diff", "abc", "--dir", "{D}"], Clap),
        (&["diff", "-0", "--dir", "{D}"], Clap),
        (&["diff", "/", "--dir", "{D}"], Clap),
        // One turn only: a second number is not taken as a path (that goes after `--`).
        (&["diff", "2", "3", "--dir", "{D}"], Clap),
        (&["diff", "2", "src", "007", "--dir", "{D}"], Clap),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn prune_refuses_bad_arguments() {
    let cases: &[(&[&str], Want)] = &[
        (&["prune", "--keep-turns", "--dir", "{D}"], Clap),
        (&["prune", "--keep-turns", "abc", "--dir", "{D}"], Clap),
        (&["prune", "--keep-turns", "-1", "--dir", "{D}"], Clap),
        (&["prune", "--max-size", "5Q", "--dir", "{D}"], Clap),
        (&["prune", "--max-size", "lots", "--dir", "{D}"], Clap),
        (
            &["prune", "--keep-turns", "0", "--dir", "{D}"],
            Usage("--keep-turns must be at least 1"),
        ),
        (
            &[
                "prune",
                "--keep-turns",
                "0",
                "--max-size",
                "1G",
                "--dir",
                "{D}",
            ],
            Usage("--keep-turns must be at least 1"),
        ),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn run_refuses_bad_arguments() {
    let cases: &[(&[&str], Want)] = &[
        (&["run"], Clap),
        (&["run", "--dir", "{D}"], Clap),
        (&["run", "--dir", "{D}", "--"], Clap),
        (&["run", "--bogus", "--", "true"], Clap),
    ];
    insta::assert_snapshot!(refusals(cases));
}

/// `ckpt-mount ARGS --help` as the binary prints it (on stdout, exit 0).
fn help(args: &[&str]) -> String {
    let mut argv = vec!["ckpt-mount"];
    argv.extend_from_slice(args);
    argv.push("--help");
    match Cli::try_parse_from(&argv) {
        Ok(_) => panic!("{argv:?} ran instead of printing the help"),
        Err(e) => {
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{argv:?}");
            assert_eq!(e.exit_code(), 0, "{argv:?}");
            assert!(!e.use_stderr(), "{argv:?}: the help goes to stdout");
            e.to_string()
        }
    }
}

/// The names of our subcommands (not clap's own `help`).
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .filter(|n| n != "help")
        .collect()
}

#[test]
fn every_help_text_is_as_reviewed() {
    insta::assert_snapshot!("help", help(&[]));
    let subs = subcommands();
    assert_eq!(subs.len(), 21, "{subs:?}");
    for sub in subs {
        insta::assert_snapshot!(format!("help_{sub}"), help(&[&sub]));
    }
    for sub in ["show", "restore"] {
        insta::assert_snapshot!(format!("help_op_{sub}"), help(&["op", sub]));
    }
}

/// The example command lines of a help text: each line that starts with `Example:`.
fn examples(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| l.trim().strip_prefix("Example:"))
        .map(|e| e.trim().to_string())
        .collect()
}

/// The words of a shell command line up to its first pipe, redirection or comment, with its
/// quotes taken off; enough for the examples (no variables, no escapes inside quotes).
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, '|' | '>' | '<' | ';' | '&' | '#') if word.is_none() => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    assert!(quote.is_none(), "unbalanced quote in {line:?}");
    words.extend(word);
    words
}

#[test]
fn the_example_splitter_takes_quotes_and_stops_at_a_pipe_or_redirection() {
    assert_eq!(
        words(r#"ckpt-mount turn 3 -m "fix the build""#),
        ["ckpt-mount", "turn", "3", "-m", "fix the build"]
    );
    assert_eq!(words("ckpt-mount man | man -l -"), ["ckpt-mount", "man"]);
    assert_eq!(
        words("ckpt-mount completions bash > /etc/x"),
        ["ckpt-mount", "completions", "bash"]
    );
    assert_eq!(words("a '' b"), ["a", "", "b"]);
    assert_eq!(words("ckpt-mount fsck  # exits 1"), ["ckpt-mount", "fsck"]);
    assert_eq!(words("a b#c"), ["a", "b#c"]);
}

#[test]
fn every_example_in_every_help_is_valid_usage() {
    let mut checked = Vec::new();
    for sub in subcommands() {
        let text = help(&[&sub]);
        let found = examples(&text);
        assert!(
            !found.is_empty(),
            "`{sub} --help` shows no example:\n{text}"
        );
        for line in found {
            let argv = words(&line);
            assert_eq!(
                argv.get(..2),
                Some(&["ckpt-mount".to_string(), sub.clone()][..]),
                "the example of `{sub} --help` runs `ckpt-mount {sub}`: {line:?}"
            );
            match Cli::try_parse_from(&argv) {
                Err(e) => panic!("the example of `{sub} --help` is a usage error: {line:?}\n{e}"),
                Ok(cli) => {
                    if let Err(e) = cli.check() {
                        panic!(
                            "the example of `{sub} --help` is a usage error: {line:?}\n{}",
                            e.message
                        );
                    }
                }
            }
            checked.push(line);
        }
    }
    // The top-level help shows none of its own; were one added, it would be checked too.
    for line in examples(&help(&[])) {
        let argv = words(&line);
        if let Err(e) = Cli::try_parse_from(&argv) {
            panic!("the example of `--help` is a usage error: {line:?}\n{e}");
        }
        checked.push(line);
    }
    insta::assert_snapshot!(checked.join("\n"));
}

/// The parsed arguments of `ckpt-mount diff ARGS`.
fn diff_args(args: &[&str]) -> (Option<Spec>, bool, Vec<PathBuf>, Vec<PathBuf>) {
    let argv = argv(&[&["diff"], args].concat());
    match Cli::try_parse_from(&argv) {
        Ok(Cli {
            command: Command::Diff(a),
        }) => (
            a.turn.map(|t| t.from),
            a.stat,
            a.paths,
            a.paths_after_dashes,
        ),
        Ok(other) => panic!("{argv:?} parsed as {other:?}"),
        Err(e) => panic!("{argv:?}: {e}"),
    }
}

#[test]
fn diff_takes_paths_after_the_turn_with_or_without_dashes() {
    let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
    // The example of `diff --help`, as a user types it after `git diff`.
    assert_eq!(
        diff_args(&["2", "--stat", "src/"]),
        (Some(Spec::Turn(Turn::new(2))), true, p(&["src/"]), p(&[]))
    );
    assert_eq!(
        diff_args(&["2", "src/", "lib", "--", "3", "-x"]),
        (
            Some(Spec::Turn(Turn::new(2))),
            false,
            p(&["src/", "lib"]),
            p(&["3", "-x"])
        )
    );
    assert_eq!(
        diff_args(&["--", "src/"]),
        (None, false, p(&[]), p(&["src/"]))
    );
    assert_eq!(diff_args(&[]), (None, false, p(&[]), p(&[])));
    assert_eq!(
        diff_args(&["7"]),
        (Some(Spec::Turn(Turn::new(7))), false, p(&[]), p(&[]))
    );
}

#[test]
fn diff_takes_a_span_of_turns() {
    let span = |args: &[&str]| match Cli::try_parse_from(argv(&[&["diff"], args].concat())) {
        Ok(Cli {
            command: Command::Diff(a),
        }) => a.turn.map(|t| (t.from, t.to)),
        Ok(other) => panic!("{args:?} parsed as {other:?}"),
        Err(e) => panic!("{args:?}: {e}"),
    };
    assert_eq!(
        span(&["2..4", "src/"]),
        Some((Spec::Turn(Turn::new(2)), Some(Spec::Turn(Turn::new(4)))))
    );
    assert_eq!(span(&["3"]), Some((Spec::Turn(Turn::new(3)), None)));
    assert_eq!(
        span(&["1..3#4"]),
        Some((
            Spec::Turn(Turn::new(1)),
            Some(Spec::Rewound {
                turn: Turn::new(3),
                by: 4
            })
        ))
    );
    assert_eq!(span(&["/a..b"]), Some((Spec::Label("a..b".into()), None)));
    assert_eq!(span(&["-2"]), Some((Spec::Back(2), None)));
    for bad in ["4..2", "3..3", "2..x", "..3", "x"] {
        assert!(
            Cli::try_parse_from(argv(&["diff", bad])).is_err(),
            "diff {bad} must be a usage error"
        );
    }
}

#[test]
fn sizes() {
    assert_eq!(parse_size("10"), Ok(10));
    assert_eq!(parse_size("64M"), Ok(64 << 20));
    assert_eq!(parse_size("2g"), Ok(2 << 30));
    assert!(parse_size("x").is_err());
    assert!(parse_size("5Q").is_err());
    assert!(parse_size("99999999999T").is_err());
}

/// The states the bash script's loop over the words sets (`cmd="…"`), and the labels of the
/// arms that list each state's options.
fn bash_states_and_arms(script: &str) -> (Vec<String>, Vec<String>) {
    let set: Vec<String> = script
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cmd=\""))
        .filter_map(|l| l.strip_suffix('"'))
        .map(str::to_string)
        .collect();
    let arms_start = script.find("case \"${cmd}\" in").expect("the options case");
    let arms: Vec<String> = script[arms_start..]
        .lines()
        .filter(|l| l.starts_with("        ") && !l.starts_with("         "))
        .filter_map(|l| l.trim().strip_suffix(')'))
        .map(str::to_string)
        .collect();
    (set, arms)
}

#[test]
fn every_arm_of_the_bash_script_is_a_state_its_loop_sets() {
    let script = super::docs::completion_script(clap_complete::Shell::Bash);
    let (set, arms) = bash_states_and_arms(&script);
    assert!(arms.len() > subcommands().len(), "{arms:?}");
    for arm in &arms {
        assert!(
            set.contains(arm),
            "the arm {arm} lists options for a state the loop never sets"
        );
    }
    // Unrepaired, clap_complete 4.6.12's script has the fault issue 14 saw (clap issue
    // #6421), and this check catches it: the repair is what makes it pass.
    let mut cmd = Cli::command();
    let mut raw = Vec::new();
    clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "ckpt-mount", &mut raw);
    let (set, arms) = bash_states_and_arms(&String::from_utf8_lossy(&raw));
    let never_set = arms.iter().filter(|a| !set.contains(a)).count();
    assert!(
        never_set > 0,
        "clap_complete no longer mislabels its arms: docs::repair_bash_states can go"
    );
    let fixed = super::docs::repair_bash_states(&String::from_utf8_lossy(&raw), "ckpt-mount");
    assert_eq!(bash_states_and_arms(&fixed), bash_states_and_arms(&script));
}

#[test]
fn the_bash_repair_relabels_only_mislabelled_arms() {
    let script = "        my__subcmd__app__subcmd__run)\n            opts=\"my__subcmd__app__subcmd__run)\"\n";
    assert_eq!(
        super::docs::repair_bash_states(script, "my-app"),
        "        my__app__subcmd__run)\n            opts=\"my__subcmd__app__subcmd__run)\"\n"
    );
    // A name without a hyphen has nothing to repair.
    assert_eq!(super::docs::repair_bash_states(script, "app"), script);
}

#[test]
fn the_zsh_repair_keeps_options_after_a_positional() {
    let script =
        "(rewind)\n_arguments : \\\n'*::paths -- P:_files' \\\n\"*::: :->ckpt-mount\" \\\n";
    assert_eq!(
        super::docs::repair_zsh_rest_arguments(script),
        "(rewind)\n_arguments : \\\n'*:paths -- P:_files' \\\n\"*::: :->ckpt-mount\" \\\n"
    );
    let zsh = super::docs::completion_script(clap_complete::Shell::Zsh);
    assert!(zsh.contains("'*:paths -- "), "{zsh}");
    assert!(!zsh.lines().any(|l| l.starts_with("'*::")));
}

#[test]
fn the_fish_script_completes_positional_values() {
    let fish = super::docs::completion_script(clap_complete::Shell::Fish);
    assert!(
        fish.contains(
            "complete -c ckpt-mount -n \"__fish_seen_subcommand_from completions\" -f -a \"bash elvish fish powershell zsh\""
        ),
        "{fish}"
    );
}
