//! The completion scripts complete, in the shells themselves: the script `ckpt-mount completions
//! SHELL` prints is loaded into a real bash, zsh and fish, each is asked to complete the lines a
//! user types (`ckpt-mount rewind --d`, `ckpt-mount mount --f`, `ckpt-mount st`, and every
//! subcommand and long option of the clap tree), and what the shell offers must contain the
//! word. Seen in issue 14: bash completed no option of any subcommand (clap_complete labels its
//! arms `ckpt__subcmd__mount__subcmd__rewind` while its loop sets `ckpt__mount__subcmd__rewind`).
//!
//! zsh and fish are optional on a developer's machine (a missing one is said on stderr); under
//! `CI=true` a missing shell is a failure, and `.ci/run` installs them.

mod common;
use common::require_program as have;

use clap::CommandFactory;
use common::bin;
use std::path::Path;
use std::process::{Command, Stdio};

/// A line to complete (the cursor at its end) and a word the shell must offer.
struct Case {
    line: String,
    want: String,
}

fn case(line: &str, want: &str) -> Case {
    Case {
        line: line.to_string(),
        want: want.to_string(),
    }
}

/// What users typed (issue 14), then every subcommand from a prefix of its name and every long
/// option of every subcommand from its full name, walking the clap tree so that new
/// subcommands and options are checked without a list here to update.
fn cases() -> Vec<Case> {
    let mut all = vec![
        case("ckpt-mount rewind --d", "--dry-run"),
        case("ckpt-mount rewind --d", "--dir"),
        case("ckpt-mount mount --f", "--foreground"),
        case("ckpt-mount st", "status"),
        case("ckpt-mount diff 2 --s", "--stat"),
        case("ckpt-mount completions ba", "bash"),
    ];
    fn walk(cmd: &clap::Command, words: &str, all: &mut Vec<Case>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = sub.get_name();
            if name == "help" {
                continue;
            }
            let prefix: String = name.chars().take(3).collect();
            all.push(case(&format!("{words} {prefix}"), name));
            let path = format!("{words} {name}");
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    all.push(case(&format!("{path} --{long}"), &format!("--{long}")));
                }
            }
            walk(sub, &path, all);
        }
    }
    walk(&ckpt_mount::cli::Cli::command(), "ckpt-mount", &mut all);
    all
}

