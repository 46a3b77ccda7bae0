//! After a rewind across turns an agent CLI began (the whole folder, or `--agent`): how to take
//! each of those agents' conversations back to the prompt the folder went back to. Each agent
//! CLI rewinds its own conversation (Claude Code's and Gemini CLI's `/rewind`, Codex's Esc
//! Esc); ckpt-mount cannot reach into it, so it says which prompt to pick, one line per
//! session. The turns' agents, sessions and prompts are what the hooks recorded (the `turn`
//! record's `by` and `conversation`, docs/FORMAT.md).

use super::moment::History;
use crate::info::TurnRow;
use crate::rewind::{Agents, ConversationBack, ReportJson};

/// The agent CLIs whose conversation can be taken back, as their hooks name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AgentCli {
    ClaudeCode,
    Codex,
    Gemini,
}

impl AgentCli {
    /// The agent CLI a turn's `by` names (`claude-code:1f3a…`, `codex`), if one.
    fn of(by: &str) -> Option<Self> {
        match by.split_once(':').map_or(by, |(cli, _)| cli) {
            "claude-code" => Some(Self::ClaudeCode),
            "codex" => Some(Self::Codex),
            "gemini" => Some(Self::Gemini),
            _ => None,
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::ClaudeCode => "Claude Code",
            Self::Codex => "Codex",
            Self::Gemini => "Gemini CLI",
        }
    }

    /// What to do in the agent to take its conversation back to just before `prompt` (the
    /// prompt, already quoted for the line; or where it stands, when the prompt is unknown).
    fn how(self, prompt: &str) -> String {
        match self {
            Self::ClaudeCode => format!(
                "run /rewind, pick {prompt} and restore the conversation only (the files are back already)"
            ),
            Self::Codex => format!(
                "press Esc Esc to edit your previous message, Esc again to step further back, to {prompt}"
            ),
            Self::Gemini => format!(
                "run /rewind (or press Esc twice), pick {prompt} and rewind the conversation only (the files are back already)"
            ),
        }
    }
}

/// What a rewind needs to know before it runs to say which conversations to take back: the
/// turns as `log` lists them (the ones it retires are still live then), and the agents of
/// `--agent NAME`.
pub struct Before {
    rows: Vec<TurnRow>,
    agents: Option<Agents>,
}

/// Reads [`Before`] for the rewind `a` asks for in the folder `t`, when it can take turns back
/// (a whole or `--agent` rewind, not an undo, a dry run or a rewind of some paths); `None`
/// otherwise, or when the log cannot be read (which costs the rewind only these lines).
pub fn before(history: &History<'_>, a: &super::rewind::RewindArgs) -> Option<Before> {
    if a.undo || a.dry_run || !a.paths.is_empty() {
        return None;
    }
    let rows = history.rows().ok()?.to_vec();
    Some(Before {
        rows,
        agents: a.agent.clone().map(Agents::from_names),
    })
}

/// The conversations to take back after the rewind `r`: one per agent session that began a
/// turn (not a step) from the target to the current one (with `--agent NAME`, of those agents only), at
/// the first prompt it sent there. None after a rewind that did not run to its end.
pub fn back(before: Option<&Before>, r: &ReportJson) -> Vec<ConversationBack> {
    let Some(Before { rows, agents }) = before else {
        return Vec::new();
    };
    let ran = !(r.dry_run || r.undo || r.refused || r.completes_cut_off || r.unfinished);
    if !ran || r.op.is_some() || !r.only.is_empty() {
        return Vec::new();
    }
    let agents = agents.as_ref();
    let mut taken: Vec<&TurnRow> = rows
        .iter()
        // A step is a tool call within a prompt: the agent's conversation goes back to
        // prompts only, so the prompts the rewind crossed are the whole turns among them.
        .filter(|row| !row.turn.is_step())
        .filter(|row| row.rewound_by.is_none() && row.turn >= r.to && row.turn <= r.from)
        .collect();
    taken.sort_by_key(|row| row.turn);
    let mut out: Vec<(String, ConversationBack)> = Vec::new();
    for row in taken {
        let Some(by) = row.by.as_deref() else {
            continue;
        };
        let Some(cli) = AgentCli::of(by) else {
            continue;
        };
        if agents.is_some_and(|a| !a.covers_name(Some(by))) || out.iter().any(|(b, _)| b == by) {
            continue;
        }
        let conv = row.conversation.clone().unwrap_or_default();
        let session = conv
            .session
            .or_else(|| by.split_once(':').map(|(_, s)| s.to_string()));
        let prompt = conv.prompt;
        let how = cli.how(&prompt_words(prompt.as_deref(), row));
        out.push((
            by.to_string(),
            ConversationBack {
                agent: cli.arg().to_string(),
                session,
                transcript: conv.transcript,
                prompt,
                turn: row.turn,
                how,
            },
        ));
    }
    out.into_iter().map(|(_, c)| c).collect()
}

