// Beside rmcp's `#[prompt_handler]`, the generated `get_info` announces
// prompts as well as tools, whichever handler attribute comes first.
#![deny(warnings)]

use mcp_hints::rmcp::ServerHandler;
use mcp_hints::{tool, tool_handler, tool_router};
use rmcp::model::{PromptMessage, Role};
use rmcp::{prompt, prompt_handler, prompt_router};

pub struct S;

#[tool_router(closed_world)]
impl S {
    #[tool(read_only)]
    fn a(&self) {}
}

#[prompt_router]
impl S {
    #[prompt]
    async fn greet(&self) -> Vec<PromptMessage> {
        vec![PromptMessage::new_text(Role::User, "hello")]
    }
}

#[tool_handler]
#[prompt_handler]
impl ServerHandler for S {}

pub struct T;

#[tool_router(closed_world)]
impl T {
    #[tool(read_only)]
    fn a(&self) {}
}

#[prompt_router]
impl T {
    #[prompt]
    async fn greet(&self) -> Vec<PromptMessage> {
        vec![PromptMessage::new_text(Role::User, "hello")]
    }
}

#[prompt_handler]
#[tool_handler]
impl ServerHandler for T {}

fn main() {
    for capabilities in [S.get_info().capabilities, T.get_info().capabilities] {
        assert!(capabilities.tools.is_some());
        assert!(capabilities.prompts.is_some());
    }
}
