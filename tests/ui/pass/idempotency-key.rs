// A keyed tool declares idempotentHint true (the lint counts it), names its
// key argument in `_meta`, and runs once per key behind the server's store.
#![deny(warnings)]

use mcp_hints::idempotency::{Idempotency, IdempotentServer, KEY_META_KEY};
use mcp_hints::rmcp::handler::server::wrapper::Parameters;
use mcp_hints::{tool, tool_router, Hint, Provenance, ToolHints};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Default)]
pub struct Ledger {
    idempotency: Idempotency,
}

impl IdempotentServer for Ledger {
    fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct Payment {
    /// Names this payment; the same on a resend.
    pub request_id: String,
    pub cents: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Refund {
    /// Names this refund; the same on a resend.
    pub refund_key: std::sync::Arc<str>,
}

#[tool_router(closed_world)]
impl Ledger {
    /// Pay once per key.
    #[tool(additive, idempotency_key = "request_id")]
    async fn pay(&self, Parameters(Payment { request_id, cents }): Parameters<Payment>) -> String {
        format!("{request_id}: {cents}")
    }

    /// The field is found under serde's camelCase name too.
    #[tool(destructive, idempotent, idempotency_key = "refundKey")]
    async fn refund(&self, Parameters(Refund { refund_key }): Parameters<Refund>) -> String {
        refund_key.to_string()
    }

    /// A pattern that does not show the field is checked against the schema.
    #[tool(additive, idempotency_key = "request_id")]
    fn tip(&self, Parameters(payment): Parameters<Payment>) -> String {
        payment.cents.to_string()
    }
}

fn main() {
    let router = Ledger::tool_router();
    for (name, field) in [("pay", "request_id"), ("refund", "refundKey"), ("tip", "request_id")] {
        let tool = router.get(name).unwrap();
        let hints = ToolHints::of(tool);
        assert!(hints.get(Hint::Idempotent).value, "{name}");
        assert_eq!(hints.get(Hint::Idempotent).provenance, Provenance::Declared);
        assert!(!hints.get(Hint::ReadOnly).value);
        assert_eq!(tool.meta.as_ref().unwrap().0[KEY_META_KEY], field);
    }
    check_broken_router();
}

#[derive(Deserialize, JsonSchema)]
pub struct Unkeyed {
    pub cents: u64,
}

#[derive(Default)]
pub struct Broken {
    idempotency: Idempotency,
}

impl IdempotentServer for Broken {
    fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }
}

#[tool_router(closed_world, router = broken_router)]
impl Broken {
    // A key that is no Rust identifier: the schema is checked when the
    // server starts (`initialize`), not when the router is built.
    #[tool(additive, idempotency_key = "request-id")]
    fn pay(&self, Parameters(payment): Parameters<Unkeyed>) -> String {
        payment.cents.to_string()
    }
}

pub fn check_broken_router() {
    // Built without a panic; `initialize` refuses, naming what to add
    // (tested in runtime/tests/client.rs).
    let router = Broken::broken_router();
    assert!(router.get("pay").is_some());
}
