//! Running cases: replayed lists, generated properties, and the survey.

use super::*;

/// What a case runs with: hard links among the generated steps, and two processes making the
/// changes, one of them the agent (`agent_model.rs`; else every change is pid 0's).
#[derive(Clone, Copy)]
pub(super) struct Setup {
    pub(super) links: bool,
    pub(super) agent: bool,
}

impl Case {
    pub(super) fn with(fx: &Fixture, setup: Setup) -> Self {
        let mut c = Case::new(fx);
        c.links = setup.links;
        if setup.agent {
            c.start_agent_case();
        }
        c
    }
}

/// Replays a resolved operation list on a fresh folder of `fx`.
pub(super) fn run_ops(fx: &Fixture, ops: &[Op]) -> Result<(), String> {
    replay_ops(Case::new(fx), ops)
}

/// Replays a resolved operation list on case `c`.
pub(super) fn replay_ops(mut c: Case, ops: &[Op]) -> Result<(), String> {
    for op in ops {
        if let Err(f) = c.step(op.map(|p| p, key_of_literal)) {
            return Err(format!("[{}] {}\n{}", f.kind, f.detail, c.replay()));
        }
    }
    Ok(())
}

/// Runs a generated case: each step resolved against the model just before it, then `finish`.
pub(super) fn run_generated(
    fx: &Fixture,
    setup: Setup,
    ops: &[G],
    end: u8,
) -> Result<(), (Failure, String)> {
    STATS.with_borrow_mut(|(_, n)| *n += 1);
    let mut c = Case::with(fx, setup);
    for g in ops {
        match c.resolve(g) {
            Some(op) => c.step(op),
            None => {
                c.trace.push(format!("// {g:?}: nothing to apply it to"));
                Ok(())
            }
        }
        .map_err(|f| {
            let r = c.replay();
            (f, r)
        })?;
    }
    c.finish(end).map_err(|f| {
        let r = c.replay();
        (f, r)
    })
}

pub(super) fn strategy() -> impl Strategy<Value = (Vec<G>, u8)> {
    (prop::collection::vec(core_tier::step(), 5..60), any::<u8>())
}

pub(super) fn seed() -> [u8; 32] {
    let n = env_u64("CKPT_CORE_SEED").unwrap_or(0x636b_7074_636f_7265); // "ckptcore"
    let mut s = [0u8; 32];
    for (i, chunk) in s.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(n.rotate_left(13 * i as u32) ^ i as u64).to_le_bytes());
    }
    s
}

pub(super) fn runner(cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed()))
}

pub(super) fn cases() -> u32 {
    env_u64("CKPT_CORE_CASES").map_or(256, |n| n as u32)
}

/// The property on one fixture: every generated case passes; a failure is shrunk.
pub(super) fn property(fx: &Fixture, links: bool) {
    let setup = Setup {
        links,
        agent: false,
    };
    run_property(fx, setup, strategy());
}

/// Runs `strategy`'s cases with `setup` on `fx`; a failure is shrunk.
pub(super) fn run_property(
    fx: &Fixture,
    setup: Setup,
    strategy: impl Strategy<Value = (Vec<G>, u8)>,
) {
    let cases = cases();
    let mut runner = runner(cases);
    let started = Instant::now();
    let ran0 = cases_run();
    let result = runner.run(&strategy, |(ops, end)| {
        run_generated(fx, setup, &ops, end).map_err(|(f, replay)| {
            TestCaseError::fail(format!("[{}] {}\n{replay}", f.kind, f.detail))
        })
    });
    let secs = started.elapsed().as_secs_f64();
    let ran = cases_run() - ran0;
    eprintln!(
        "core model ({}, hard links {}{}): {ran} cases run in {secs:.1} s ({:.0} cases/s; {cases} asked, shrinking included); ran/skipped per operation: {}",
        fx.name(),
        if setup.links { "on" } else { "off" },
        if setup.agent {
            ", three processes, two of them named agents"
        } else {
            ""
        },
        ran as f64 / secs,
        stats_line()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Runs cases without shrinking and counts failures per kind.
pub(super) fn survey(fx: &Fixture, links: bool) {
    let setup = Setup {
        links,
        agent: false,
    };
    let cases = cases();
    let mut runner = runner(cases);
    let strategy = strategy();
    let started = Instant::now();
    let mut failed: BTreeMap<&'static str, (u32, String)> = BTreeMap::new();
    let mut first: Vec<(&'static str, _)> = Vec::new();
    for _ in 0..cases {
        let tree = strategy.new_tree(&mut runner).expect("generate a case");
        let (ops, end) = tree.current();
        if let Err((f, replay)) = run_generated(fx, setup, &ops, end) {
            let e = failed.entry(f.kind).or_insert_with(|| {
                first.push((f.kind, tree));
                (0, format!("{}\n{replay}", f.detail))
            });
            e.0 += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    // The first failure of each kind, shrunk while it fails the same way.
    for (kind, mut tree) in first {
        let mut last = None;
        let mut fails = true;
        loop {
            let more = if fails {
                tree.simplify()
            } else {
                tree.complicate()
            };
            if !more {
                break;
            }
            let (ops, end) = tree.current();
            fails = match run_generated(fx, setup, &ops, end) {
                Err((f, replay)) if f.kind == kind => {
                    last = Some(format!("{}\n{replay}", f.detail));
                    true
                }
                _ => false,
            };
        }
        if let (Some(l), Some(e)) = (last, failed.get_mut(kind)) {
            e.1 = format!("(shrunk) {l}");
        }
    }
    let total: u32 = failed.values().map(|v| v.0).sum();
    eprintln!(
        "survey ({}, hard links {}): {cases} cases in {secs:.1} s ({:.0} cases/s): {total} failed ({:.1}%)",
        fx.name(),
        if links { "on" } else { "off" },
        f64::from(cases) / secs,
        100.0 * f64::from(total) / f64::from(cases)
    );
    for (kind, (n, first)) in &failed {
        eprintln!("  [{kind}] {n} cases; the first:\n{first}\n");
    }
    eprintln!("  ran/skipped per operation so far: {}", stats_line());
}
