//! Moments on the command line: the argument every command that takes a turn parses
//! (`crate::moment`'s grammar), resolved against the turns `log` lists.

use super::{CliError, Target};
use crate::engine::Query;
use crate::info::TurnRow;
use crate::moment::{Candidate, Moment, Spec, Use};
use std::cell::OnceCell;

/// clap's parser of a moment argument.
pub fn parse(s: &str) -> Result<Spec, String> {
    crate::moment::parse_cli(s)
}

/// The turns of one folder as `log` lists them, asked of the folder (its daemon, or its store)
/// once per command however many parts of the command need them: the moments it resolves,
/// the picker, the conversations a rewind takes back.
pub struct History<'a> {
    target: &'a Target,
    rows: OnceCell<Vec<TurnRow>>,
}

impl<'a> History<'a> {
    /// The history of the folder `target`, not read yet.
    pub fn new(target: &'a Target) -> Self {
        Self {
            target,
            rows: OnceCell::new(),
        }
    }

    /// The rows `log` answers, read on the first call.
    pub fn rows(&self) -> Result<&[TurnRow], CliError> {
        if let Some(rows) = self.rows.get() {
            return Ok(rows);
        }
        let rows: Vec<TurnRow> = super::query(self.target.clone(), Query::Log, |_, e| {
            CliError::fail(e.to_string())
        })?;
        Ok(self.rows.get_or_init(|| rows))
    }

    /// The moment `spec` names (none given: none, the command's default), or a usage error
    /// naming what there is.
    pub fn resolve(&self, spec: Option<&Spec>, wanted: Use) -> Result<Option<Moment>, CliError> {
        let Some(spec) = spec else {
            return Ok(None);
        };
        let turns: Vec<Candidate> = self
            .rows()?
            .iter()
            .map(|r| Candidate {
                moment: Moment {
                    turn: r.turn,
                    rewound_by: r.rewound_by,
                },
                time: r.time,
                label: r.label.clone(),
            })
            .collect();
        spec.resolve(&turns, wanted)
            .map(Some)
            .map_err(|e| CliError::usage(e.0))
    }
}

/// The moment `spec` names in the folder `t`: [`History::resolve`] for a command that needs
/// the history for nothing else.
pub fn resolve(t: &Target, spec: Option<&Spec>, wanted: Use) -> Result<Option<Moment>, CliError> {
    History::new(t).resolve(spec, wanted)
}
