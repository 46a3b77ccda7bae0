//! Moments by name: the one grammar every command that takes a turn reads (`rewind`, `diff`,
//! `show`, `cat`, `restore`, `.ckpt/rewind`), and its resolution against the turns `log` lists.
//!
//! ```text
//! N          turn N (a live turn; for reading, also the one rewound turn N when no live one is)
//! N.S        step S of turn N (a tool call the agent's hook marked; `hooks install --steps`)
//! N#K        turn N as rewind #K retired it (`log` lists it as `N  rewound #K`)
//! -K         K turns before the current one (-1: the previous turn; steps are not counted)
//! @TIME      the turn current at TIME, local time: @10:42, @10:42:05, @"2026-12-04 10:42",
//!            @2026-12-04T10:42, @2026-12-04 (midnight)
//! /TEXT      the newest turn whose label contains TEXT (case is ignored)
//! ```
//!
//! Parsing is pure ([`Spec::parse`]); resolving ([`Spec::resolve`]) needs only the list of turns
//! as `log` has them ([`Candidate`]), so the CLI resolves against a mounted folder's log and an
//! unmounted one's alike, and the daemon against its own index for `.ckpt/rewind`.

use crate::ids::Turn;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A moment as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `N`.
    Turn(Turn),
    /// `N#K`.
    Rewound {
        /// The turn.
        turn: Turn,
        /// The rewind (operation id) that retired it.
        by: u64,
    },
    /// `-K`.
    Back(u64),
    /// `@TIME`, as Unix seconds (the local time zone applied when it was parsed), with the text.
    At {
        /// The time.
        unix: i64,
        /// What was written after `@`.
        text: String,
    },
    /// `/TEXT`.
    Label(String),
}

/// A turn as it can be named: live, or retired by a rewind. On the wire a live turn is its
/// number, as requests carried turns before moments had names (an older daemon reads it), and a
/// retired one `{"turn": N, "rewound_by": K}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Moment {
    /// The turn number.
    pub turn: Turn,
    /// The rewind (operation id) that retired it; none for a live turn.
    pub rewound_by: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum WireMoment {
    Live(Turn),
    Rewound { turn: Turn, rewound_by: u64 },
}

impl Serialize for Moment {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.rewound_by {
            None => WireMoment::Live(self.turn),
            Some(by) => WireMoment::Rewound {
                turn: self.turn,
                rewound_by: by,
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Moment {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match WireMoment::deserialize(d)? {
            WireMoment::Live(turn) => Self::live(turn),
            WireMoment::Rewound { turn, rewound_by } => Self {
                turn,
                rewound_by: Some(rewound_by),
            },
        })
    }
}

impl Moment {
    /// Live turn `turn`.
    pub fn live(turn: Turn) -> Self {
        Self {
            turn,
            rewound_by: None,
        }
    }
}

impl fmt::Display for Moment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rewound_by {
            None => write!(f, "{}", self.turn),
            Some(k) => write!(f, "{}#{k}", self.turn),
        }
    }
}

/// A turn `log` lists, as far as naming it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Which turn.
    pub moment: Moment,
    /// When it began (Unix seconds).
    pub time: u64,
    /// Its label.
    pub label: Option<String>,
}

/// What a moment is wanted for: a rewind goes to live turns only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// `rewind`: a live turn.
    Rewind,
    /// `cat`, `show`, `diff`, `restore`: any turn `log` lists.
    Read,
}

/// Why a spec names no turn (a usage error: the line names what there is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved(pub String);

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unresolved {}

impl Spec {
    /// Parses one moment. `local` turns a civil time into Unix seconds (the local zone; a
    /// parameter so tests can fix it).
    pub fn parse(s: &str, now: i64, local: &dyn Fn(Civil) -> Option<i64>) -> Result<Self, String> {
        if let Some(text) = s.strip_prefix('/') {
            if text.is_empty() {
                return Err("`/` needs the text a label contains: /TEXT".into());
            }
            return Ok(Self::Label(text.to_string()));
        }
        if let Some(text) = s.strip_prefix('@') {
            let unix = parse_time(text, now, local)?;
            return Ok(Self::At {
                unix,
                text: text.to_string(),
            });
        }
        if let Some(k) = s.strip_prefix('-') {
            return match k.parse::<u64>() {
                Ok(k) if k > 0 => Ok(Self::Back(k)),
                _ => Err(format!(
                    "not a moment: {s:?} (-K is K turns back, K from 1)"
                )),
            };
        }
        let number = |t: &str| t.parse::<Turn>().map_err(|_| bad(s));
        match s.split_once('#') {
            Some((n, k)) => Ok(Self::Rewound {
                turn: number(n)?,
                by: k.parse::<u64>().map_err(|_| bad(s))?,
            }),
            None => Ok(Self::Turn(number(s)?)),
        }
    }

