//! `mcp-hints audit`: the policy's verdict for every tool, with each hint's
//! value and provenance, and with `--pinned`, what changed since the lock.

use anstyle::{AnsiColor, Style};
use mcp_hints::collect::{ListedTool, ToolList};
use mcp_hints::fingerprint::{Drift, Lock};
use mcp_hints::policy::{Decision, Trust, Verdict};
use mcp_hints::{Hint, Provenance, ToolHints};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Value, json};

use crate::source::Origin;
use crate::table::{Cell, render};
use crate::text::{count, one_line, shown};

/// The audit of one list.
pub struct Audit<'a> {
    list: &'a ToolList,
    trust: Trust,
    verdicts: Vec<Verdict>,
    drift: Option<(String, Drift)>,
}

impl<'a> Audit<'a> {
    /// Decides every tool of `list`. With a lock, tools added or changed
    /// since it are refused.
    pub fn new(list: &'a ToolList, trust: Trust, pinned: Option<(String, Drift)>) -> Audit<'a> {
        let verdicts = list
            .tools
            .iter()
            .map(|tool| {
                let refused = pinned
                    .as_ref()
                    .and_then(|(lock, drift)| refusal(tool, lock, drift));
                refused.unwrap_or_else(|| tool.verdict(trust))
            })
            .collect();
        Audit {
            list,
            trust,
            verdicts,
            drift: pinned,
        }
    }

    /// 0 when every tool may be resent; 1 when one needs a read-back; 3 when
    /// the list differs from the lock.
    pub fn exit_code(&self) -> u8 {
        if self
            .drift
            .as_ref()
            .is_some_and(|(_, drift)| !drift.is_empty())
        {
            3
        } else if self
            .verdicts
            .iter()
            .any(|verdict| verdict.decision != Decision::Resend)
        {
            1
        } else {
            0
        }
    }

    fn count(&self, decision: Decision) -> usize {
        self.verdicts
            .iter()
            .filter(|verdict| verdict.decision == decision)
            .count()
    }

    /// Writes the report as JSON on one line to `out`: target, server, declared
    /// capabilities, trust, pages, a record per tool in list order, a
    /// summary, and with a lock the drift. The records are serialised as
    /// they are written, so a list of any size costs no second copy.
    ///
    /// # Errors
    ///
    /// The writer's error.
    pub fn write_json(&self, origin: &Origin, out: impl std::io::Write) -> serde_json::Result<()> {
        let tools: Vec<ToolRecord<'_>> = self
            .list
            .tools
            .iter()
            .zip(&self.verdicts)
            .map(|(tool, verdict)| ToolRecord {
                name: &tool.name,
                page: tool.page,
                decision: verdict.decision.as_str(),
                reason: &verdict.reason,
                hints: HintsRecord(tool.hints),
            })
            .collect();
        let report = Report {
            origin: origin.to_json(),
            trusted: self.trust == Trust::Trusted,
            pages: self.list.pages,
            tools,
            summary: Summary {
                tools: self.list.tools.len(),
                resend: self.count(Decision::Resend),
                read_back_first: self.count(Decision::ReadBackFirst),
                refuse: self.count(Decision::Refuse),
            },
            pinned: self
                .drift
                .as_ref()
                .map(|(lock, drift)| drift_json(lock, drift)),
        };
        serde_json::to_writer(out, &report)
    }

    /// The report for people: header, table, drift, summary.
    pub fn to_text(&self, origin: &Origin) -> String {
        let mut out = String::new();
        // The header quotes the server's `initialize` result: each line is
        // escaped once more as a whole, so that no part of it, escaped or
        // not where it was put together, can end the line.
        for line in origin.header() {
            out.push_str(&one_line(&line));
            out.push('\n');
        }
        out.push_str(match self.trust {
            Trust::Trusted => "trust: trusted (--trusted): annotations decide resends\n",
            Trust::Untrusted => {
                "trust: untrusted: annotations never decide a resend (pass --trusted only for a \
                 server you vetted)\n"
            }
        });
        out.push_str(&format!(
            "{} in {}\n\n",
            count(self.list.tools.len(), "tool", "tools"),
            count(self.list.pages, "page", "pages")
        ));
        let rows: Vec<Vec<Cell>> = self
            .list
            .tools
            .iter()
            .zip(&self.verdicts)
            .map(|(tool, verdict)| {
                let mut row = vec![
                    Cell::plain(&tool.name),
                    Cell::styled(verdict.decision.as_str(), decision_style(verdict.decision)),
                ];
                for hint in Hint::ALL {
                    let value = tool.hints.get(hint);
                    let (text, style) = match value.provenance {
                        Provenance::Declared => (format!("{}", value.value), Style::new()),
                        Provenance::Defaulted => (
                            format!("{} (default)", value.value),
                            Style::new().fg_color(Some(AnsiColor::Red.into())),
                        ),
                        // A server's list is read as served: nothing here
                        // asserts a hint, but a source is never hidden.
                        other => (format!("{} ({other})", value.value), Style::new()),
                    };
                    row.push(Cell::styled(&text, style));
                }
                row.push(Cell::plain(&verdict.reason));
                row
            })
            .collect();
        out.push_str(&render(
            &[
                "TOOL",
                "DECISION",
                "readOnlyHint",
                "destructiveHint",
                "idempotentHint",
                "openWorldHint",
                "REASON",
            ],
            &rows,
        ));
        if let Some((lock, drift)) = &self.drift {
            out.push('\n');
            out.push_str(&drift_text(lock, drift));
        }
        out.push_str(&format!(
            "\n{}: {} resend, {} read back first{}\n",
            count(self.list.tools.len(), "tool", "tools"),
            self.count(Decision::Resend),
            self.count(Decision::ReadBackFirst),
            match self.count(Decision::Refuse) {
                0 => String::new(),
                refused => format!(", {refused} refused"),
            }
        ));
        out
    }
}

#[derive(Serialize)]
struct Report<'a> {
    #[serde(flatten)]
    origin: Value,
    trusted: bool,
    pages: usize,
    tools: Vec<ToolRecord<'a>>,
    summary: Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pinned: Option<Value>,
}

