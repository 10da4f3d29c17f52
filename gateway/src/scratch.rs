//! The unit tests' scratch directories: one fresh directory each, under
//! the system's temporary directory, removed when dropped.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh directory `mcp-hints-gateway-NAME-PID-NANOS`, removed (with what
/// it holds) when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!(
            "mcp-hints-gateway-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
