use mcp_hints::rmcp::handler::server::wrapper::Parameters;
use mcp_hints::tool;
use schemars::JsonSchema;
use serde::Deserialize;

struct Ledger;

#[derive(Deserialize, JsonSchema)]
struct Payment {
    request_id: String,
}

impl Ledger {
    #[tool(additive, closed_world, idempotency_key = "request_id")]
    fn pay(&self, Parameters(_): Parameters<Payment>) {}
}

fn main() {}
