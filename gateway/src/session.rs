//! A session's history, for the rules that look back (`after`, `count`):
//! which session a call belongs to, what the shared state keeps of each
//! call the gateway forwarded in it, and the look-back conditions read
//! over it.
//!
//! Risk belongs to a session, not to one tool: private data, untrusted
//! content and a way to send data out are assembled across calls, so only
//! a layer that remembers earlier calls can see them together. A session
//! is, in this order:
//!
//! - the transport's: an `initialize`-era streamable-HTTP session
//!   (`Mcp-Session-Id`), or the one client of a stdio front;
//! - else the one the client names in `_meta["mcp-hints/session"]`
//!   ([`SESSION_META_KEY`]) of a `tools/call` (2026-07-28 keeps no session
//!   of its own), a string of 1 to [`MAX_SESSION_NAME`] visible ASCII
//!   characters;
//! - else the principal's calls, until it has made none for
//!   `[session] idle_secs`.
//!
//! A client that opens, or names, a new session for each call starts each
//! with no history: sessions trust the client application (not the model)
//! to keep them as they are. `[session] per = "principal"` makes every call
//! of a principal one history instead, which no client can step out of.
//!
//! Every session belongs to its principal: two principals naming the same
//! session share nothing. A history lasts `[session] idle_secs` after its
//! last call and keeps the last `[session] max_calls` calls; the gateway
//! keeps one only when some rule looks back.

use std::fmt;
use std::time::Duration;

use mcp_hints::Hint;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::Predicate;
use crate::log::Outcome;
use crate::policy::{EffectiveHints, tool_matches};

/// The `_meta` key of a `tools/call` under which a client names its own
/// session: `{"_meta": {"mcp-hints/session": "chat-42"}}`. Read only where
/// the transport has no session of its own.
pub const SESSION_META_KEY: &str = "mcp-hints/session";

/// The longest session name a client may give, in characters.
pub const MAX_SESSION_NAME: usize = 128;

/// Which session a call belongs to, as the shared state keys it: a digest
/// of the principal, the kind of session and its id, so that no client
/// text reaches a key and two principals' sessions never meet.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    key: String,
    kind: SessionKind,
}

/// Where a call's session came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionKind {
    /// The transport's: `Mcp-Session-Id`, or a stdio front's one client.
    Transport,
    /// Named by the client in [`SESSION_META_KEY`].
    Named,
    /// None given: the principal's calls within `[session] idle_secs`.
    Principal,
}

impl SessionKey {
    /// The session `id` of `kind` of `principal` (for
    /// [`SessionKind::Principal`], `id` is ignored).
    pub fn new(kind: SessionKind, principal: &str, id: &str) -> SessionKey {
        let tag = match kind {
            SessionKind::Transport => "transport",
            SessionKind::Named => "named",
            SessionKind::Principal => "principal",
        };
        let id = if kind == SessionKind::Principal {
            ""
        } else {
            id
        };
        let mut digest = Sha256::new();
        // Lengths first: no two (principal, id) pairs hash the same text.
        for part in [tag, principal, id] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part.as_bytes());
        }
        SessionKey {
            key: crate::chain::hex(&digest.finalize()),
            kind,
        }
    }

    /// The key, 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// Where the session came from.
    pub fn kind(&self) -> SessionKind {
        self.kind
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionKey({:?}, {}…)", self.kind, &self.key[..12])
    }
}

/// Why a client's session name is refused: `None` when `name` is one.
pub fn session_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".to_owned());
    }
    if name.chars().count() > MAX_SESSION_NAME {
        return Some(format!(
            "is longer than {MAX_SESSION_NAME} characters ({})",
            name.chars().count()
        ));
    }
    if let Some(bad) = name.chars().find(|c| !c.is_ascii_graphic()) {
        return Some(format!(
            "holds {}, which is not a visible ASCII character",
            bad.escape_unicode()
        ));
    }
    None
}

/// What the four hints said of a forwarded call, as the rules read them
/// ([`EffectiveHints::holds`]), in [`Hint::ALL`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldHints(pub [bool; 4]);

impl HeldHints {
    /// What `hints` hold.
    pub fn of(hints: &EffectiveHints) -> HeldHints {
        HeldHints(Hint::ALL.map(|hint| hints.holds(hint)))
    }

