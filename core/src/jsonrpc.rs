//! Our own JSON-RPC error codes: the refusals of a keyed call, in the
//! range JSON-RPC 2.0 §5.1 leaves to implementations ("-32000 to -32099:
//! Server error, reserved for implementation-defined server-errors").
//!
//! The spec's codes (-32700 Parse error, -32600 Invalid Request, -32601
//! Method not found, -32602 Invalid params, -32603 Internal error, and
//! MCP's own -32020 to -32022) are rmcp's `ErrorCode` constants; they are
//! not declared again here. Each code is an `i32`, the type rmcp's
//! `ErrorCode` wraps.
//!
//! A call refused with any of these did not run. Each error's `data`
//! carries `"tool"`, `"idempotencyKey"` and `"reason"` (`"conflict"`,
//! `"in_progress"` or `"store"`).

use std::ops::RangeInclusive;

/// The range of implementation-defined server errors (JSON-RPC 2.0 §5.1),
/// which every code of this module is in.
pub const SERVER_ERRORS: RangeInclusive<i32> = -32099..=-32000;

/// The idempotency key was first used with other arguments: a key names
/// one operation. Resending will not help; use a new key.
pub const KEY_CONFLICT: i32 = -32070;

/// A call with this idempotency key is still running. Retry later with the
/// same key and arguments; `data.retryAfterMs` suggests when.
pub const KEY_IN_PROGRESS: i32 = -32071;

/// The idempotency store could not say whether the key was used (it
/// failed, or is full of calls in progress), so the call was not run.
/// Retry later.
pub const STORE_FAILED: i32 = -32072;

/// Every code of this module, in order.
pub const ALL: [i32; 3] = [KEY_CONFLICT, KEY_IN_PROGRESS, STORE_FAILED];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_codes_are_server_errors_and_distinct() {
        for (index, code) in ALL.into_iter().enumerate() {
            assert!(SERVER_ERRORS.contains(&code), "{code}");
            assert!(!ALL[index + 1..].contains(&code), "{code}");
        }
    }
}
