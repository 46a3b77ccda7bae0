use super::*;

/// A fixed zone: UTC+1, no summer time.
fn plus_one(c: Civil) -> Option<i64> {
    let days = crate::units::days_from_civil(c.year, c.month, c.day)?;
    Some(
        days * 86_400 + i64::from(c.hms.0) * 3600 + i64::from(c.hms.1) * 60 + i64::from(c.hms.2)
            - 3600,
    )
}

/// 2026-12-04 12:00 UTC.
const NOW: i64 = 1_796_385_600;

fn parse(s: &str) -> Result<Spec, String> {
    Spec::parse(s, NOW, &plus_one)
}

fn cand(turn: u64, by: Option<u64>, time: u64, label: &str) -> Candidate {
    Candidate {
        moment: Moment {
            turn: Turn::new(turn),
            rewound_by: by,
        },
        time,
        label: (!label.is_empty()).then(|| label.to_string()),
    }
}

/// Turns 1 to 3 live, 3#6 and 4#6 retired by rewind #6, as `log` orders them.
fn history() -> Vec<Candidate> {
    let t0 = NOW as u64 - 3600;
    vec![
        cand(1, None, t0, "mounted"),
        cand(2, None, t0 + 600, "Fix the parser"),
        cand(3, Some(6), t0 + 1200, "add tests"),
        cand(3, None, t0 + 2400, "again"),
        cand(4, Some(6), t0 + 1800, "fix the build"),
    ]
}

fn resolve(s: &str, wanted: Use) -> Result<String, String> {
    let spec = parse(s)?;
    spec.resolve(&history(), wanted)
        .map(|m| m.to_string())
        .map_err(|e| e.0)
}