    /// Whether `hint` held.
    pub fn holds(self, hint: Hint) -> bool {
        self.0[hint as usize]
    }
}

/// Why a result taints its session: what an `after = ["tainted"]` looks
/// for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Taint {
    /// A `[[redact]]` rule matched the result.
    Redacted,
    /// The tool is open-world (effectively) and its upstream is not
    /// `trusted`: its result may carry anyone's words.
    UntrustedOpenWorld,
}

/// One thing the history keeps, in the order it happened: a call sent on,
/// then how it finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryEvent {
    /// The gateway forwarded a call (written before it is sent, so that a
    /// call made while it runs already sees it).
    Called {
        /// Its call id (the audit log's `id`).
        id: String,
        /// Its upstream.
        upstream: String,
        /// The upstream's own tool name.
        tool: String,
        /// Its effective hints.
        hints: HeldHints,
    },
    /// The call finished.
    Finished {
        /// Its call id.
        id: String,
        /// Its outcome, as its `finished` audit entry says it.
        outcome: Outcome,
        /// Why its result taints the session, if it does.
        taint: Option<Taint>,
    },
}

impl HistoryEvent {
    /// The event as one line of words, for a backend that stores text:
    /// `c ID UPSTREAM TOOL BITS` (BITS the four held hints as `0`/`1` in
    /// [`Hint::ALL`] order) or `f ID OUTCOME TAINT` (TAINT `-` for none).
    /// Every word is one the gateway made (a v4 UUID, an upstream name,
    /// a served tool name, a word of the log), so none holds a space; and
    /// a line reads back faster than JSON, which matters when a history of
    /// hundreds of calls is read for every call.
    pub fn to_line(&self) -> String {
        match self {
            HistoryEvent::Called {
                id,
                upstream,
                tool,
                hints,
            } => {
                let bits: String = hints
                    .0
                    .iter()
                    .map(|held| if *held { '1' } else { '0' })
                    .collect();
                format!("c {id} {upstream} {tool} {bits}")
            }
            HistoryEvent::Finished { id, outcome, taint } => {
                let taint = match taint {
                    None => "-",
                    Some(Taint::Redacted) => "redacted",
                    Some(Taint::UntrustedOpenWorld) => "untrusted_open_world",
                };
                format!("f {id} {outcome} {taint}")
            }
        }
    }

    /// The event of a [`to_line`](HistoryEvent::to_line) line; `None` for
    /// any other text.
    pub fn from_line(line: &str) -> Option<HistoryEvent> {
        let mut words = line.split(' ');
        let event = match words.next()? {
            "c" => {
                let (id, upstream, tool, bits) =
                    (words.next()?, words.next()?, words.next()?, words.next()?);
                let bits = bits.as_bytes();
                if bits.len() != 4 || bits.iter().any(|bit| !matches!(bit, b'0' | b'1')) {
                    return None;
                }
                HistoryEvent::Called {
                    id: id.to_owned(),
                    upstream: upstream.to_owned(),
                    tool: tool.to_owned(),
                    hints: HeldHints([0, 1, 2, 3].map(|index| bits[index] == b'1')),
                }
            }
            "f" => {
                let (id, outcome, taint) = (words.next()?, words.next()?, words.next()?);
                let taint = match taint {
                    "-" => None,
                    "redacted" => Some(Taint::Redacted),
                    "untrusted_open_world" => Some(Taint::UntrustedOpenWorld),
                    _ => return None,
                };
                HistoryEvent::Finished {
                    id: id.to_owned(),
                    outcome: outcome.parse().ok()?,
                    taint,
                }
            }
            _ => return None,
        };
        words.next().is_none().then_some(event)
    }
}

/// One forwarded call of a session, its events folded together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionCall {
    /// Its call id (the audit log's `id`).
    pub id: String,
    /// Its upstream.
    pub upstream: String,
    /// The upstream's own tool name.
    pub tool: String,
    /// Its effective hints.
    pub hints: HeldHints,
    /// When it was forwarded, in milliseconds since the Unix epoch by the
    /// backend's clock.
    pub at_ms: u64,
    /// How it finished; `None` while it runs (or when its end was not
    /// recorded).
    pub outcome: Option<Outcome>,
    /// Why its result taints the session, if it does.
    pub taint: Option<Taint>,
}