    /// The spec as the user wrote it.
    pub fn text(&self) -> String {
        match self {
            Self::Turn(t) => t.to_string(),
            Self::Rewound { turn, by } => format!("{turn}#{by}"),
            Self::Back(k) => format!("-{k}"),
            Self::At { text, .. } => format!("@{text}"),
            Self::Label(text) => format!("/{text}"),
        }
    }

    /// The turn this spec names among `turns` (in `log`'s order: by turn, a rewound one before
    /// the live one of its number).
    pub fn resolve(&self, turns: &[Candidate], wanted: Use) -> Result<Moment, Unresolved> {
        let live: Vec<&Candidate> = turns
            .iter()
            .filter(|c| c.moment.rewound_by.is_none())
            .collect();
        let usable: Vec<&Candidate> = match wanted {
            Use::Rewind => live.clone(),
            Use::Read => turns.iter().collect(),
        };
        match self {
            Self::Turn(n) => by_number(*n, &live, turns, wanted),
            Self::Rewound { turn, by } => {
                let m = Moment {
                    turn: *turn,
                    rewound_by: Some(*by),
                };
                if wanted == Use::Rewind {
                    return Err(Unresolved(format!(
                        "turn {m} was retired by rewind #{by}; a rewind goes to a live turn (`ckpt-mount undo` brings {m} back)"
                    )));
                }
                if turns.iter().any(|c| c.moment == m) {
                    return Ok(m);
                }
                Err(Unresolved(format!(
                    "no turn {m}: {}",
                    names(
                        turns.iter().filter(|c| c.moment.rewound_by.is_some()),
                        "no turn is rewound"
                    )
                )))
            }
            Self::Back(k) => {
                // Turns are counted, not the steps within them: `-1` is the previous prompt
                // however many tool calls the current one made.
                let live: Vec<&Candidate> = live
                    .iter()
                    .copied()
                    .filter(|c| !c.moment.turn.is_step())
                    .collect();
                let k = usize::try_from(*k).unwrap_or(usize::MAX);
                match live
                    .len()
                    .checked_sub(1)
                    .and_then(|last| last.checked_sub(k))
                {
                    Some(i) => Ok(live[i].moment),
                    None => Err(Unresolved(format!(
                        "-{k}: there are only {} turns before the current one ({})",
                        live.len().saturating_sub(1),
                        names(live.iter().copied(), "none")
                    ))),
                }
            }
            Self::At { unix, text } => {
                let at = u64::try_from(*unix).unwrap_or(0);
                // The turn current then: the live turn begun last at or before it.
                live.iter()
                    .rev()
                    .find(|c| c.time <= at)
                    .map(|c| c.moment)
                    .ok_or_else(|| {
                        let first = live.first().map_or_else(
                            || "there is no turn".to_string(),
                            |c| format!("turn {} began {}", c.moment, local_minute(c.time)),
                        );
                        Unresolved(format!(
                            "@{text}: no turn had begun then; the first, {first}"
                        ))
                    })
            }
            Self::Label(text) => {
                let needle = text.to_lowercase();
                usable
                    .iter()
                    .filter(|c| {
                        c.label
                            .as_deref()
                            .is_some_and(|l| l.to_lowercase().contains(&needle))
                    })
                    .max_by_key(|c| (c.time, c.moment.rewound_by.is_none(), c.moment.turn))
                    .map(|c| c.moment)
                    .ok_or_else(|| {
                        Unresolved(format!(
                            "/{text}: no turn's label contains {text:?}; the labels: {}",
                            labels(&usable)
                        ))
                    })
            }
        }
    }
}

fn bad(s: &str) -> String {
    format!(
        "not a moment: {s:?} (a turn N, N.S, N#K, -K, @TIME or /TEXT; MOMENTS in `ckpt-mount man`)"
    )
}

/// `N`: the live turn N; for reading, the one rewound turn N when no live one is.
fn by_number(
    n: Turn,
    live: &[&Candidate],
    turns: &[Candidate],
    wanted: Use,
) -> Result<Moment, Unresolved> {
    if live.iter().any(|c| c.moment.turn == n) {
        return Ok(Moment::live(n));
    }
    let rewound: Vec<&Candidate> = turns
        .iter()
        .filter(|c| c.moment.turn == n && c.moment.rewound_by.is_some())
        .collect();
    match (wanted, rewound.as_slice()) {
        (Use::Read, [one]) => Ok(one.moment),
        (Use::Read, [_, _, ..]) => Err(Unresolved(format!(
            "turn {n} is ambiguous: several rewinds retired a turn {n}: {}",
            names(rewound.iter().copied(), "")
        ))),
        (Use::Rewind, [_, ..]) => Err(Unresolved(format!(
            "turn {n} was retired by a rewind ({}); a rewind goes to a live turn (`ckpt-mount undo` brings it back)",
            names(rewound.iter().copied(), "")
        ))),
        _ => Err(Unresolved(format!(
            "turn {n} does not exist; the turns: {}",
            names(turns.iter(), "none")
        ))),
    }
}