#[derive(Serialize)]
struct ToolRecord<'a> {
    name: &'a str,
    page: usize,
    decision: &'static str,
    reason: &'a str,
    hints: HintsRecord,
}

/// The four hints as `{"readOnlyHint": {"value": true, "provenance":
/// "declared"}, ...}`.
struct HintsRecord(ToolHints);

impl Serialize for HintsRecord {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Hint::ALL.len()))?;
        for hint in Hint::ALL {
            let value = self.0.get(hint);
            map.serialize_entry(
                hint.wire_name(),
                &HintRecord {
                    value: value.value,
                    provenance: value.provenance.as_str(),
                },
            )?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct HintRecord {
    value: bool,
    provenance: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    tools: usize,
    resend: usize,
    read_back_first: usize,
    refuse: usize,
}

fn decision_style(decision: Decision) -> Style {
    let color = match decision {
        Decision::Resend => AnsiColor::Green,
        Decision::ReadBackFirst => AnsiColor::Yellow,
        Decision::Refuse => AnsiColor::Red,
    };
    Style::new().fg_color(Some(color.into())).bold()
}

fn refusal(tool: &ListedTool, lock: &str, drift: &Drift) -> Option<Verdict> {
    if drift.added.contains(&tool.name) {
        return Some(Verdict {
            decision: Decision::Refuse,
            reason: format!("not in {lock}: approve it, then pin again"),
        });
    }
    let changed = drift
        .changed
        .iter()
        .find(|changed| changed.name == tool.name)?;
    Some(Verdict {
        decision: Decision::Refuse,
        reason: format!(
            "changed since {lock} ({}): approve it again, then pin again",
            what_changed(changed)
        ),
    })
}

fn what_changed(changed: &mcp_hints::fingerprint::ChangedTool) -> String {
    let mut parts: Vec<String> = changed.parts.iter().map(ToString::to_string).collect();
    if parts.is_empty() {
        parts.push("definition".to_owned());
    }
    let mut text = parts.join(", ");
    if !changed.hints.is_empty() {
        let hints: Vec<String> = changed
            .hints
            .iter()
            .map(|(hint, then, now)| format!("{hint} {then} -> {now}"))
            .collect();
        text.push_str(&format!("; {}", hints.join(", ")));
    }
    text
}

fn drift_json(lock: &str, drift: &Drift) -> Value {
    json!({
        "lock": lock,
        "added": drift.added,
        "removed": drift.removed,
        "changed": drift.changed.iter().map(|changed| json!({
            "name": changed.name,
            "parts": changed.parts.iter().map(|part| part.wire_name()).collect::<Vec<_>>(),
            "hints": changed.hints.iter().map(|(hint, then, now)| json!({
                "hint": hint.wire_name(), "pinned": then, "now": now,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn drift_text(lock: &str, drift: &Drift) -> String {
    if drift.is_empty() {
        return format!("every tool matches {lock}\n");
    }
    let mut out = format!("changes since {lock}:\n");
    for name in &drift.added {
        out.push_str(&format!("  + {} (added)\n", shown(name)));
    }
    for name in &drift.removed {
        out.push_str(&format!("  - {} (removed)\n", shown(name)));
    }
    for changed in &drift.changed {
        out.push_str(&format!(
            "  ~ {} (changed: {})\n",
            shown(&changed.name),
            what_changed(changed)
        ));
    }
    out
}

/// Reads the lock at `path`.
///
/// # Errors
///
/// A message naming the file: unreadable, not a lock, or another version.
pub fn read_lock(path: &std::path::Path) -> Result<Lock, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    Lock::from_json(&text).map_err(|error| format!("{}: {error}", path.display()))
}