/// The prompt as a line names it: between double quotes, a control character made a space;
/// unknown, the first prompt sent after the turn began, by its local time.
fn prompt_words(prompt: Option<&str>, row: &TurnRow) -> String {
    match prompt {
        Some(p) => {
            let p: String = p
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            format!("\"{p}\"")
        }
        None => {
            let at = crate::units::CivilTime::local(crate::units::unix_seconds(row.time));
            format!(
                "the first prompt sent after turn {} began ({})",
                row.turn,
                at.to_minute()
            )
        }
    }
}

/// Prints one line per conversation to take back: the agent, its session, and what to do.
pub fn print(back: &[ConversationBack]) {
    for c in back {
        let title = AgentCli::of(&c.agent).map_or("the agent", AgentCli::title);
        let session = c.session.as_deref().map_or(String::new(), |s| {
            format!(" session {}", crate::quote::quote_path(s.as_bytes()))
        });
        println!("conversation: in {title}{session}, {}", c.how);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(turn: u64, by: Option<&str>, prompt: Option<&str>, rewound: bool) -> TurnRow {
        serde_json::from_value(serde_json::json!({
            "turn": turn, "label": format!("label {turn}"), "time": 1_700_000_000u64,
            "created": 0, "modified": 0, "deleted": 0, "bytes": 0,
            "programs": [], "skipped": [],
            "by": by, "rewound_by": if rewound { Some(9) } else { None },
            "conversation": prompt.map(|p| serde_json::json!({"prompt": p})),
        }))
        .expect("a log row")
    }

    fn report(to: u64, from: u64) -> ReportJson {
        ReportJson {
            to: crate::ids::Turn::new(to),
            from: crate::ids::Turn::new(from),
            ..ReportJson::default()
        }
    }

    fn back_of(rows: Vec<TurnRow>, agents: Option<Vec<&str>>, r: &ReportJson) -> Vec<String> {
        let before = Before {
            rows,
            agents: agents.map(|a| Agents::from_names(a.into_iter().map(String::from).collect())),
        };
        back(Some(&before), r)
            .into_iter()
            .map(|c| format!("{} {:?} {:?} {}", c.agent, c.session, c.prompt, c.turn))
            .collect()
    }

    #[test]
    fn one_line_per_session_at_its_first_prompt_in_the_turns_taken_back() {
        let rows = vec![
            row(1, Some("claude-code:a"), Some("before"), false),
            row(2, None, None, false),
            row(3, Some("claude-code:a"), Some("first"), false),
            row(4, Some("run-as-me"), None, false),
            row(5, Some("codex:t"), None, false),
            row(6, Some("claude-code:a"), Some("second"), false),
            row(7, Some("gemini:g"), Some("retired"), true),
        ];
        assert_eq!(
            back_of(rows.clone(), None, &report(2, 6)),
            vec![
                "claude-code Some(\"a\") Some(\"first\") 3",
                "codex Some(\"t\") None 5",
            ]
        );
        assert_eq!(
            back_of(rows.clone(), Some(vec!["codex"]), &report(2, 6)),
            vec!["codex Some(\"t\") None 5"]
        );
        let mut dry = report(2, 6);
        dry.dry_run = true;
        assert!(back_of(rows.clone(), None, &dry).is_empty());
        let mut unfinished = report(2, 6);
        unfinished.unfinished = true;
        assert!(back_of(rows, None, &unfinished).is_empty());
    }

    #[test]
    fn an_unknown_prompt_is_named_by_when_its_turn_began() {
        let r = row(5, Some("codex:t"), None, false);
        assert!(prompt_words(None, &r).starts_with("the first prompt sent after turn 5 began ("));
        assert_eq!(prompt_words(Some("a\tb"), &r), "\"a b\"");
    }
}
