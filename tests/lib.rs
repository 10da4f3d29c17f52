//! Tests of mcp-hints that need a package of their own: compile-fail UI
//! tests (`ui.rs`, `ui/`) and a clippy-checked expansion of every macro form
//! (`expansion.rs`). End-to-end tests are under `e2e/`, run as tests of the
//! `mcp-hints-examples` package (they need its server binary).
