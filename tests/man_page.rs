//! The man pages render as a reader sees them: `ckpt-mount man | man -l -` shows the concept
//! sections (turns, control files, the store, exit status, environment, files), groff finds
//! nothing to warn about in any page, the pages `man --out-dir` writes are found by `man`, and
//! the ENVIRONMENT section names every variable the source reads.

mod common;
use common::require_program as have;

use common::bin;
use std::path::Path;
use std::process::{Command, Stdio};

fn man_source() -> String {
    let out = Command::new(bin()).arg("man").output().expect("run man");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs a shell line with the pager turned off, as a reader's `man` would show it.
fn sh(line: &str, cwd: &Path) -> std::process::Output {
    Command::new("bash")
        .args(["-o", "pipefail", "-c", line])
        .current_dir(cwd)
        .env("PATH", path_with_bin(cwd))
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::null())
        .output()
        .expect("run bash")
}

/// PATH with the binary under test first, as `ckpt-mount`.
fn path_with_bin(dir: &Path) -> String {
    let bindir = dir.join("bin");
    if !bindir.exists() {
        std::fs::create_dir(&bindir).expect("mkdir bin");
        std::os::unix::fs::symlink(bin(), bindir.join("ckpt-mount")).expect("symlink");
    }
    format!(
        "{}:{}",
        bindir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

const CONCEPT_SECTIONS: &[&str] = &[
    "TURNS",
    "CONTROL FILES",
    "THE STORE",
    "EXIT STATUS",
    "ENVIRONMENT",
    "FILES",
    "EXAMPLES",
    "SEE ALSO",
];

#[test]
fn man_renders_the_concepts_as_the_help_example_shows_it() {
    if !have("man") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // The example of `ckpt-mount man --help`, run as written.
    let out = sh("ckpt-mount man | man -l -", tmp.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "man -l failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for heading in CONCEPT_SECTIONS {
        assert!(
            text.lines().any(|l| l == *heading),
            "the rendered page has no {heading} section:\n{text}"
        );
    }
    // What a reader looks for under them, rendered (not roff escapes). Compared with the
    // spaces collapsed: groff justifies lines, and where it widens a space moves with every
    // line added anywhere above.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for words in [
        "echo N > .ckpt/turn",
        ".ckpt/rewind",
        ".ckpt/.gitignore",
        "journal.jsonl",
        "RUST_LOG",
        "ckpt-mount prune --keep-turns N",
        "ckpt-mount rewind 2 --dry-run",
    ] {
        assert!(flat.contains(words), "the rendered page lacks {words:?}");
    }
    assert!(!text.contains("\\-"), "a roff escape shows in the page");
}

#[test]
fn groff_warns_about_nothing_in_any_page() {
    if !have("groff") {
        return;
    }
    let src = man_source();
    let mut child = Command::new("groff")
        // -k: preconv for the UTF-8 in help texts; -ww: every warning; -z: no output.
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn groff");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(src.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("groff");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "groff warns about the man pages"
    );
}

#[test]
fn out_dir_writes_one_page_per_command_that_man_finds() {
    if !have("man") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let man1 = tmp.path().join("share/man/man1");
    let out = Command::new(bin())
        .args(["man", "--out-dir"])
        .arg(&man1)
        .output()
        .expect("run man --out-dir");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(&man1)
        .expect("read man1")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // One page per subcommand the help lists, and the main one.
    use clap::CommandFactory;
    let mut want: Vec<String> = ckpt_mount::cli::Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| format!("ckpt-mount-{}.1", s.get_name()))
        .collect();
    want.push("ckpt-mount.1".into());
    want.sort();
    for w in &want {
        assert!(names.contains(w), "{w} not written: {names:?}");
    }
    // Every page holds exactly one page, and `man` finds the subcommand's by its name.
    for name in &names {
        let text = std::fs::read_to_string(man1.join(name)).expect("read page");
        assert_eq!(text.matches("\n.TH ").count(), 1, "{name}");
    }
    let manpath = tmp.path().join("share/man");
    let out = sh(
        &format!("MANPATH='{}' man ckpt-mount-rewind", manpath.display()),
        tmp.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("ckpt-mount rewind 2 --dry-run"), "{text}");
    assert!(text.lines().any(|l| l == "EXAMPLES"), "{text}");
}

/// The names of the environment variables the source reads: `env::var("X")`,
/// `env::var_os("X")`, and env_logger's `RUST_LOG`/`RUST_LOG_STYLE` where a logger is built
/// from the environment.
fn variables_read(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            variables_read(&path, found);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        for call in ["var(\"", "var_os(\""] {
            for (at, _) in text.match_indices(call) {
                let rest = &text[at + call.len()..];
                if let Some(end) = rest.find('"') {
                    found.push(rest[..end].to_string());
                }
            }
        }
        if text.contains("env_logger::Env::default()") {
            found.push("RUST_LOG".into());
            found.push("RUST_LOG_STYLE".into());
        }
    }
}

#[test]
fn the_environment_section_names_every_variable_the_source_reads() {
    let mut vars = Vec::new();
    variables_read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut vars,
    );
    vars.sort();
    vars.dedup();
    assert!(vars.contains(&"CKPT_FAILPOINT".to_string()), "{vars:?}");
    let src = man_source();
    let main_page = src.split("\n.TH ").nth(1).expect("main page");
    let env = main_page
        .split(".SH ENVIRONMENT")
        .nth(1)
        .and_then(|s| s.split("\n.SH ").next())
        .expect("an ENVIRONMENT section");
    // Names are escaped in roff (`\_` is not used, but `-` would be): compare unescaped.
    let env = env.replace("\\-", "-");
    for v in &vars {
        assert!(
            env.contains(v.as_str()),
            "the source reads {v}, and the man page's ENVIRONMENT does not say what it does"
        );
    }
}
