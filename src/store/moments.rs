//! The moments the index can name: every live turn, and every turn a rewind in effect retired
//! (the turn it went back to too: the work that turn had done before the rewind), each with
//! where it began in the journal and where it ended.

use super::entries::{Capture, TurnInfo};
use super::index::Index;
use super::ops::{Change, Effect};
use crate::ids::{Seq, Turn};
use crate::moment::{Candidate, Moment};

/// A turn a rewind in effect retired, as the index holds it.
#[derive(Debug, Clone)]
pub struct Retired<'a> {
    /// The rewind's operation id.
    pub by: u64,
    /// The turn as it was when the rewind ran (for the turn it went back to: its start before
    /// the rewind).
    pub info: TurnInfo,
    /// Where the rewind began: the retired turns end there.
    pub rewind_began: Seq,
    /// The captures the rewind retired (of every turn it retired).
    pub captures: &'a [Capture],
}

/// Where a moment's turn ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// At the start of a later turn, begun at this journal position.
    At(Seq),
    /// Now: it is the current turn.
    Now,
}

impl Index {
    /// Every turn a rewind in effect retired, in the order of the rewinds, then of the turns.
    pub fn retired(&self) -> Vec<Retired<'_>> {
        let mut out = Vec::new();
        for (i, a) in self.ops.undo.iter().enumerate() {
            let Change::Folder {
                begin,
                effect:
                    Effect::Rewind {
                        to,
                        old_time,
                        old_began,
                        retired_turns,
                        retired,
                        ..
                    },
                ..
            } = &a.change
            else {
                continue;
            };
            // The turn it went back to had its own work before the rewind (retired too):
            // listed when it had any, with its label as the live turn has it.
            if retired.iter().any(|c| c.turn == *to) {
                let now = self.turn_as_known(*to, i + 1);
                out.push(Retired {
                    by: a.op,
                    info: TurnInfo {
                        turn: *to,
                        label: now.and_then(|t| t.label.clone()),
                        time: *old_time,
                        by: now.and_then(|t| t.by.clone()),
                        conversation: now.and_then(|t| t.conversation.clone()),
                        began: *old_began,
                    },
                    rewind_began: *begin,
                    captures: retired,
                });
            }
            for t in retired_turns {
                out.push(Retired {
                    by: a.op,
                    info: t.clone(),
                    rewind_began: *begin,
                    captures: retired,
                });
            }
        }
        out
    }

    /// Turn `n` as the index knows it now: live, or retired by a rewind above the `from`th
    /// entry of the undo stack (its label and who began it survive there).
    fn turn_as_known(&self, n: Turn, from: usize) -> Option<&TurnInfo> {
        if let Some(t) = self.turns.iter().find(|t| t.turn == n) {
            return Some(t);
        }
        self.ops
            .undo
            .iter()
            .skip(from)
            .find_map(|a| match &a.change {
                Change::Folder {
                    effect: Effect::Rewind { retired_turns, .. },
                    ..
                } => retired_turns.iter().find(|t| t.turn == n),
                _ => None,
            })
    }

    /// Every moment `log` lists, in its order (by turn; a rewound one before the live one).
    pub fn candidates(&self) -> Vec<Candidate> {
        self.moments_began().into_iter().map(|(c, _)| c).collect()
    }

    /// Every moment `log` lists, in its order, each with where it began in the journal: one
    /// pass over the retired turns (a lookup of each by [`Index::span_of`] would make one per
    /// moment).
    pub fn moments_began(&self) -> Vec<(Candidate, Seq)> {
        let mut out: Vec<(Candidate, Seq)> = self
            .turns
            .iter()
            .map(|t| {
                let c = Candidate {
                    moment: Moment::live(t.turn),
                    time: t.time,
                    label: t.label.clone(),
                };
                (c, t.began)
            })
            .chain(self.retired().into_iter().map(|r| {
                let c = Candidate {
                    moment: Moment {
                        turn: r.info.turn,
                        rewound_by: Some(r.by),
                    },
                    time: r.info.time,
                    label: r.info.label,
                };
                (c, r.info.began)
            }))
            .collect();
        out.sort_by_key(|(c, _)| {
            (
                c.moment.turn,
                c.moment.rewound_by.is_none(),
                c.moment.rewound_by,
            )
        });
        out
    }

    /// Where `m` began in the journal and where it ended: `None` when the index has no such
    /// turn.
    pub fn span_of(&self, m: Moment) -> Option<(Seq, End)> {
        match m.rewound_by {
            None => {
                let i = self.turns.iter().position(|t| t.turn == m.turn)?;
                let end = self.turns.get(i + 1).map_or(End::Now, |n| End::At(n.began));
                Some((self.turns[i].began, end))
            }
            Some(k) => {
                let all = self.retired();
                let of_k: Vec<&Retired<'_>> = all.iter().filter(|r| r.by == k).collect();
                let i = of_k.iter().position(|r| r.info.turn == m.turn)?;
                let end = of_k
                    .get(i + 1)
                    .map_or(of_k[i].rewind_began, |n| n.info.began);
                Some((of_k[i].info.began, End::At(end)))
            }
        }
    }

    /// The captures taken in `m` (in journal order).
    pub fn captures_of(&self, m: Moment) -> Vec<&Capture> {
        match m.rewound_by {
            None => self.captures.iter().filter(|c| c.turn == m.turn).collect(),
            Some(k) => self
                .retired()
                .into_iter()
                .find(|r| r.by == k && r.info.turn == m.turn)
                .map(|r| {
                    r.captures
                        .iter()
                        .filter(|c| c.turn == m.turn)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        }
    }

    /// Whether `m` names a turn the index has.
    pub fn has_moment(&self, m: Moment) -> bool {
        self.span_of(m).is_some()
    }

    /// The live turn `n`'s journal start (`None`: no such live turn).
    pub fn began(&self, n: Turn) -> Option<Seq> {
        self.turns.iter().find(|t| t.turn == n).map(|t| t.began)
    }
}
