//! Helpers shared by the integration tests: `mod support;` in a test file
//! brings them in.

pub mod redis;
