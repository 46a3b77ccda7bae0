//! Moments on the command line: the argument every command that takes a turn parses
//! (`crate::moment`'s grammar), resolved against the turns `log` lists.

use super::{CliError, Target};
use crate::engine::Query;
use crate::info::TurnRow;
use crate::moment::{Candidate, Moment, Spec, Use};

/// clap's parser of a moment argument.
pub fn parse(s: &str) -> Result<Spec, String> {
    crate::moment::parse_cli(s)
}

/// The turns of the folder `t` as `log` lists them, as moments can name them.
pub fn candidates(t: &Target) -> Result<Vec<Candidate>, CliError> {
    let rows: Vec<TurnRow> =
        super::query(t.clone(), Query::Log, |_, e| CliError::fail(e.to_string()))?;
    Ok(rows
        .into_iter()
        .map(|r| Candidate {
            moment: Moment {
                turn: r.turn,
                rewound_by: r.rewound_by,
            },
            time: r.time,
            label: r.label,
        })
        .collect())
}

/// The moment `spec` names in the folder `t` (none given: none, the command's default), or a
/// usage error naming what there is.
pub fn resolve(t: &Target, spec: Option<&Spec>, wanted: Use) -> Result<Option<Moment>, CliError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let turns = candidates(t)?;
    spec.resolve(&turns, wanted)
        .map(Some)
        .map_err(|e| CliError::usage(e.0))
}
