//! What a client may do with a `tools/call` whose outcome is unknown: resend
//! it with the same arguments, or read back first whether it took effect.
//!
//! The rule, from the toolkit's design record, after the MCP spec's
//! `ToolAnnotations` (revisions 2025-06-18, 2025-11-25, 2026-07-28) and its
//! requirement that clients treat annotations from untrusted servers as
//! untrusted:
//!
//! | server | effective hints | decision after delivery unknown |
//! |---|---|---|
//! | untrusted | anything | read back first |
//! | trusted | readOnlyHint true | resend, same arguments |
//! | trusted | idempotentHint true | resend, same arguments only |
//! | trusted | keyed (takes an idempotency key, [`decide_keyed`]) | resend, same arguments and key |
//! | trusted | anything else, destructiveHint false included | read back first |
//! | any | tool not in a complete `tools/list` | refuse: unknown tool |
//!
//! destructiveHint false is not replay-safe: it says the write only adds,
//! and an added record is exactly what a resend duplicates.
//!
//! A resend is a new JSON-RPC request with a new id (spec 2026-07-28,
//! `basic/patterns/mrtr`); bound the attempts and count them across the
//! session, not per call.

use std::fmt;

use mcp_hints_core::escape;

use crate::hints::{Hint, HintValue, Provenance, ToolHints};

/// Whether the client's operator vetted the server. Annotations from an
/// untrusted server never decide a resend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trust {
    /// The operator vetted this server: its annotations are believed.
    Trusted,
    /// The default for any server: its annotations are only hints.
    Untrusted,
}

/// What to do after a `tools/call` whose response never came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Resend with the same arguments (no fresh nonce, timestamp or client
    /// id), as a new JSON-RPC request with a new id.
    Resend,
    /// Check whether the first call took effect before deciding to resend.
    ReadBackFirst,
    /// Do not call at all: the tool is not in the server's complete
    /// `tools/list`.
    Refuse,
}

