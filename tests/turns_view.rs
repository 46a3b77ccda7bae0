//! `.ckpt/turns/N/`: the folder at the start of every turn as a read-only tree, used as a user
//! would, with real programs: `grep -r`, `diff -r`, `cp -a`, `find`, `getfattr`. Each tree is
//! compared with a snapshot of the folder taken when the turn began (bytes, modes, symlinks,
//! hard-link groups, extended attributes), again after the live folder changed more (by
//! `sed -i`, `rm -rf`, `mv`, a rewind), and a read through a descriptor opened before the
//! live file changed, or read from before it changed, still gives the moment's bytes. Every
//! write fails with `EROFS`, and the live folder is untouched by all of it.

mod common;
use common::output_text as text;
use common::{Mounted, Node, assert_same_tree, tree};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Output;

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The user extended attributes of every path below `root`, as `getfattr` prints them, one
/// block per path, sorted by path (its walk follows the directory's order).
fn user_xattrs(m: &Mounted, root: &Path) -> String {
    let text = m.sh(&format!(
        "cd '{}' && getfattr -R -h -d -m '^user\\.' --absolute-names . 2>/dev/null || true",
        root.display()
    ));
    let mut blocks: Vec<&str> = text
        .split("\n\n")
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .collect();
    blocks.sort_unstable();
    blocks.join("\n")
}

fn snapshot(m: &Mounted, root: &Path) -> (BTreeMap<String, Node>, String) {
    (tree(root, false), user_xattrs(m, root))
}