#[test]
fn each_form_parses_and_prints_as_written() {
    for s in [
        "3",
        "3#6",
        "3.2",
        "3.12#6",
        "-1",
        "-12",
        "@10:42",
        "@2026-12-04 10:42",
        "/fix",
    ] {
        assert_eq!(parse(s).map(|m| m.text()), Ok(s.to_string()));
    }
    let unix = |s: &str| match parse(s) {
        Ok(Spec::At { unix, .. }) => unix,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(unix("@10:42"), unix("@2026-12-04T10:42"));
    // 10:42:30 at UTC+1 is 09:42:30 UTC, 2h17m30s before noon UTC.
    assert_eq!(unix("@10:42:30"), NOW - (2 * 3600 + 17 * 60 + 30));
    for bad in [
        "",
        "x",
        "-0",
        "-x",
        "3#",
        "#4",
        "@",
        "@25:00",
        "@10:61",
        "@2026-02-30",
        "/",
        "1.",
        "1.0",
        ".5",
        "1.5.2",
        "1.-2",
    ] {
        assert!(parse(bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn a_number_is_the_live_turn_and_for_reading_the_one_rewound_turn_of_it() {
    assert_eq!(resolve("3", Use::Read), Ok("3".into()));
    assert_eq!(resolve("4", Use::Read), Ok("4#6".into()));
    let refused = resolve("4", Use::Rewind).expect_err("a rewind to a retired turn");
    assert!(
        refused.contains("4#6") && refused.contains("undo"),
        "{refused}"
    );
    let unknown = resolve("9", Use::Read).expect_err("no turn 9");
    assert!(unknown.contains("1, 2, 3#6, 3, 4#6"), "{unknown}");
    assert_eq!(resolve("3#6", Use::Read), Ok("3#6".into()));
    assert!(
        resolve("3#5", Use::Read)
            .expect_err("no 3#5")
            .contains("3#6, 4#6")
    );
}

#[test]
fn a_number_rewound_twice_is_ambiguous_and_names_both() {
    let mut turns = history();
    turns.push(cand(4, Some(9), NOW as u64, ""));
    let e = Spec::Turn(Turn::new(4))
        .resolve(&turns, Use::Read)
        .expect_err("ambiguous");
    assert!(e.0.contains("ambiguous") && e.0.contains("4#6, 4#9"), "{e}");
}

#[test]
fn back_counts_live_turns_from_the_current_one() {
    assert_eq!(resolve("-1", Use::Rewind), Ok("2".into()));
    assert_eq!(resolve("-2", Use::Rewind), Ok("1".into()));
    let e = resolve("-3", Use::Rewind).expect_err("too far");
    assert!(e.contains("only 2 turns before"), "{e}");
}

#[test]
fn a_time_is_the_live_turn_current_then() {
    // Turn 2 began at 11:10 UTC (12:10 local), turn 3 at 11:40 UTC (12:40 local).
    assert_eq!(resolve("@12:15", Use::Rewind), Ok("2".into()));
    assert_eq!(resolve("@12:40", Use::Rewind), Ok("3".into()));
    assert_eq!(resolve("@2026-12-05", Use::Read), Ok("3".into()));
    let e = resolve("@11:59", Use::Read).expect_err("before every turn");
    assert!(e.contains("no turn had begun then"), "{e}");
}

#[test]
fn a_label_is_the_newest_turn_containing_it_ignoring_case() {
    assert_eq!(resolve("/FIX", Use::Read), Ok("4#6".into()));
    assert_eq!(resolve("/fix", Use::Rewind), Ok("2".into()));
    let e = resolve("/nothing", Use::Read).expect_err("no such label");
    assert!(e.contains("\"again\"") && e.contains("labels"), "{e}");
}

#[test]
fn local_unix_reads_the_zone_at_the_result() {
    // Whatever the zone of this machine, the round trip holds.
    let c = Civil {
        year: 2026,
        month: 7,
        day: 1,
        hms: (10, 42, 0),
    };
    let unix = local_unix(c).expect("a time");
    let back = crate::units::CivilTime::local(unix);
    assert_eq!(
        (back.year, back.month, back.day, back.hour, back.minute),
        (2026, 7, 1, 10, 42)
    );
}

#[test]
fn a_live_moment_travels_as_its_number_and_a_rewound_one_as_both() {
    let live = Moment::live(Turn::new(3));
    assert_eq!(serde_json::to_string(&live).expect("encode"), "3");
    let rewound = Moment {
        turn: Turn::new(3),
        rewound_by: Some(6),
    };
    let text = serde_json::to_string(&rewound).expect("encode");
    assert_eq!(text, r#"{"turn":3,"rewound_by":6}"#);
    for m in [live, rewound] {
        let back: Moment =
            serde_json::from_str(&serde_json::to_string(&m).expect("encode")).expect("decode");
        assert_eq!(back, m);
    }
}

/// Turns 1 and 2 live with steps 2.1 and 2.2 (tool calls), step 2.3 retired by rewind #7.
fn with_steps() -> Vec<Candidate> {
    let t0 = NOW as u64 - 3600;
    let step = |n: u64, s: u32, by: Option<u64>, time: u64, label: &str| Candidate {
        moment: Moment {
            turn: Turn::with_step(n, s),
            rewound_by: by,
        },
        time,
        label: Some(label.to_string()),
    };
    vec![
        cand(1, None, t0, "mounted"),
        cand(2, None, t0 + 600, "add a test"),
        step(2, 1, None, t0 + 660, "Edit src/lib.rs"),
        step(2, 2, None, t0 + 720, "Bash npm install"),
        step(2, 3, Some(7), t0 + 780, "Bash rm -rf build"),
    ]
}

#[test]
fn steps_are_named_found_by_time_and_label_and_not_counted_as_turns() {
    let r = |s: &str, wanted| {
        parse(s)?
            .resolve(&with_steps(), wanted)
            .map(|m| m.to_string())
            .map_err(|e| e.0)
    };
    assert_eq!(r("2.2", Use::Rewind), Ok("2.2".into()));
    assert_eq!(r("2.3", Use::Read), Ok("2.3#7".into()));
    assert!(r("2.3", Use::Rewind).is_err_and(|e| e.contains("2.3#7")));
    assert!(r("2.4", Use::Read).is_err_and(|e| e.contains("2.1, 2.2")));
    // Step 2.1 began at 11:11 UTC (12:11 local), step 2.2 a minute later.
    assert_eq!(r("@12:11:30", Use::Rewind), Ok("2.1".into()));
    assert_eq!(r("/npm", Use::Rewind), Ok("2.2".into()));
    assert_eq!(r("/rm -rf", Use::Read), Ok("2.3#7".into()));
    // The current turn is 2 (at step 2.2): one turn back is turn 1, whatever the steps.
    assert_eq!(r("-1", Use::Rewind), Ok("1".into()));
    assert!(r("-2", Use::Rewind).is_err_and(|e| e.contains("only 1 turns before")));
}
