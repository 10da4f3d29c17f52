use mcp_hints::rmcp::handler::server::wrapper::Parameters;
use mcp_hints::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

struct Ledger;

#[derive(Deserialize, JsonSchema)]
struct Payment {
    request_id: String,
}

#[tool_router(closed_world)]
impl Ledger {
    #[tool(additive, idempotency_key = "request_id")]
    fn pay(&self, Parameters(_): Parameters<Payment>) {}
}

fn main() {}