fn the_trees_of_every_turn_are_the_folder_as_it_was() {
    if !common::require_program("getfattr") {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::create_dir_all(d.join("src/deep")).expect("mkdir");
        std::fs::write(d.join("src/main.rs"), "fn main() {}\n").expect("main");
        std::fs::write(d.join("src/deep/lib.rs"), "pub fn a() {}\n").expect("lib");
        std::fs::write(d.join("notes.txt"), "colour = red\n").expect("notes");
        std::fs::hard_link(d.join("notes.txt"), d.join("notes.link")).expect("link");
        std::os::unix::fs::symlink("src/main.rs", d.join("main")).expect("symlink");
        std::fs::write(d.join("run.sh"), "#!/bin/sh\n").expect("run");
        let sh = |script: &str| {
            let o = std::process::Command::new("sh")
                .args(["-ec", script])
                .current_dir(d)
                .output()
                .expect("sh");
            assert!(o.status.success(), "{}", text(&o));
        };
        sh("chmod 750 run.sh; chmod 700 src/deep; setfattr -n user.tag -v one notes.txt");
    });
    let mut snaps = vec![(String::from("1"), snapshot(&m, &m.dir))];
    // Turn 1 changes things too: its tree is the folder before them.
    m.sh("setfattr -n user.tag -v uno notes.txt; chmod 755 src/deep");

    ok(m.cli(&["turn", "2", "-m", "edit"]));
    snaps.push(("2".into(), snapshot(&m, &m.dir)));
    m.sh("sed -i 's/red/blue/' notes.txt; echo more >> notes.link; rm -rf src/deep; mv src/main.rs src/app.rs; ln -sf src/app.rs main; mkdir -p new/dir; echo n > new/dir/f; setfattr -n user.tag -v two run.sh");

    ok(m.cli(&["turn", "3", "-m", "more"]));
    snaps.push(("3".into(), snapshot(&m, &m.dir)));
    m.sh("printf 'x%.0s' $(seq 1 70000) > big; chmod 600 notes.txt; rm main; mv new old; echo changed > src/app.rs");
    ok(m.cli(&["turn", "4"]));
    snaps.push(("4".into(), snapshot(&m, &m.dir)));
    m.sh("echo four > src/app.rs; rm big");

    let turns = m.dir.join(".ckpt/turns");
    let check = |when: &str, rewound: &str| {
        for (name, (want, xattrs)) in &snaps {
            let name = match name.as_str() {
                "3" | "4" if !rewound.is_empty() => format!("{name}#{rewound}"),
                _ => name.clone(),
            };
            let view = turns.join(&name);
            assert_same_tree(want, &tree(&view, false));
            assert_eq!(
                &user_xattrs(&m, &view),
                xattrs,
                "xattrs of turn {name} {when}"
            );
        }
    };
    check("at first", "");
    assert_eq!(m.sh("ls .ckpt/turns"), "1\n2\n3\n4\n");

    // Real programs on a tree: grep, diff, cp -a (hard links kept), find.
    assert_eq!(
        m.sh("grep -rl red .ckpt/turns/1 | sort"),
        ".ckpt/turns/1/notes.link\n.ckpt/turns/1/notes.txt\n"
    );
    let out = m.dir.parent().expect("tmp").join("copy2");
    m.sh(&format!("cp -a .ckpt/turns/2 '{}'", out.display()));
    assert_same_tree(&snaps[1].1.0, &tree(&out, false));
    let diff = m.sh_output("diff -r .ckpt/turns/2 .ckpt/turns/3");
    let said = String::from_utf8_lossy(&diff.stdout);
    assert!(
        said.contains("Only in .ckpt/turns/2/src: deep") && said.contains("< colour = red"),
        "{said}"
    );
    let files = snaps[2]
        .1
        .0
        .values()
        .filter(|n| matches!(n, Node::File { .. }))
        .count();
    assert_eq!(
        m.sh("find .ckpt/turns/3 -type f | wc -l").trim(),
        files.to_string()
    );

    // The store is out of reach there too.
    for script in [
        "ls .ckpt/turns/1/.ckpt",
        "cat .ckpt/turns/2/.ckpt/journal.jsonl",
    ] {
        assert!(
            !m.sh_output(script).status.success(),
            "{script} reached the store"
        );
    }

    // Every change is refused with EROFS, and nothing changes.
    let live = tree(&m.dir, false);
    for script in [
        "echo x > .ckpt/turns/1/notes.txt",
        "touch .ckpt/turns/1/new",
        "rm .ckpt/turns/1/run.sh",
        "mkdir .ckpt/turns/1/d",
        "chmod 777 .ckpt/turns/1/run.sh",
        "mv .ckpt/turns/1/run.sh .ckpt/turns/1/r",
        "mv src/app.rs .ckpt/turns/1/",
        "ln src/app.rs .ckpt/turns/1/hard",
        "setfattr -n user.x -v 1 .ckpt/turns/1/run.sh",
    ] {
        let o = m.sh_output(script);
        let said = text(&o);
        assert!(!o.status.success(), "{script} succeeded");
        assert!(said.contains("Read-only file system"), "{script}: {said}");
    }
    assert_same_tree(&live, &tree(&m.dir, false));
    check("after refused writes", "");

    // A descriptor opened on the current turn's tree, before the live file changes.
    let mut held = std::fs::File::open(turns.join("4/run.sh")).expect("open");
    m.sh("echo five > run.sh");
    let mut got = String::new();
    held.read_to_string(&mut got).expect("read");
    assert_eq!(
        got, "#!/bin/sh\n",
        "the moment's bytes, though the live file changed"
    );

    // Reads of a tree's file while nothing is recorded skip their check; then the live file
    // changes where the kernel has cached nothing of the tree's file: the next read still
    // gives the moment's bytes (the change's record moved the journal's count first).
    m.sh("head -c 8000000 /dev/zero | tr '\\0' a > wide");
    ok(m.cli(&["turn", "5"]));
    let wide = std::fs::File::open(turns.join("5/wide")).expect("open wide");
    let at = |offset: u64| {
        let mut buf = [0u8; 8];
        wide.read_exact_at(&mut buf, offset).expect("read wide");
        buf
    };
    assert_eq!(at(0), *b"aaaaaaaa");
    assert_eq!(at(4_000_000), *b"aaaaaaaa");
    m.sh("printf bbbbbbbb | dd of=wide bs=1 seek=7000000 conv=notrunc 2>/dev/null");
    assert_eq!(m.sh("tail -c 1000000 wide | head -c 8"), "bbbbbbbb");
    assert_eq!(
        at(7_000_000),
        *b"aaaaaaaa",
        "the moment's bytes after a live write, past reads that were not checked"
    );
    drop(wide);

    // The live folder changes more, and a rewind retires turns: every tree stays as it was,
    // the retired ones under the name `log` gives them.
    m.sh("rm -rf src old; sed -i 's/blue/green/' notes.txt");
    ok(m.cli(&["rewind", "2", "--yes"]));
    let names = m.sh("ls .ckpt/turns");
    let k = names
        .lines()
        .find_map(|n| n.strip_prefix("3#"))
        .unwrap_or_else(|| panic!("turn 3 retired, listed: {names}"))
        .to_string();
    check("after later changes and a rewind", &k);
    assert_same_tree(&snaps[1].1.0, &tree(&m.dir, false));

    // `restore N --to DEST` with no path: the whole tree copied out, mounted and unmounted.
    let tmp = m.dir.parent().expect("tmp").to_path_buf();
    let out1 = tmp.join("whole1");
    ok(m.cli(&["restore", "1", "--to", out1.to_str().expect("utf-8")]));
    assert_same_tree(&snaps[0].1.0, &tree(&out1, false));
    assert_eq!(user_xattrs(&m, &out1), snaps[0].1.1, "xattrs copied out");
    drop(held);
    let mut m = m;
    m.unmount();
    let out3 = tmp.join("whole3");
    let spec = format!("3#{k}");
    ok(m.cli(&["restore", &spec, "--to", out3.to_str().expect("utf-8")]));
    assert_same_tree(&snaps[2].1.0, &tree(&out3, false));
    assert_eq!(user_xattrs(&m, &out3), snaps[2].1.1, "xattrs copied out");
    let again = m.cli(&["restore", "1", "--to", out3.to_str().expect("utf-8")]);
    assert!(
        !again.status.success() && text(&again).contains("not empty"),
        "{}",
        text(&again)
    );
}

on_both_mounts!(
    /// On root's mount.
    the_trees_of_every_turn_are_the_folder_as_it_was_on_roots_mount,
    the_trees_of_every_turn_are_the_folder_as_it_was_on_a_users_mount,
    the_trees_of_every_turn_are_the_folder_as_it_was
);
