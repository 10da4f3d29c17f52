use mcp_hints::idempotency::{Idempotency, IdempotentServer};
use mcp_hints::rmcp::handler::server::wrapper::Parameters;
use mcp_hints::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Default)]
struct Ledger {
    idempotency: Idempotency,
}

impl IdempotentServer for Ledger {
    fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }
}

#[derive(Deserialize, JsonSchema)]
struct Payment {
    request_id: Option<String>,
    cents: u64,
}

#[tool_router(closed_world)]
impl Ledger {
    #[tool(additive, idempotency_key = "key")]
    fn no_such_field(&self, Parameters(Payment { request_id, cents }): Parameters<Payment>) {
        let _ = (request_id, cents);
    }

    #[tool(additive, idempotency_key = "request_id")]
    fn optional_key(&self, Parameters(Payment { request_id, .. }): Parameters<Payment>) {
        let _ = request_id;
    }

    #[tool(additive, idempotency_key = "request_id")]
    fn no_arguments(&self) {}

    #[tool(read_only, idempotency_key = "request_id")]
    fn read(&self, Parameters(_): Parameters<Payment>) {}

    #[tool(additive, non_idempotent, idempotency_key = "request_id")]
    fn both(&self, Parameters(_): Parameters<Payment>) {}

    #[tool(additive, idempotency_key = "")]
    fn empty(&self, Parameters(_): Parameters<Payment>) {}
}

fn main() {}
