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
use std::path::{Path, PathBuf};
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
    spawn_shell(program, args, input, home, None).0
}

/// [`run_shell`] with PATH set to `path` when given; its stdout and stderr.
fn spawn_shell(
    program: &str,
    args: &[&str],
    input: &str,
    home: &Path,
    path: Option<&str>,
) -> (String, String) {
    use std::io::Write;
    let mut command = Command::new("timeout");
    command
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
        .stderr(Stdio::piped());
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let mut child = command.spawn().expect("spawn shell");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait shell");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "{program} failed ({}): {stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
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

// Moments: on a real mount, where a command takes a moment, each shell offers the folder's
// turns as `log` names them, and after `/` its labels; nowhere else, and nothing (no error
// text either) where no folder is mounted.

/// A line typed in `cwd`, and exactly the values the shell must offer for it.
struct MomentCase {
    cwd: PathBuf,
    line: String,
    want: Vec<String>,
}

/// The label with everything a shell may trip on: quotes, blanks, `$`, a glob, an escape
/// sequence, a tab and a second line. Completion cuts it at the tab: `/TEXT` matches a part.
const ODD_LABEL: &str = "it's \"odd\" $HOME * \u{1b}[31mred\tafter a tab\nsecond line";
/// What `/TEXT` offers of it.
const ODD_TEXT: &str = "/it's \"odd\" $HOME *";

/// A mounted folder with turns 1 to 4, labelled, then rewound to 3, then step 3.1: `log`
/// lists 1, 2, 3#K, 3, 3.1 and 4#K. Returns the mount and K.
fn moments_fixture() -> (common::Mounted, u64) {
    let m = common::Mounted::with(|d| std::fs::write(d.join("f"), "1\n").expect("f"));
    let ok = |args: &[&str]| {
        let o = m.cli(args);
        assert!(o.status.success(), "{args:?}: {}", common::output_text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    ok(&["turn", "2", "-m", "fix the build"]);
    m.sh("echo 2 > f");
    ok(&["turn", "3", "-m", ODD_LABEL]);
    m.sh("echo 3 > f");
    ok(&["turn", "4", "-m", "Tests: fix them"]);
    m.sh("echo 4 > f");
    ok(&["rewind", "3", "--yes"]);
    // A step within turn 3, as an agent's hook marks a tool call: `log` names it 3.1.
    ok(&["turn", "--step", "-m", "a step"]);
    m.sh("echo 3.1 > f");
    let rows: serde_json::Value = serde_json::from_str(&ok(&["log", "--json"])).expect("log json");
    let k = rows
        .as_array()
        .and_then(|rows| rows.iter().find_map(|r| r["rewound_by"].as_u64()))
        .expect("a retired turn");
    (m, k)
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

/// The lines typed and what each must offer, exactly.
fn moment_cases(m: &common::Mounted, k: u64, elsewhere: &Path) -> Vec<MomentCase> {
    let (r3, r4) = (format!("3#{k}"), format!("4#{k}"));
    let inside = |line: &str, want: Vec<String>| MomentCase {
        cwd: m.dir.clone(),
        line: line.to_string(),
        want,
    };
    let dir = m.dir.display().to_string();
    vec![
        // A rewind goes to live turns only; reading takes the retired ones too.
        inside("ckpt-mount rewind ", strings(&["1", "2", "3", "3.1"])),
        inside(
            "ckpt-mount rewind --dry-run ",
            strings(&["1", "2", "3", "3.1"]),
        ),
        inside(
            "ckpt-mount cat ",
            strings(&["1", "2", &r3, "3", "3.1", &r4]),
        ),
        inside("ckpt-mount show 3", strings(&[&r3, "3", "3.1"])),
        inside(
            "ckpt-mount restore --to x ",
            strings(&["1", "2", &r3, "3", "3.1", &r4]),
        ),
        inside("ckpt-mount diff --stat 4", strings(&[&r4])),
        // The labels after `/` (newest first); `/fix` names the newest turn with "fix".
        inside(
            "ckpt-mount diff /",
            strings(&[
                "/a step",
                "/Tests: fix them",
                ODD_TEXT,
                "/fix the build",
                "/mounted",
            ]),
        ),
        inside("ckpt-mount diff /fix", strings(&["/fix the build"])),
        inside(
            "ckpt-mount rewind /",
            strings(&["/a step", ODD_TEXT, "/fix the build", "/mounted"]),
        ),
        inside(
            "ckpt-mount diff 2..",
            strings(&[
                "2..1",
                "2..2",
                &format!("2..{r3}"),
                "2..3",
                "2..3.1",
                &format!("2..{r4}"),
            ]),
        ),
        // Not a moment: clap's completion, and no turn in it.
        inside("ckpt-mount cat 2 ", vec![]),
        inside("ckpt-mount rewind 2 -- ", vec![]),
        inside("ckpt-mount turn ", vec![]),
        // The folder named, from elsewhere; and no folder at all.
        MomentCase {
            cwd: elsewhere.to_path_buf(),
            line: format!("ckpt-mount rewind --dir {dir} "),
            want: strings(&["1", "2", "3", "3.1"]),
        },
        MomentCase {
            cwd: elsewhere.to_path_buf(),
            line: format!("ckpt-mount cat --dir={dir} /f"),
            want: strings(&["/fix the build"]),
        },
        MomentCase {
            cwd: elsewhere.to_path_buf(),
            line: "ckpt-mount rewind ".to_string(),
            want: vec![],
        },
    ]
}

/// Runs `program` in `cwd` with `input` on stdin, the binary under test first on PATH.
fn run_shell_in(program: &str, args: &[&str], input: &str, home: &Path) -> (String, String) {
    let bin_dir = Path::new(bin()).parent().expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    spawn_shell(program, args, input, home, Some(&path))
}

/// The cases as the drivers read them: the directory, a tab, the line.
fn moment_input(cases: &[MomentCase]) -> String {
    cases
        .iter()
        .map(|c| format!("{}\t{}\n", c.cwd.display(), c.line))
        .collect()
}

/// Checks each case's offers (what `offers_of` reads from its chunk of `out`) are exactly
/// the wanted ones, or, where none are wanted, hold no moment of the folder.
fn check_moments(
    shell: &str,
    cases: &[MomentCase],
    k: u64,
    offers_of: impl Fn(&str) -> Vec<String>,
    out: &str,
) {
    let mut chunks = out.split("<<CASE ").skip(1);
    let mut wrong = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let chunk = chunks.next().unwrap_or_else(|| {
            panic!("{shell} answered only {i} of {} cases:\n{out}", cases.len())
        });
        let (n, body) = chunk.split_once(">>").expect("case marker");
        assert_eq!(n, i.to_string(), "{shell} answered out of order:\n{out}");
        let mut offers = offers_of(body);
        offers.dedup();
        let mut got = offers.clone();
        got.sort();
        let mut want = c.want.clone();
        want.sort();
        let moment_like = |o: &String| {
            o.starts_with('/') && !o.starts_with("/tmp") || o.contains(&format!("#{k}"))
        };
        let right = if c.want.is_empty() {
            !offers.iter().any(moment_like)
        } else {
            got == want
        };
        if !right {
            wrong.push(format!("{:?} offers {offers:?}, not {:?}", c.line, c.want));
        }
    }
    assert!(wrong.is_empty(), "{shell}:\n{}", wrong.join("\n"));
}

/// Undoes bash's quoting of one word, as bash itself does (`eval`): a reply that is not
/// quoted right shows here as another value.
const BASH_DRIVER: &str = r#"source "$1"
fn=$(complete -p ckpt-mount | sed -n 's/.*-F \([^ ]*\).*/\1/p')
n=0
while IFS=$'\t' read -r dir line; do
    cd "$dir" || exit 1
    COMP_LINE=$line
    COMP_POINT=${#line}
    read -ra COMP_WORDS <<<"$line"
    [[ $line == *' ' ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    "$fn" ckpt-mount "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '<<CASE %d>>\n' "$n"
    for reply in "${COMPREPLY[@]}"; do
        eval "w=($reply)"
        printf '%s\n' "${w[0]}"
    done
    n=$((n + 1))
done
"#;

fn bash_offers_moments() {
    if !have("bash") {
        return;
    }
    let (m, k) = moments_fixture();
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = script_file("bash", tmp.path(), "ckpt-mount.bash");
    let cases = moment_cases(&m, k, tmp.path());
    let script_arg = script.display().to_string();
    let (out, err) = run_shell_in(
        "bash",
        &[
            "--norc",
            "--noprofile",
            "-c",
            BASH_DRIVER,
            "bash",
            &script_arg,
        ],
        &moment_input(&cases),
        tmp.path(),
    );
    assert_eq!(err, "", "nothing on the terminal but the candidates");
    let offers = |body: &str| {
        body.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    check_moments("bash", &cases, k, offers, &out);
}

fn zsh_offers_moments() {
    if !have("zsh") {
        return;
    }
    let (m, k) = moments_fixture();
    let tmp = tempfile::tempdir().expect("tempdir");
    let fpath = tmp.path().join("functions");
    std::fs::create_dir(&fpath).expect("mkdir");
    script_file("zsh", &fpath, "_ckpt-mount");
    let cases = moment_cases(&m, k, tmp.path());
    // As in `zsh_completes_subcommands_options_and_values`; here compadd prints each match
    // unquoted, after the TAB the widget prints the line's last word as zsh parses it back
    // (<LAST>), which is what a unique match inserted, quoted by compadd, and what the screen
    // shows until the next line (the list of matches) is kept with each case.
    let driver = r#"zmodload zsh/zpty || exit 3
fdir=$1
zpty z zsh -f -i
zpty -w z "PS1='' RPS1=''; fpath=(${(q)fdir} \$fpath); autoload -U compinit; compinit -u -D; print READY''-MARK"
zpty -r z out '*READY-MARK*' || exit 4
zpty -w z 'compadd () { local -a hits; builtin compadd -A hits "$@"; (( $#hits )) && print -r -- "<H""IT>"${(Q)^hits}"</H""IT>" >&2; local i; for ((i = 1; i < $#; i++)); do [[ ${@[i]} == -d ]] && print -r -- "<DE""SC>"${^${(P)${@[i+1]}}}"</DE""SC>" >&2; done; builtin compadd "$@" }; print READY''-MARK'
zpty -r z out '*READY-MARK*' || exit 4
zpty -w z 'tab-then-mark () { zle complete-word; print -r -- "<LA""ST>${(Q)${(z)BUFFER}[-1]}</LA""ST><COMPLETED"">" >&2 }; zle -N tab-then-mark; bindkey "^I" tab-then-mark; print READY''-MARK'
zpty -r z out '*READY-MARK*' || exit 4
n=0
while IFS=$'\t' read -r dir line; do
    zpty -w z "cd ${(q)dir}; print CD''-MARK-$n"
    zpty -r z out "*CD-MARK-$n*" || exit 5
    zpty -w -n z "$line"$'\t'
    zpty -r z out '*<COMPLETED>*' || exit 5
    print -r -- "<<CASE $n>>$out"
    zpty -w z $'\C-e\C-u'"print DONE''-MARK-$n"
    zpty -r z out "*DONE-MARK-$n*" || exit 5
    n=$((n + 1))
done
zpty -d z
"#;
    let fdir = fpath.to_string_lossy().into_owned();
    let (out, _) = run_shell_in(
        "zsh",
        &["-f", "-c", driver, "zsh", &fdir],
        &moment_input(&cases),
        tmp.path(),
    );
    let offers = |body: &str| {
        body.split("<HIT>")
            .skip(1)
            .filter_map(|s| s.split_once("</HIT>").map(|(hit, _)| hit.to_string()))
            .collect()
    };
    check_moments("zsh", &cases, k, offers, &out);
    // What the list shows: each turn with its label's first line, the tab a blank.
    let chunk = |i: usize| {
        out.split(&format!("<<CASE {i}>>"))
            .nth(1)
            .and_then(|rest| rest.split("<<CASE ").next())
            .unwrap_or_default()
            .replace('\r', "")
    };
    let listed = chunk(0);
    assert!(
        listed.contains("<DESC>2  -- fix the build</DESC>"),
        "{listed}"
    );
    assert!(
        listed.contains("<DESC>3  -- it's \"odd\" $HOME * [31mred after a tab</DESC>"),
        "{listed}"
    );
    // A unique match is inserted quoted: zsh reads it back as the value.
    let unique = chunk(7);
    assert!(unique.contains("<LAST>/fix the build</LAST>"), "{unique}");
}

fn fish_offers_moments() {
    if !have("fish") {
        return;
    }
    let (m, k) = moments_fixture();
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = script_file("fish", tmp.path(), "ckpt-mount.fish");
    let cases = moment_cases(&m, k, tmp.path());
    let driver = format!(
        r#"source '{}'
set n 0
while read -l -d \t dir line
    cd $dir; or exit 1
    echo "<<CASE $n>>"
    complete -C "$line"
    set n (math $n + 1)
end
"#,
        script.display()
    );
    let (out, err) = run_shell_in(
        "fish",
        &["--no-config", "-c", &driver],
        &moment_input(&cases),
        tmp.path(),
    );
    assert_eq!(err, "", "nothing on the terminal but the candidates");
    let offers = |body: &str| {
        body.lines()
            .filter_map(|l| l.split('\t').next())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    check_moments("fish", &cases, k, offers, &out);
    // fish shows the descriptions: the label's first line; for `/TEXT`, the turn it names.
    assert!(out.contains("\n2\tfix the build\n"), "{out}");
    assert!(out.contains("\n/fix the build\tturn 2\n"), "{out}");
}

on_both_mounts!(
    /// bash offers the moments of root's mount.
    bash_offers_moments_on_roots_mount,
    bash_offers_moments_on_a_users_mount,
    bash_offers_moments
);

on_both_mounts!(
    /// zsh offers the moments of root's mount.
    zsh_offers_moments_on_roots_mount,
    zsh_offers_moments_on_a_users_mount,
    zsh_offers_moments
);

on_both_mounts!(
    /// fish offers the moments of root's mount.
    fish_offers_moments_on_roots_mount,
    fish_offers_moments_on_a_users_mount,
    fish_offers_moments
);

/// Whether tmux runs (`tmux -V`: it has no `--version`); as [`have`], a failure under
/// `CI=true` (`.ci/run` installs it).
fn have_tmux() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tmux is not installed: under CI=true this test must run (.ci/run installs it)"
        );
        eprintln!("skipped: tmux is not installed (under CI=true this fails)");
    }
    found
}

/// Types each of `cases` with a TAB into an interactive `shell` (`argv`) in a tmux pane (a real
/// terminal and line editor) that first ran `setup` (load the script, prompt `$ `), in `cwd`;
/// each line is then dropped with Ctrl-C, unrun. Returns what the line did not read as wanted.
fn typed_with_tab(
    argv: &[&str],
    setup: &str,
    cwd: &Path,
    cases: &[(String, String)],
) -> Vec<String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let conf = tmp.path().join("tmux.conf");
    std::fs::write(&conf, "").expect("tmux.conf");
    let tmux = |args: &[&str]| {
        let o = Command::new("tmux")
            .arg("-S")
            .arg(tmp.path().join("socket"))
            .arg("-f")
            .arg(&conf)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux (CI installs it)");
        assert!(
            o.status.success(),
            "tmux {args:?}: {}",
            common::output_text(&o)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let bin_dir = Path::new(bin()).parent().expect("the binary's directory");
    let path = format!("PATH={}:/usr/bin:/bin", bin_dir.display());
    let home = format!("HOME={}", tmp.path().display());
    let cwd = cwd.to_str().expect("a UTF-8 folder");
    // A clean environment: no rc file, a UTF-8 locale (labels past ASCII), the binary on PATH.
    let mut session = vec!["new-session", "-d", "-x", "200", "-y", "50", "-c", cwd];
    session.extend_from_slice(&["env", "-i", &path, &home, "TERM=xterm", "LANG=C.UTF-8"]);
    session.extend_from_slice(argv);
    tmux(&session);
    let last_line = || {
        tmux(&["capture-pane", "-p", "-t", "0"])
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .trim_end()
            .to_string()
    };
    // Waits until the last line of the screen is `want`; false after a few seconds.
    let shows = |want: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if last_line() == want {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    };
    tmux(&["send-keys", "-t", "0", "-l", setup]);
    tmux(&["send-keys", "-t", "0", "Enter"]);
    assert!(shows("$"), "no prompt: {}", last_line());
    let mut wrong = Vec::new();
    for (typed, want) in cases {
        tmux(&["send-keys", "-t", "0", "-l", typed]);
        tmux(&["send-keys", "-t", "0", "Tab"]);
        if !shows(&format!("$ {want}")) {
            wrong.push(format!(
                "{typed:?} + TAB shows {:?}, not {want:?}",
                last_line()
            ));
        }
        tmux(&["send-keys", "-t", "0", "C-c"]);
        assert!(shows("$"), "no prompt after Ctrl-C: {}", last_line());
    }
    let _ = tmux(&["kill-server"]);
    wrong
}

/// The fixture, with turn 1 relabelled past ASCII (bash counts COMP_POINT in characters).
fn moments_fixture_with_accents() -> (common::Mounted, u64) {
    let (m, k) = moments_fixture();
    let relabel = m.cli(&["turn", "--label", "1", "café au lait"]);
    assert!(
        relabel.status.success(),
        "{}",
        common::output_text(&relabel)
    );
    (m, k)
}

fn pairs(xs: &[(&str, &str)]) -> Vec<(String, String)> {
    xs.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// bash as a person uses it: after each TAB the line must read as written here, what readline
/// inserted quoted for the line (also inside a quote the user opened), and whole where bash
/// splits words at `:`.
fn bash_inserts_moments_quoted() {
    if !have("bash") || !have_tmux() {
        return;
    }
    let (m, k) = moments_fixture_with_accents();
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = script_file("bash", tmp.path(), "ckpt-mount.bash");
    let mut cases = pairs(&[
        ("ckpt-mount cat /Tes", "ckpt-mount cat /Tests:\\ fix\\ them"),
        ("ckpt-mount cat /café", "ckpt-mount cat /café\\ au\\ lait"),
        (
            "ckpt-mount cat /Tests:",
            "ckpt-mount cat /Tests:\\ fix\\ them",
        ),
        (
            "ckpt-mount rewind /it",
            "ckpt-mount rewind /it\\'s\\ \\\"odd\\\"\\ \\$HOME\\ \\*",
        ),
        (
            "ckpt-mount rewind '/it",
            "ckpt-mount rewind '/it'\\''s \"odd\" $HOME *'",
        ),
    ]);
    cases.push(("ckpt-mount cat 4".into(), format!("ckpt-mount cat 4#{k}")));
    let setup = format!("PS1='$ '; source '{}'", script.display());
    let wrong = typed_with_tab(&["bash", "--norc", "--noprofile"], &setup, &m.dir, &cases);
    assert!(wrong.is_empty(), "bash:\n{}", wrong.join("\n"));
}

/// fish as a person uses it: after each TAB the line reads as fish escapes what it inserts.
fn fish_inserts_moments_quoted() {
    if !have("fish") || !have_tmux() {
        return;
    }
    let (m, k) = moments_fixture_with_accents();
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = script_file("fish", tmp.path(), "ckpt-mount.fish");
    let mut cases = pairs(&[
        ("ckpt-mount cat /Tes", "ckpt-mount cat /Tests:\\ fix\\ them"),
        ("ckpt-mount cat /café", "ckpt-mount cat /café\\ au\\ lait"),
        (
            "ckpt-mount rewind /it",
            "ckpt-mount rewind /it\\'s\\ \\\"odd\\\"\\ \\$HOME\\ \\*",
        ),
    ]);
    // fish escapes `#` anywhere in a word (`4\#5` is the word `4#5`).
    cases.push(("ckpt-mount cat 4".into(), format!("ckpt-mount cat 4\\#{k}")));
    let setup = format!(
        "function fish_prompt; echo '$ '; end; source '{}'",
        script.display()
    );
    let wrong = typed_with_tab(&["fish", "--no-config"], &setup, &m.dir, &cases);
    assert!(wrong.is_empty(), "fish:\n{}", wrong.join("\n"));
}

on_both_mounts!(
    /// bash inserts the moments of root's mount, quoted.
    bash_inserts_moments_quoted_on_roots_mount,
    bash_inserts_moments_quoted_on_a_users_mount,
    bash_inserts_moments_quoted
);

on_both_mounts!(
    /// fish inserts the moments of root's mount, quoted.
    fish_inserts_moments_quoted_on_roots_mount,
    fish_inserts_moments_quoted_on_a_users_mount,
    fish_inserts_moments_quoted
);
