//! Compile-fail and compile-pass tests pinning every diagnostic of
//! `#[tool]`, `#[tool_router]` and `#[tool_handler]`.
//!
//! The `.stderr` files are rustc output for the toolchain pinned in
//! `rust-toolchain.toml`. After a deliberate change of a message, refresh
//! them with `TRYBUILD=overwrite cargo test -p mcp-hints-tests --test ui`
//! and review the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