/// A session's history as one read of the shared state found it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The backend's clock at the read, in milliseconds since the Unix
    /// epoch: what `count`'s window is measured back from.
    pub now_ms: u64,
    /// The forwarded calls, oldest first.
    pub calls: Vec<SessionCall>,
}

impl History {
    /// The history of `events` (each with the backend's time of it, in
    /// milliseconds since the Unix epoch, oldest first) read at `now_ms`:
    /// each `Finished` folded into its `Called`; one whose `Called` was
    /// trimmed away is dropped.
    pub fn fold(now_ms: u64, events: impl IntoIterator<Item = (u64, HistoryEvent)>) -> History {
        let mut calls: Vec<SessionCall> = Vec::new();
        for (at_ms, event) in events {
            match event {
                HistoryEvent::Called {
                    id,
                    upstream,
                    tool,
                    hints,
                } => calls.push(SessionCall {
                    id,
                    upstream,
                    tool,
                    hints,
                    at_ms,
                    outcome: None,
                    taint: None,
                }),
                HistoryEvent::Finished { id, outcome, taint } => {
                    // The call it ends is almost always among the last few.
                    if let Some(call) = calls.iter_mut().rev().find(|call| call.id == id) {
                        call.outcome = Some(outcome);
                        call.taint = taint;
                    }
                }
            }
        }
        History { now_ms, calls }
    }
}

/// How much history a backend keeps of one session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLimits {
    /// The most calls kept (their events: twice as many); the oldest go
    /// first.
    pub max_calls: u32,
    /// How long a session's history lasts after its last event.
    pub idle: Duration,
}

impl HistoryLimits {
    /// The most events kept: a `Called` and a `Finished` per call.
    pub fn max_events(self) -> usize {
        (self.max_calls as usize).saturating_mul(2)
    }
}

/// One term of a look-back condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// `*`: any call.
    Any,
    /// A hint predicate (`open_world`, `not read_only`) over the earlier
    /// call's effective hints.
    Hint(Predicate),
    /// `tool:GLOB`: the earlier call's tool, matched as a rule's `tool`
    /// is ([`tool_matches`]).
    Tool(glob::Pattern),
    /// `upstream:GLOB`: the earlier call's upstream.
    Upstream(glob::Pattern),
    /// `tainted`: the earlier call's result tainted the session
    /// ([`Taint`]).
    Tainted,
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Any => f.write_str("*"),
            Term::Hint(predicate) => write!(f, "{predicate}"),
            Term::Tool(glob) => write!(f, "tool:{}", glob.as_str()),
            Term::Upstream(glob) => write!(f, "upstream:{}", glob.as_str()),
            Term::Tainted => f.write_str("tainted"),
        }
    }
}

/// What one earlier call must be for a look-back to hold: its terms, all
/// of which must hold of that call (`"upstream:web and open_world"`).
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// The terms, as written.
    pub terms: Vec<Term>,
}

impl Condition {
    /// Whether `call` meets every term.
    pub fn holds(&self, call: &SessionCall) -> bool {
        self.terms.iter().all(|term| match term {
            Term::Any => true,
            Term::Hint(predicate) => call.hints.holds(predicate.hint) == predicate.holds,
            Term::Tool(glob) => tool_matches(glob, &call.upstream, &call.tool),
            Term::Upstream(glob) => glob.matches(&call.upstream),
            Term::Tainted => call.taint.is_some(),
        })
    }

    /// The tool globs among its terms, for the warning at start about
    /// globs that match no tool.
    pub fn tool_globs(&self) -> impl Iterator<Item = &glob::Pattern> {
        self.terms.iter().filter_map(|term| match term {
            Term::Tool(glob) => Some(glob),
            _ => None,
        })
    }
}

/// `upstream:web and open_world`: as written in the config.
impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, term) in self.terms.iter().enumerate() {
            if index > 0 {
                f.write_str(" and ")?;
            }
            write!(f, "{term}")?;
        }
        Ok(())
    }
}

/// A rule's `count`: it holds when the session's calls meeting `of` in the
/// last `within` number at least `more_than`, so that this call would be
/// one more than `more_than`.
#[derive(Clone, Debug, PartialEq)]
pub struct CountCondition {
    /// `of` (default `*`): which earlier calls count.
    pub of: Condition,
    /// `more_than`: the rule fires on the call past this many.
    pub more_than: u32,
    /// `within_secs`: how far back calls count.
    pub within: Duration,
}

