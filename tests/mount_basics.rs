//! The mount's contract end to end: capture per turn, rewind, control files, remount.

mod common;
use common::{Mounted, assert_same_tree, require_fuse, tree};

#[test]
fn rewinding_a_turn_also_undoes_later_turns() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "start of turn 1\n").expect("write"));
    m.sh("echo 'edited in turn 1' > f");
    m.turn(2);
    m.sh("echo 'edited in turn 2' > f");
    m.turn(3);
    m.sh("echo 'edited in turn 3' > f; echo new > g");
    m.rewind(1);
    assert_eq!(
        std::fs::read_to_string(m.path("f")).expect("read"),
        "start of turn 1\n"
    );
    assert!(!m.path("g").exists());
}

#[test]
fn first_capture_in_a_turn_wins_and_new_paths_are_deleted() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a"), "one\n").expect("write"));
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("echo two > a; echo three > a; echo x >> a; mkdir -p n/e/w; echo y > n/e/w/f");
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
}
