//! The virtual `.ckpt/` directory of the mounted view: `turn`, `rewind` and `.gitignore`.
//!
//! These nodes exist only in the mount (the real store under the same name is unreachable
//! from it). They are served with zero cache TTL and direct I/O, so a read is never stale.
//! Input is parsed strictly: anything but the documented forms is `EINVAL` and changes nothing.

use crate::capture::MAX_TURN;
use crate::ids::{NodeId, Turn};

/// Node id of the virtual `.ckpt` directory.
pub const CTL_DIR: NodeId = NodeId::new(2);
/// Node id of `.ckpt/turn`.
pub const CTL_TURN: NodeId = NodeId::new(3);
/// Node id of `.ckpt/rewind`.
pub const CTL_REWIND: NodeId = NodeId::new(4);
/// Node id of `.ckpt/.gitignore`.
pub const CTL_GITIGNORE: NodeId = NodeId::new(5);

/// Largest write accepted by a control file.
pub const MAX_INPUT: usize = 4096;

/// Whether `node` is one of the virtual nodes.
pub fn is_control(node: NodeId) -> bool {
    (CTL_DIR..=CTL_GITIGNORE).contains(&node)
}

/// The entries of the virtual directory: (node, name).
pub const ENTRIES: [(NodeId, &str); 3] = [
    (CTL_TURN, "turn"),
    (CTL_REWIND, "rewind"),
    (CTL_GITIGNORE, ".gitignore"),
];

/// The node for a name inside `.ckpt`.
pub fn lookup(name: &[u8]) -> Option<NodeId> {
    ENTRIES
        .iter()
        .find(|(_, n)| n.as_bytes() == name)
        .map(|(i, _)| *i)
}

/// A request written to `.ckpt/turn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnInput {
    /// The turn to begin.
    pub turn: Turn,
    /// Its label.
    pub label: Option<String>,
}

/// Parses `N` or `N label…` (one trailing newline allowed).
pub fn parse_turn(input: &[u8]) -> Option<TurnInput> {
    let text = strip(input)?;
    let (num, rest) = match text.find(char::is_whitespace) {
        Some(i) => (&text[..i], text[i..].trim()),
        None => (text, ""),
    };
    let turn = parse_turn_number(num, MAX_TURN)?;
    let label = (!rest.is_empty()).then(|| rest.to_string());
    if label
        .as_deref()
        .is_some_and(|l| l.chars().any(char::is_control))
    {
        return None;
    }
    Some(TurnInput { turn, label })
}

/// A request written to `.ckpt/rewind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RewindInput {
    /// Rewind to the start of the turn this moment names (`crate::moment`).
    To(crate::moment::Spec),
    /// Undo the last rewind.
    Undo,
}

/// Parses `undo`, `N`, or any other moment (`-1`, `@10:42`, `/fix the build`).
pub fn parse_rewind(input: &[u8]) -> Option<RewindInput> {
    let text = strip(input)?;
    if text == "undo" {
        return Some(RewindInput::Undo);
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        return parse_turn_number(text, MAX_REWIND_TO)
            .map(|n| RewindInput::To(crate::moment::Spec::Turn(n)));
    }
    if text.chars().any(char::is_control) {
        return None;
    }
    crate::moment::parse_cli(text).ok().map(RewindInput::To)
}

fn strip(input: &[u8]) -> Option<&str> {
    if input.len() > MAX_INPUT {
        return None;
    }
    let text = std::str::from_utf8(input).ok()?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() || text.contains('\n') {
        return None;
    }
    Some(text)
}

/// The largest turn `.ckpt/rewind` names: any a store can hold, those begun before new turns
/// were bounded by [`MAX_TURN`] included (up to 2^53 - 1, the bound then). A turn that does
/// not exist is refused by the rewind itself.
const MAX_REWIND_TO: Turn = Turn::new((1 << 53) - 1);

/// `N` or `N.S` (a step), plain decimal digits, `N` in 1..=max: no sign, exponent, or
/// leading `+`.
fn parse_turn_number(s: &str, max: Turn) -> Option<Turn> {
    if s.is_empty() || s.len() > 27 || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let n: Turn = s.parse().ok()?;
    (Turn::new(1)..=max).contains(&n.whole()).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_turn_input_is_refused() {
        for bad in [
            &b"abc"[..],
            b"",
            b"\n",
            b"-1",
            b"0",
            b"1e30",
            b"+3",
            b" 3",
            b"3\n\n",
            b"99999999999999999999",
            b"4294967296",
            b"9007199254740991",
            b"9007199254740991 label",
            b"2 lab\x07el",
            b"\xff",
        ] {
            assert_eq!(parse_turn(bad), None, "{bad:?} accepted");
        }
        assert_eq!(parse_turn(&vec![b'1'; 1 << 20]), None);
    }

    #[test]
    fn turn_with_label() {
        assert_eq!(
            parse_turn(b"2\n"),
            Some(TurnInput {
                turn: Turn::new(2),
                label: None
            })
        );
        assert_eq!(
            parse_turn(b"4294967295\n"),
            Some(TurnInput {
                turn: MAX_TURN,
                label: None
            })
        );
        assert_eq!(
            parse_turn(b"7 fix the build\n"),
            Some(TurnInput {
                turn: Turn::new(7),
                label: Some("fix the build".into())
            })
        );
    }

    #[test]
    fn rewind_input() {
        use crate::moment::Spec;
        assert_eq!(
            parse_rewind(b"3\n"),
            Some(RewindInput::To(Spec::Turn(Turn::new(3))))
        );
        assert_eq!(parse_rewind(b"undo"), Some(RewindInput::Undo));
        assert_eq!(parse_rewind(b"3 x"), None);
        assert_eq!(parse_rewind(b"3#4"), None, "a rewind goes to a live turn");
        assert_eq!(parse_rewind(b"-1\n"), Some(RewindInput::To(Spec::Back(1))));
        assert_eq!(
            parse_rewind(b"/fix the build\n"),
            Some(RewindInput::To(Spec::Label("fix the build".into())))
        );
        assert_eq!(parse_rewind(b"/a\x07b"), None);
    }
}
