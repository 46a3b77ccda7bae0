//! The seed scenario end to end: a small site in git with uncommitted and ignored work, one
//! agent turn done with shell tools through the mount, then a rewind, which gets back every
//! byte, against the four git recipes people use instead, which each get some files wrong.

mod common;
use ckpt_mount::seed;
use common::{Mounted, assert_same_tree, require_fuse, tree};

fn lines(m: &Mounted, rel: &str) -> usize {
    std::fs::read_to_string(m.path(rel))
        .expect("read")
        .lines()
        .count()
}

#[test]
fn a_rewind_gets_back_every_byte_of_the_seed_project() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| seed::build_project(d).expect("build the seed project"));
    m.sh("echo 2 > .ckpt/turn");
    assert_eq!(m.sh("cat .ckpt/turn"), "2\n");
    let before = seed::snapshot(&m.dir);
    let before_tree = tree(&m.dir, true);
    assert_eq!(lines(&m, "styles.css"), 212);
    assert!(before.contains_key(".env") && before.contains_key("notes.md"));
    assert!(!before.contains_key("theme.css"));

    m.sh(seed::AGENT_TURN);
    assert_eq!(lines(&m, "styles.css"), 41);
    let during = seed::snapshot(&m.dir);
    assert_eq!(
        seed::differing(&before, &during),
        vec![".env", "app.js", "index.html", "styles.css", "theme.css"],
        "the agent turn changes these files"
    );

    m.rewind(2);
    let after = seed::snapshot(&m.dir);
    assert!(
        !after.contains_key("theme.css"),
        "theme.css was created in the turn"
    );
    assert_eq!(seed::differing(&before, &after), Vec::<String>::new());
    assert_eq!(before, after);
    assert_eq!(lines(&m, "styles.css"), 212);
    assert_same_tree(&before_tree, &tree(&m.dir, true));
    assert_eq!(
        m.sh("git status --porcelain"),
        " M index.html\n?? notes.md\n"
    );
}

#[test]
fn each_git_recipe_gets_some_files_wrong() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let got = seed::run_recipes(tmp.path()).expect("run the recipes");
    let expect: Vec<(String, Vec<String>)> = [
        ("git checkout -- .", vec![".env", "index.html", "theme.css"]),
        ("git stash -u", vec![".env", "index.html", "notes.md"]),
        (
            "git checkout -- . && git clean -fd",
            vec![".env", "index.html", "notes.md"],
        ),
        (
            "git stash create (before) + apply",
            vec![".env", "theme.css"],
        ),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(got, expect);
}
