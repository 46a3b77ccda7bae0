//! `log` and `status` describe history as it happened, on a real mount: each turn counted as it
//! stood when it ended (not against the folder as it is now), through later turns, a rewind
//! and its undo; turns in order; dates in the local time zone or UTC; sizes in binary units;
//! rows that fit the terminal; a dedup figure that means something after a rewind.

mod common;
use common::{Mounted, bin, require_fuse, transcript};
use std::process::{Command, Output};

/// `ckpt-mount ARGS --dir M` with the table width and the time zone fixed (`COLUMNS`, `TZ`),
/// plus `env`.
fn cli(m: &Mounted, args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(bin())
        .args(args)
        .arg("--dir")
        .arg(&m.dir)
        .env("COLUMNS", "100")
        .env("TZ", "UTC0")
        .envs(env.iter().copied())
        .output()
        .expect("run ckpt-mount");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `log --json`: per turn, `(turn, created, modified, deleted, bytes)`.
fn counts(m: &Mounted) -> Vec<(u64, u64, u64, u64, u64)> {
    let rows: serde_json::Value =
        serde_json::from_slice(&cli(m, &["log", "--json"], &[]).stdout).expect("log --json");
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
            (
                n("turn"),
                n("created"),
                n("modified"),
                n("deleted"),
                n("bytes"),
            )
        })
        .collect()
}

/// `s` with every time printed to the minute (`2026-12-02 09:14`) replaced by its pattern,
/// so that a snapshot reads the same on every run and keeps its columns.
fn redact_times(s: &str) -> String {
    const PATTERN: &[u8] = b"dddd-dd-dd dd:dd";
    let b = s.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let here = b.get(i..i + PATTERN.len()).is_some_and(|w| {
            w.iter().zip(PATTERN).all(|(c, p)| match p {
                b'd' => c.is_ascii_digit(),
                p => c == p,
            })
        });
        if here {
            out.push_str("YYYY-MM-DD HH:MM");
            i += PATTERN.len();
        } else {
            let c = s[i..].chars().next().expect("a char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `log` as a transcript with the folder and the times redacted.
fn log_transcript(m: &Mounted) -> String {
    let dir = m.dir.display().to_string();
    let o = cli(m, &["log"], &[]);
    redact_times(&transcript(&["log", "--dir", &dir], &o, &[(&dir, "[DIR]")]))
}

#[test]
fn log_keeps_each_turn_as_it_ended_through_later_turns_a_rewind_and_its_undo() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    // Turn 1 creates eight files, and a scratch file it removes again (not "created").
    m.sh("for i in 1 2 3 4 5 6 7 8; do echo file $i > f$i; done; echo x > scratch; rm scratch");
    let turn1 = (1, 8, 0, 0, 0);
    assert_eq!(counts(&m), vec![turn1]);
    cli(&m, &["turn", "2", "-m", "clean up"], &[]);
    m.sh("rm f1 f2 f3; echo changed > f4");
    // Turn 2 removed three of turn 1's files: turn 1 still created eight. Bytes captured are
    // the files as turn 2 found them (4 × 7 bytes).
    let turn2 = (2, 0, 1, 3, 28);
    assert_eq!(counts(&m), vec![turn1, turn2]);
    let mut said = log_transcript(&m);

    // The rewind retired what turn 2 had done: listed as it ended, beside turn 2 afresh.
    m.rewind(2);
    assert_eq!(counts(&m), vec![turn1, turn2, (2, 0, 0, 0, 0)]);
    said += &log_transcript(&m);

    let o = cli(&m, &["rewind", "--undo"], &[]);
    assert!(o.status.success());
    assert_eq!(counts(&m), vec![turn1, turn2], "in order, as they ended");
    said += &log_transcript(&m);
    insta::assert_snapshot!(said);
}

/// The minute `date` prints for `unix` in zone `tz`.
fn date_minute(unix: u64, tz: &str) -> String {
    let o = Command::new("date")
        .arg("-d")
        .arg(format!("@{unix}"))
        .arg("+%Y-%m-%d %H:%M")
        .env("TZ", tz)
        .output()
        .expect("run date");
    assert!(o.status.success());
    stdout(&o).trim().to_string()
}

#[test]
fn times_are_dates_in_the_local_zone_or_utc_and_json_keeps_unix_and_iso_times() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.sh("echo a > a");
    let rows: serde_json::Value =
        serde_json::from_slice(&cli(&m, &["log", "--json"], &[]).stdout).expect("log --json");
    let time = rows[0]["time"].as_u64().expect("a Unix time");
    let iso = rows[0]["time_iso"].as_str().expect("an ISO 8601 time");
    let o = Command::new("date")
        .args(["-u", "-d", &format!("@{time}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("run date");
    assert_eq!(iso, stdout(&o).trim());

    // Half an hour off UTC, so that a zone ignored shows in the minutes too (no zone file is
    // needed for a POSIX TZ string).
    let india = "IST-5:30";
    let row = |out: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with("1 "))
            .unwrap_or_else(|| panic!("no row for turn 1: {out}"))
            .to_string()
    };
    let local = stdout(&cli(&m, &["log"], &[("TZ", india)]));
    assert!(local.starts_with("turn  began "), "{local}");
    assert!(
        row(&local).contains(&date_minute(time, india)),
        "{local}\nwants {}",
        date_minute(time, india)
    );
    let utc = stdout(&cli(&m, &["log", "--utc"], &[("TZ", india)]));
    assert!(utc.starts_with("turn  began (UTC) "), "{utc}");
    assert!(row(&utc).contains(&date_minute(time, "UTC0")), "{utc}");
    assert_ne!(row(&local), row(&utc));
}

#[test]
fn rows_fit_the_terminal_and_cut_programs_and_label_with_an_ellipsis() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    let label = "a label far longer than any terminal leaves room for after the counts";
    cli(&m, &["turn", "2", "-m", label], &[]);
    m.sh(
        "touch a; cp a b; mv b c; ln -s a d; mkdir e; chmod 600 a; truncate -s 1 a; \
         echo x | tee f >/dev/null; dd if=/dev/zero of=g bs=1 count=1 2>/dev/null",
    );
    for width in ["80", "100", "120"] {
        let out = stdout(&cli(&m, &["log"], &[("COLUMNS", width)]));
        let width: usize = width.parse().expect("a number");
        let rows: Vec<&str> = out.lines().collect();
        for line in &rows {
            assert!(line.chars().count() <= width, "{width}: {line:?}\n{out}");
        }
        let turn2 = rows
            .iter()
            .find(|l| l.trim_start().starts_with("2 "))
            .unwrap_or_else(|| panic!("no row for turn 2: {out}"));
        assert!(turn2.ends_with('…'), "the label is cut: {turn2}");
        assert!(turn2.contains("a label"), "{turn2}");
    }
    // Wide enough for everything: nothing is cut, and the label comes last.
    let out = stdout(&cli(&m, &["log"], &[("COLUMNS", "300")]));
    assert!(!out.contains('…'), "{out}");
    let turn2 = out
        .lines()
        .find(|l| l.trim_start().starts_with("2 "))
        .expect("turn 2");
    assert!(turn2.ends_with(label), "{turn2}");
    // Every program that changed a path is named, chmod and truncate too, though they changed
    // `a` after touch had (issue 15: every mutation is attributed, not only the first).
    assert!(
        turn2.contains("  chmod, cp, dd, ln, mkdir, mv, tee, touch, truncate  "),
        "{turn2}"
    );
}

/// The text of `s` between `from` and the next `to`.
fn between<'a>(s: &'a str, from: &str, to: &str) -> &'a str {
    let start = s.find(from).map_or(s.len(), |i| i + from.len());
    let rest = s[start..].trim_start();
    rest.find(to).map_or(rest, |i| &rest[..i])
}

