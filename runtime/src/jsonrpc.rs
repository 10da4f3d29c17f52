//! JSON-RPC 2.0 responses: which of `result` and `error` one carries,
//! decided one way for every reader (saved `tools/list` pages in
//! [`collect`](crate::collect), a live server's answers in the
//! `mcp-hints` command).

use serde_json::Value;

/// A response's `result` or `error` member, as [`carried`] weighs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    /// Not in the response.
    Absent,
    /// Present, with the value `null`.
    Null,
    /// Present, with any other value (an object or not).
    Given,
}

impl Member {
    /// The member whose value is `value` (`None`: absent).
    pub fn of(value: Option<&Value>) -> Member {
        match value {
            None => Member::Absent,
            Some(Value::Null) => Member::Null,
            Some(_) => Member::Given,
        }
    }
}

/// What a response carries, by [`carried`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried {
    /// A result: its `result` member is the outcome (the caller checks
    /// that it is an object).
    Result,
    /// An error: its `error` member is the outcome (the caller checks that
    /// it is an error object).
    Error,
    /// Both a result and an error: which one holds is unknown; refuse it.
    Both,
    /// Neither: not a response; refuse it.
    Neither,
}

/// Which of `result` and `error` a response carries.
///
/// JSON-RPC 2.0 §5: "Either the result member or error member MUST be
/// included, but both members MUST NOT be included." A member whose value
/// is `null` *beside the other* counts as absent: JSON-RPC 1.0 sent both,
/// the unused one `null`, and servers still write `"error": null` beside a
/// result, which most readers (serde's `Option` among them) take for
/// absent. Alone, a `null` member is what the response carries (a result
/// or an error that is not an object, for the caller to refuse).
///
/// | `result` | `error` | carried |
/// |---|---|---|
/// | given | absent or `null` | [`Carried::Result`] |
/// | `null` | absent | [`Carried::Result`] |
/// | absent or `null` | given | [`Carried::Error`] |
/// | absent | `null` | [`Carried::Error`] |
/// | given | given | [`Carried::Both`] |
/// | absent or `null` | the same | [`Carried::Neither`] |
///
/// ```
/// use mcp_hints::jsonrpc::{Carried, Member, carried};
/// use serde_json::json;
///
/// let response = json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": null});
/// let of = |name| Member::of(response.get(name));
/// assert_eq!(carried(of("result"), of("error")), Carried::Result);
/// ```
pub fn carried(result: Member, error: Member) -> Carried {
    use Member::{Absent, Given, Null};
    match (result, error) {
        (Given, Given) => Carried::Both,
        (Given, Absent | Null) | (Null, Absent) => Carried::Result,
        (Absent | Null, Given) | (Absent, Null) => Carried::Error,
        (Absent, Absent) | (Null, Null) => Carried::Neither,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_null_beside_the_other_member_is_absent() {
        let carries = |response: Value| {
            carried(
                Member::of(response.get("result")),
                Member::of(response.get("error")),
            )
        };
        for (response, expected) in [
            (json!({"result": {}}), Carried::Result),
            (json!({"result": {}, "error": null}), Carried::Result),
            (json!({"result": null}), Carried::Result),
            (json!({"error": {"code": 1}}), Carried::Error),
            (
                json!({"result": null, "error": {"code": 1}}),
                Carried::Error,
            ),
            (json!({"error": null}), Carried::Error),
            (json!({"result": {}, "error": {"code": 1}}), Carried::Both),
            (json!({"result": 1, "error": "x"}), Carried::Both),
            (json!({}), Carried::Neither),
            (json!({"result": null, "error": null}), Carried::Neither),
        ] {
            assert_eq!(carries(response.clone()), expected, "{response}");
        }
    }
}
