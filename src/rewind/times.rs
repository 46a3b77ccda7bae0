//! Where a rewind's time went: [`StageTimes`], stage by stage, and [`log_took`] for the parts
//! outside its stages. Logged at debug only; changes nothing.

/// Where a rewind's time went, stage by stage, logged once at its end (`RUST_LOG=debug`): the
/// figures docs/BENCHMARKS.md reads a large rewind's cost from.
pub(super) struct StageTimes {
    last: std::time::Instant,
    stages: Vec<(&'static str, std::time::Duration)>,
}

impl StageTimes {
    pub(super) fn start() -> Self {
        Self {
            last: std::time::Instant::now(),
            stages: Vec::new(),
        }
    }

    /// Ends the stage `name` (it began where the previous one ended).
    pub(super) fn end(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.stages.push((name, now - self.last));
        self.last = now;
    }

    pub(super) fn log(&self, steps: usize) {
        if log::log_enabled!(target: "ckpt::rewind", log::Level::Debug) {
            let stages: Vec<String> = self
                .stages
                .iter()
                .map(|(n, d)| format!("{n} {}", millis(*d)))
                .collect();
            log::debug!(target: "ckpt::rewind", "{steps} steps: {}", stages.join(", "));
        }
    }
}

/// Logs (at debug, with the stage times above) that `what` took the time since `since`: the
/// parts of a rewind outside its stages (deciding what to write, the mount's refresh).
pub(crate) fn log_took(what: &str, since: std::time::Instant) {
    log::debug!(target: "ckpt::rewind", "{what} in {}", millis(since.elapsed()));
}

fn millis(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}