/// Whether `s` is a size as `units::human_size` writes it: `512 B`, `1.5 KiB`, `2.0 GiB`.
fn is_size(s: &str) -> bool {
    match s.split_once(' ') {
        Some((n, "B")) => n.parse::<u64>().is_ok(),
        Some((n, unit)) => {
            ["KiB", "MiB", "GiB", "TiB"].contains(&unit)
                && n.split_once('.').is_some_and(|(a, b)| {
                    a.parse::<u64>().is_ok() && b.len() == 1 && b.parse::<u8>().is_ok()
                })
        }
        None => false,
    }
}

#[test]
fn status_and_prune_speak_in_binary_units_and_dedup_means_something_after_a_rewind() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        let same = "the same line in two files\n".repeat(2000);
        std::fs::write(d.join("one"), &same).expect("write");
        std::fs::write(d.join("two"), &same).expect("write");
    });
    m.turn(2);
    m.sh("echo changed > one; echo changed > two");
    let status = |m: &Mounted| {
        let v: serde_json::Value =
            serde_json::from_slice(&cli(m, &["status", "--json"], &[]).stdout).expect("json");
        (v, stdout(&cli(m, &["status"], &[])))
    };
    let (before, text) = status(&m);
    assert_eq!(before["preimage_bytes"], 2 * 54_000, "{before:#}");
    assert!(
        before["dedup_ratio"].as_f64().expect("ratio") >= 2.0,
        "{before:#}"
    );
    let line = |text: &str, start: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?} line: {text}"))
            .to_string()
    };
    let store = line(&text, "store:");
    assert!(is_size(between(&store, "store:", " on disk (")), "{text}");
    let stored = line(&text, "stored ");
    assert!(
        stored.contains("for 105.5 KiB of file pre-images (") && stored.contains("× by dedup"),
        "{text}"
    );
    // After a rewind the pre-images are kept for its undo, with what the rewind overwrote
    // (two files of "changed\n"): a figure as before, not 0.00.
    m.rewind(2);
    let (after, text) = status(&m);
    assert_eq!(after["preimage_bytes"], 2 * 54_000 + 2 * 8, "{after:#}");
    assert!(
        after["dedup_ratio"].as_f64().expect("ratio") >= 2.0,
        "{after:#}"
    );
    assert!(
        line(&text, "stored ").contains("for 105.5 KiB of file pre-images ("),
        "{text}"
    );
    assert!(!text.contains("0.00"), "{text}");

    let o = cli(&m, &["prune", "--keep-turns", "1", "--yes"], &[]);
    let said = stdout(&o);
    assert!(
        said.starts_with("pruned turns [1]; kept [2]; removed "),
        "{said}"
    );
    assert!(
        is_size(between(&said, ", freed ", "; the store is ")),
        "{said}"
    );
    assert!(is_size(between(&said, "; the store is ", "\n")), "{said}");
    let o = cli(&m, &["prune", "--keep-turns", "1", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(v["store_bytes"].as_u64().is_some(), "exact bytes: {v}");
}