impl CountCondition {
    /// Whether it counts `call`, read at `now_ms`: a call meeting `of` no
    /// longer than `within` before.
    pub fn counts(&self, now_ms: u64, call: &SessionCall) -> bool {
        let within = u64::try_from(self.within.as_millis()).unwrap_or(u64::MAX);
        call.at_ms >= now_ms.saturating_sub(within) && self.of.holds(call)
    }

    /// Whether it holds over `history`.
    pub fn holds(&self, history: &History) -> bool {
        history
            .calls
            .iter()
            .filter(|call| self.counts(history.now_ms, call))
            .count()
            >= self.more_than as usize
    }
}

/// `3 destructive calls within 60 s` (what the session must already have
/// made for the rule to match), as
/// [`Policy::describe`](crate::policy::Policy::describe) says it.
impl fmt::Display for CountCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let of = match self.of.terms.as_slice() {
            [Term::Any] | [] => String::new(),
            _ => format!("{} ", self.of),
        };
        let calls = if self.more_than == 1 { "call" } else { "calls" };
        write!(
            f,
            "{} {of}{calls} within {} s",
            self.more_than,
            self.within.as_secs()
        )
    }
}

/// The most earlier calls a `decided` entry names: past it, the most
/// recent ones.
pub const MAX_EARLIER: usize = 16;

/// One earlier call that made a rule fire, as the audit log names it
/// (`earlier` on a `decided` entry): `{"id": "...", "upstream": "web",
/// "tool": "fetch"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierCall {
    /// Its call id: its own entries in the log carry it.
    pub id: String,
    /// Its upstream.
    pub upstream: String,
    /// The upstream's own tool name.
    pub tool: String,
}