/// The moments named, as `1, 2, 3#4` (at most 12, then a count).
fn names<'a>(cands: impl Iterator<Item = &'a Candidate>, none: &str) -> String {
    let all: Vec<String> = cands.map(|c| c.moment.to_string()).collect();
    if all.is_empty() {
        return none.to_string();
    }
    let mut s = all.iter().take(12).cloned().collect::<Vec<_>>().join(", ");
    if all.len() > 12 {
        s += &format!(" and {} more", all.len() - 12);
    }
    s
}

/// The newest labels, quoted, with their turns.
fn labels(cands: &[&Candidate]) -> String {
    let all: Vec<String> = cands
        .iter()
        .rev()
        .filter_map(|c| c.label.as_ref().map(|l| format!("{} {l:?}", c.moment)))
        .take(8)
        .collect();
    if all.is_empty() {
        "no turn has one".into()
    } else {
        all.join(", ")
    }
}

fn local_minute(unix: u64) -> String {
    crate::units::CivilTime::local(crate::units::unix_seconds(unix)).to_minute()
}

/// A civil date and time, before a time zone makes it a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// Year.
    pub year: i64,
    /// Month, 1 to 12.
    pub month: u32,
    /// Day, 1 to 31.
    pub day: u32,
    /// Hour, minute, second.
    pub hms: (u32, u32, u32),
}

/// `@TIME`'s text: `HH:MM[:SS]` (today), `YYYY-MM-DD`, `YYYY-MM-DD HH:MM[:SS]` (or with `T`).
fn parse_time(text: &str, now: i64, local: &dyn Fn(Civil) -> Option<i64>) -> Result<i64, String> {
    let err = || {
        format!(
            "not a time: @{text} (@10:42, @10:42:05, @\"2026-12-04 10:42\", @2026-12-04T10:42 or @2026-12-04, local time)"
        )
    };
    let text = text.trim();
    let (date, time) = match text.split_once([' ', 'T']) {
        Some((d, t)) => (Some(d), Some(t)),
        None if text.contains(':') => (None, Some(text)),
        None => (Some(text), None),
    };
    let hms = match time {
        None => (0, 0, 0),
        Some(t) => {
            let parts: Vec<&str> = t.split(':').collect();
            let num = |p: &str, max: u32| {
                (p.len() == 2 || p.len() == 1)
                    .then(|| p.parse::<u32>().ok())
                    .flatten()
                    .filter(|v| *v <= max)
            };
            match parts.as_slice() {
                [h, m] => (num(h, 23).ok_or_else(err)?, num(m, 59).ok_or_else(err)?, 0),
                [h, m, s] => (
                    num(h, 23).ok_or_else(err)?,
                    num(m, 59).ok_or_else(err)?,
                    num(s, 59).ok_or_else(err)?,
                ),
                _ => return Err(err()),
            }
        }
    };
    let (year, month, day) = match date {
        Some(d) => {
            let parts: Vec<&str> = d.split('-').collect();
            let [y, m, dd] = parts.as_slice() else {
                return Err(err());
            };
            let y = y.parse::<i64>().map_err(|_| err())?;
            let m = m
                .parse::<u32>()
                .ok()
                .filter(|m| (1..=12).contains(m))
                .ok_or_else(err)?;
            let dd = dd
                .parse::<u32>()
                .ok()
                .filter(|d| (1..=31).contains(d))
                .ok_or_else(err)?;
            (y, m, dd)
        }
        None => {
            let today = crate::units::CivilTime::local(now);
            (today.year, today.month, today.day)
        }
    };
    local(Civil {
        year,
        month,
        day,
        hms,
    })
    .ok_or_else(err)
}

/// A civil time in the local time zone as Unix seconds: the UTC reading, moved by the zone's
/// offset at that moment (read again at the result, for a change of offset in between).
pub fn local_unix(c: Civil) -> Option<i64> {
    let utc = crate::units::days_from_civil(c.year, c.month, c.day)? * 86_400
        + i64::from(c.hms.0) * 3600
        + i64::from(c.hms.1) * 60
        + i64::from(c.hms.2);
    let offset = |t: i64| {
        crate::sys::local_time(t)
            .map(|tm| tm.tm_gmtoff)
            .unwrap_or(0)
    };
    let first = utc - offset(utc);
    Some(utc - offset(first))
}

/// Parses a moment for the CLI (the local time zone, the clock now).
pub fn parse_cli(s: &str) -> Result<Spec, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Spec::parse(s, now, &local_unix)
}

#[cfg(test)]
mod tests;
