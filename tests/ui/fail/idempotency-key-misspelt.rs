// A key misspelt where the pattern hides the fields: rustc itself refuses
// it at the key, listing the fields, before the server is ever run.
use mcp_hints::idempotency::{Idempotency, IdempotentServer};
use mcp_hints::rmcp::handler::server::wrapper::Parameters;
use mcp_hints::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Default)]
struct Notes {
    idempotency: Idempotency,
}

impl IdempotentServer for Notes {
    fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }
}

#[derive(Deserialize, JsonSchema)]
struct KeyedNote {
    request_id: String,
    text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct CamelNote {
    request_id: String,
}

#[tool_router(closed_world)]
impl Notes {
    #[tool(additive, idempotency_key = "request_idd")]
    fn add(&self, Parameters(p): Parameters<KeyedNote>) -> String {
        p.text
    }

    #[tool(additive, idempotency_key = "request_idd")]
    fn add_shown(&self, Parameters(KeyedNote { text, .. }): Parameters<KeyedNote>) -> String {
        text
    }

    // serde's camelCase name of the field: found.
    #[tool(additive, idempotency_key = "requestId")]
    fn add_camel(&self, Parameters(p): Parameters<CamelNote>) -> String {
        p.request_id
    }

    // serde's camelCase, misspelt.
    #[tool(additive, idempotency_key = "requestIdd")]
    fn add_camel_misspelt(&self, Parameters(p): Parameters<CamelNote>) -> String {
        p.request_id
    }
}

fn main() {}