impl Decision {
    /// `"resend"`, `"read_back_first"` or `"refuse"`: the words of the
    /// audit's JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Resend => "resend",
            Decision::ReadBackFirst => "read_back_first",
            Decision::Refuse => "refuse",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A [`Decision`] with its reason in words, naming the hints (and their
/// provenance) it rests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// What to do.
    pub decision: Decision,
    /// Why, in one sentence for a person.
    pub reason: String,
}

/// Decides what a client may do with a call of a tool with `hints` whose
/// outcome is unknown, on a server of the given `trust`.
///
/// Only the effective values count: when readOnlyHint is true,
/// destructiveHint and idempotentHint mean nothing (spec) and are not
/// consulted.
pub fn decide(trust: Trust, hints: &ToolHints) -> Verdict {
    let read_only = hints.get(Hint::ReadOnly);
    let idempotent = hints.get(Hint::Idempotent);
    let destructive = hints.get(Hint::Destructive);
    let (decision, reason) = match trust {
        Trust::Untrusted => (
            Decision::ReadBackFirst,
            "the server is not trusted, and annotations from an untrusted server never \
             decide a resend"
                .to_owned(),
        ),
        Trust::Trusted if read_only.value => (
            Decision::Resend,
            format!(
                "readOnlyHint is true ({}): a read has no effect to repeat",
                read_only.provenance
            ),
        ),
        Trust::Trusted if idempotent.value => (
            Decision::Resend,
            format!(
                "idempotentHint is true ({}): repeating the same arguments has no further \
                 effect; resend them unchanged",
                idempotent.provenance
            ),
        ),
        Trust::Trusted if !destructive.value => (
            Decision::ReadBackFirst,
            format!(
                "destructiveHint is false ({}) but idempotentHint is false ({}): the write \
                 only adds, so a resend duplicates it",
                destructive.provenance, idempotent.provenance
            ),
        ),
        Trust::Trusted => {
            let what = if both_defaulted(read_only, idempotent) {
                "nothing is declared, so the spec's defaults hold"
            } else {
                "the tool writes and is not idempotent"
            };
            (
                Decision::ReadBackFirst,
                format!(
                    "readOnlyHint is false ({}) and idempotentHint is false ({}): {what}, and a \
                     resend may apply the write twice",
                    read_only.provenance, idempotent.provenance
                ),
            )
        }
    };
    Verdict { decision, reason }
}

/// As [`decide`], for a tool that takes an idempotency key in its argument
/// `key_field` (named in its `_meta` under
/// [`KEY_META_KEY`](crate::idempotency::KEY_META_KEY)): on a trusted
/// server a keyed call is replay-safe whatever its other hints, since a
/// resend with the same key is recognised by the server and not run again.
/// A read-only tool keeps [`decide`]'s reason; an untrusted server still
/// means read back first.
pub fn decide_keyed(trust: Trust, hints: &ToolHints, key_field: &str) -> Verdict {
    if trust == Trust::Untrusted || hints.get(Hint::ReadOnly).value {
        return decide(trust, hints);
    }
    Verdict {
        decision: Decision::Resend,
        // The name comes from the server: escaped, it cannot forge a line.
        reason: format!(
            "the tool is keyed by its argument `{}`: a resend with the same key is recognised by \
             the server and not run again; resend the same arguments, key included",
            escape::shown(key_field)
        ),
    }
}

fn both_defaulted(a: HintValue, b: HintValue) -> bool {
    a.provenance == Provenance::Defaulted && b.provenance == Provenance::Defaulted
}

/// The verdict for a tool that is not in the server's complete `tools/list`.
pub fn unknown_tool(name: &str) -> Verdict {
    Verdict {
        decision: Decision::Refuse,
        // The name may come from a peer: escaped, it cannot forge a line.
        reason: format!(
            "`{}` is not in the server's tools/list: unknown tool",
            escape::shown(name)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn hints(annotations: Value) -> ToolHints {
        ToolHints::from_json(Some(&annotations), None).unwrap()
    }

    #[test]
    fn bare_tool_is_read_back_with_all_hints_defaulted() {
        let bare = ToolHints::from_json(None, None).unwrap();
        assert_eq!(bare.defaulted(), Hint::ALL.to_vec());
        let verdict = decide(Trust::Trusted, &bare);
        assert_eq!(verdict.decision, Decision::ReadBackFirst);
        assert_eq!(
            verdict.reason,
            "readOnlyHint is false (defaulted) and idempotentHint is false (defaulted): nothing \
             is declared, so the spec's defaults hold, and a resend may apply the write twice"
        );
    }

    #[test]
    fn read_only_is_resent_even_when_idempotent_is_false() {
        for annotations in [
            json!({ "readOnlyHint": true }),
            json!({ "readOnlyHint": true, "idempotentHint": false }),
        ] {
            let verdict = decide(Trust::Trusted, &hints(annotations));
            assert_eq!(verdict.decision, Decision::Resend);
            assert_eq!(
                verdict.reason,
                "readOnlyHint is true (declared): a read has no effect to repeat"
            );
        }
    }

    #[test]
    fn idempotent_is_resent_only_when_trusted() {
        let idempotent = hints(json!({ "readOnlyHint": false, "idempotentHint": true }));
        let trusted = decide(Trust::Trusted, &idempotent);
        assert_eq!(trusted.decision, Decision::Resend);
        assert!(trusted.reason.contains("resend them unchanged"));
        let untrusted = decide(Trust::Untrusted, &idempotent);
        assert_eq!(untrusted.decision, Decision::ReadBackFirst);
        assert!(untrusted.reason.contains("not trusted"));
    }

    #[test]
    fn additive_write_is_read_back_because_a_resend_duplicates_it() {
        let verdict = decide(Trust::Trusted, &hints(json!({ "destructiveHint": false })));
        assert_eq!(verdict.decision, Decision::ReadBackFirst);
        assert_eq!(
            verdict.reason,
            "destructiveHint is false (declared) but idempotentHint is false (defaulted): the \
             write only adds, so a resend duplicates it"
        );
    }

    #[test]
    fn untrusted_reads_back_whatever_is_declared() {
        for annotations in [
            json!({ "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false }),
            json!({ "idempotentHint": true }),
            json!({}),
        ] {
            assert_eq!(
                decide(Trust::Untrusted, &hints(annotations)).decision,
                Decision::ReadBackFirst
            );
        }
    }

    #[test]
    fn declared_non_idempotent_write_says_so() {
        let verdict = decide(
            Trust::Trusted,
            &hints(
                json!({ "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false }),
            ),
        );
        assert_eq!(verdict.decision, Decision::ReadBackFirst);
        assert!(
            verdict
                .reason
                .contains("the tool writes and is not idempotent"),
            "{}",
            verdict.reason
        );
    }

    #[test]
    fn keyed_writes_are_resent_only_on_trusted_servers() {
        let append = hints(
            json!({ "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false }),
        );
        let trusted = decide_keyed(Trust::Trusted, &append, "request_id");
        assert_eq!(trusted.decision, Decision::Resend);
        assert_eq!(
            trusted.reason,
            "the tool is keyed by its argument `request_id`: a resend with the same key is \
             recognised by the server and not run again; resend the same arguments, key included"
        );
        let forged = decide_keyed(Trust::Trusted, &append, "id\n\u{1b}[2Jerror: x");
        assert!(
            forged.reason.contains(r"`id\n\u{1b}[2Jerror: x`"),
            "{}",
            forged.reason
        );
        let untrusted = decide_keyed(Trust::Untrusted, &append, "request_id");
        assert_eq!(untrusted, decide(Trust::Untrusted, &append));
        assert_eq!(untrusted.decision, Decision::ReadBackFirst);
    }

    #[test]
    fn unknown_tools_are_refused() {
        assert_eq!(unknown_tool("nope").decision, Decision::Refuse);
    }
}