impl From<&SessionCall> for EarlierCall {
    fn from(call: &SessionCall) -> EarlierCall {
        EarlierCall {
            id: call.id.clone(),
            upstream: call.upstream.clone(),
            tool: call.tool.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn called(id: &str, upstream: &str, tool: &str, hints: [bool; 4]) -> HistoryEvent {
        HistoryEvent::Called {
            id: id.to_owned(),
            upstream: upstream.to_owned(),
            tool: tool.to_owned(),
            hints: HeldHints(hints),
        }
    }

    const READ: [bool; 4] = [true, false, true, true];
    const WRITE: [bool; 4] = [false, true, false, false];

    #[test]
    fn sessions_of_two_principals_or_kinds_never_share_a_key() {
        let a = SessionKey::new(SessionKind::Named, "alice", "s1");
        assert_eq!(a, SessionKey::new(SessionKind::Named, "alice", "s1"));
        assert_ne!(a, SessionKey::new(SessionKind::Named, "bob", "s1"));
        assert_ne!(a, SessionKey::new(SessionKind::Transport, "alice", "s1"));
        // Lengths are hashed: moving a character across the boundary is
        // another key.
        assert_ne!(
            SessionKey::new(SessionKind::Named, "ab", "c"),
            SessionKey::new(SessionKind::Named, "a", "bc")
        );
        assert_eq!(
            SessionKey::new(SessionKind::Principal, "alice", "x"),
            SessionKey::new(SessionKind::Principal, "alice", "y")
        );
        assert_eq!(a.as_str().len(), 64);
    }

    #[test]
    fn a_session_name_is_visible_ascii_of_bounded_length() {
        assert_eq!(session_name_problem("chat-42"), None);
        assert!(session_name_problem("").unwrap().contains("empty"));
        assert!(session_name_problem("a b").unwrap().contains("\\u{20}"));
        assert!(session_name_problem("é").is_some());
        assert!(
            session_name_problem(&"x".repeat(MAX_SESSION_NAME + 1))
                .unwrap()
                .contains("longer than 128")
        );
        assert_eq!(session_name_problem(&"x".repeat(MAX_SESSION_NAME)), None);
    }

    #[test]
    fn finished_events_fold_into_their_calls_and_orphans_are_dropped() {
        let history = History::fold(
            10_000,
            [
                (1_000, called("a", "web", "fetch", READ)),
                (2_000, called("b", "notes", "append", WRITE)),
                (
                    2_500,
                    HistoryEvent::Finished {
                        id: "a".to_owned(),
                        outcome: Outcome::Completed,
                        taint: Some(Taint::UntrustedOpenWorld),
                    },
                ),
                (
                    2_600,
                    HistoryEvent::Finished {
                        id: "trimmed".to_owned(),
                        outcome: Outcome::Completed,
                        taint: Some(Taint::Redacted),
                    },
                ),
            ],
        );
        assert_eq!(history.calls.len(), 2);
        assert_eq!(history.calls[0].outcome, Some(Outcome::Completed));
        assert_eq!(history.calls[0].taint, Some(Taint::UntrustedOpenWorld));
        assert_eq!(history.calls[0].at_ms, 1_000);
        assert_eq!(history.calls[1].outcome, None);
    }

    #[test]
    fn events_read_back_from_their_lines_and_nothing_else_does() {
        let event = called("a", "web", "fetch", READ);
        assert_eq!(event.to_line(), "c a web fetch 1011");
        assert_eq!(HistoryEvent::from_line(&event.to_line()), Some(event));
        for taint in [None, Some(Taint::Redacted), Some(Taint::UntrustedOpenWorld)] {
            let finished = HistoryEvent::Finished {
                id: "a".to_owned(),
                outcome: Outcome::ToolError,
                taint,
            };
            assert_eq!(HistoryEvent::from_line(&finished.to_line()), Some(finished));
        }
        assert_eq!(
            HistoryEvent::Finished {
                id: "a".to_owned(),
                outcome: Outcome::ToolError,
                taint: None,
            }
            .to_line(),
            "f a tool_error -"
        );
        for bad in [
            "",
            "c a web fetch",
            "c a web fetch 10112",
            "c a web fetch 10x1",
            "c a web fetch 1011 extra",
            "f a done -",
            "f a completed tainted",
            "x a",
            "{\"event\":\"called\"}",
        ] {
            assert_eq!(HistoryEvent::from_line(bad), None, "{bad}");
        }
    }

    fn glob(text: &str) -> glob::Pattern {
        glob::Pattern::new(text).unwrap()
    }

    #[test]
    fn a_condition_holds_of_a_call_meeting_every_term() {
        let history = History::fold(
            0,
            [
                (0, called("a", "web", "fetch", READ)),
                (0, called("b", "notes", "append", WRITE)),
            ],
        );
        let (read, write) = (&history.calls[0], &history.calls[1]);
        let open_world = Predicate {
            hint: Hint::OpenWorld,
            holds: true,
        };
        let web_open = Condition {
            terms: vec![Term::Upstream(glob("web")), Term::Hint(open_world)],
        };
        assert!(web_open.holds(read));
        assert!(!web_open.holds(write));
        assert_eq!(web_open.to_string(), "upstream:web and open_world");
        let namespaced = Condition {
            terms: vec![Term::Tool(glob("notes__app*"))],
        };
        assert!(namespaced.holds(write) && !namespaced.holds(read));
        let tainted = Condition {
            terms: vec![Term::Tainted],
        };
        assert!(!tainted.holds(read));
        assert!(
            Condition {
                terms: vec![Term::Any]
            }
            .holds(write)
        );
    }

    #[test]
    fn a_count_holds_once_its_window_has_more_than_calls_of_its_kind() {
        let destructive = Condition {
            terms: vec![Term::Hint(Predicate {
                hint: Hint::Destructive,
                holds: true,
            })],
        };
        let count = CountCondition {
            of: destructive,
            more_than: 2,
            within: Duration::from_secs(60),
        };
        let events = |times: &[u64]| {
            times
                .iter()
                .enumerate()
                .map(|(index, at)| (*at, called(&index.to_string(), "notes", "delete", WRITE)))
                .collect::<Vec<_>>()
        };
        // Two destructive calls in the window: a third is past two.
        assert!(count.holds(&History::fold(100_000, events(&[50_000, 90_000]))));
        // One has aged out of the window.
        assert!(!count.holds(&History::fold(100_000, events(&[39_999, 90_000]))));
        // Reads do not count.
        let mut mixed = events(&[90_000]);
        mixed.push((95_000, called("r", "web", "fetch", READ)));
        assert!(!count.holds(&History::fold(100_000, mixed)));
        assert_eq!(count.to_string(), "2 destructive calls within 60 s");
    }
}