/// The script `ckpt-mount completions SHELL` prints, written into `dir` as `name`.
fn script_file(shell: &str, dir: &Path, name: &str) -> std::path::PathBuf {
    let out = Command::new(bin())
        .args(["completions", shell])
        .output()
        .expect("run completions");
    assert!(
        out.status.success(),
        "completions {shell}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(name);
    std::fs::write(&path, &out.stdout).expect("write script");
    path
}

/// Runs `program` with `args` and `input` on stdin, in a scratch HOME, under a time limit (a
/// shell waiting for input it never gets must fail the test, not hang it).
fn run_shell(program: &str, args: &[&str], input: &str, home: &Path) -> String {
    use std::io::Write;
    let mut child = Command::new("timeout")
        .arg("120")
        .arg(program)
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("TERM", "dumb")
        .current_dir(home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shell");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait shell");
    assert!(
        out.status.success(),
        "{program} failed ({}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Checks every case against the offers a shell printed, `<<CASE n>>` before each case's.
fn check(shell: &str, cases: &[Case], offers_of: impl Fn(&str) -> Vec<String>, out: &str) {
    let mut chunks = out.split("<<CASE ").skip(1);
    let mut missing = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let chunk = chunks.next().unwrap_or_else(|| {
            panic!("{shell} answered only {i} of {} cases:\n{out}", cases.len())
        });
        let (n, body) = chunk.split_once(">>").expect("case marker");
        assert_eq!(n, i.to_string(), "{shell} answered out of order:\n{out}");
        let offers = offers_of(body);
        if !offers.contains(&c.want) {
            missing.push(format!("{:?} offers {offers:?}, not {:?}", c.line, c.want));
        }
    }
    assert!(
        missing.is_empty(),
        "{shell} does not complete:\n{}",
        missing.join("\n")
    );
}

#[test]
fn bash_completes_subcommands_options_and_values() {
    if !have("bash") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = script_file("bash", tmp.path(), "ckpt-mount.bash");
    let cases = cases();
    // Bash calls the function `complete -p` names with the command name, the word being
    // completed and the word before it, COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT set.
    let driver = format!(
        r#"source '{}'
fn=$(complete -p ckpt-mount | sed -n 's/.*-F \([^ ]*\).*/\1/p')
[ -n "$fn" ] || {{ echo "no completion registered for ckpt-mount" >&2; exit 1; }}
n=0
while IFS= read -r line; do
    COMP_LINE=$line
    COMP_POINT=${{#line}}
    read -ra COMP_WORDS <<<"$line"
    [[ $line == *' ' ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
    COMPREPLY=()
    "$fn" ckpt-mount "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
    printf '<<CASE %d>>' "$n"
    printf '%s\n' "${{COMPREPLY[@]}}"
    n=$((n + 1))
done
"#,
        script.display()
    );
    let input: String = cases.iter().map(|c| format!("{}\n", c.line)).collect();
    let out = run_shell(
        "bash",
        &["--norc", "--noprofile", "-c", &driver],
        &input,
        tmp.path(),
    );
    let offers = |body: &str| {
        body.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    check("bash", &cases, offers, &out);
}

#[test]
fn zsh_completes_subcommands_options_and_values() {
    if !have("zsh") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let fpath = tmp.path().join("functions");
    std::fs::create_dir(&fpath).expect("mkdir");
    script_file("zsh", &fpath, "_ckpt-mount");
    let cases = cases();
    // zsh completes only inside its line editor: an interactive zsh in a pseudo-terminal
    // (zpty) gets each line and a TAB typed. `compadd` is wrapped to print every match it adds
    // as <HIT>…</HIT>, and TAB is bound to a widget that completes, then prints <COMPLETED>.
    // (Both are spelled with "" inside, so the terminal's echo of their definitions is never
    // taken for output.) Each step waits for what the inner shell prints, so nothing is typed
    // ahead of the editor: with keys pending, zle may cut a completion short.
    let driver = r#"zmodload zsh/zpty || exit 3
fdir=$1
zpty z zsh -f -i
zpty -w z "PS1='' RPS1=''; fpath=(${(q)fdir} \$fpath); autoload -U compinit; compinit -u -D; print READY''-MARK"
zpty -r z out '*READY-MARK*' || exit 4
zpty -w z 'compadd () { local -a hits; builtin compadd -A hits "$@"; (( $#hits )) && print -r -- "<H""IT>"${^hits}"</H""IT>" >&2; builtin compadd "$@" }; print READY''-MARK'
zpty -r z out '*READY-MARK*' || exit 4
zpty -w z 'tab-then-mark () { zle complete-word; print -r -- "<COMPLETED"">" >&2 }; zle -N tab-then-mark; bindkey "^I" tab-then-mark; print READY''-MARK'
zpty -r z out '*READY-MARK*' || exit 4
n=0
while IFS= read -r line; do
    zpty -w -n z "$line"$'\t'
    zpty -r z out '*<COMPLETED>*' || exit 5
    print -r -- "<<CASE $n>>$out"
    zpty -w z $'\C-e\C-u'"print DONE''-MARK-$n"
    zpty -r z out "*DONE-MARK-$n*" || exit 5
    n=$((n + 1))
done
zpty -d z
"#;
    let input: String = cases.iter().map(|c| format!("{}\n", c.line)).collect();
    let fdir = fpath.to_string_lossy().into_owned();
    let out = run_shell(
        "zsh",
        &["-f", "-c", driver, "zsh", &fdir],
        &input,
        tmp.path(),
    );
    let offers = |body: &str| {
        body.split("<HIT>")
            .skip(1)
            .filter_map(|s| s.split_once("</HIT>").map(|(hit, _)| hit.to_string()))
            .collect()
    };
    check("zsh", &cases, offers, &out);
}

#[test]
fn fish_completes_subcommands_options_and_values() {
    if !have("fish") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = script_file("fish", tmp.path(), "ckpt-mount.fish");
    let cases = cases();
    // `complete -C LINE` prints what fish offers for LINE: one candidate a line, a tab before
    // its description.
    let driver = format!(
        r#"source '{}'
set n 0
while read -l line
    echo "<<CASE $n>>"
    complete -C "$line"
    set n (math $n + 1)
end
"#,
        script.display()
    );
    let input: String = cases.iter().map(|c| format!("{}\n", c.line)).collect();
    let out = run_shell("fish", &["--no-config", "-c", &driver], &input, tmp.path());
    let offers = |body: &str| {
        body.lines()
            .filter_map(|l| l.split('\t').next())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    check("fish", &cases, offers, &out);
}
