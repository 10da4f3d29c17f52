//! The `--log` file: one JSON object per line for every fault fired, so tests
//! can prove a fault really happened rather than infer it from a timeout.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;
use serde_json::Value;

use crate::inject::Fired;

/// Where fired faults are recorded; records nothing when no `--log` is given.
///
/// Each record is one line, `{"fault":"drop-response","tool":"add","id":3,"n":1}`:
/// the action's name (without `=MS`), the call's `params.name`, its JSON-RPC
/// id exactly as the client sent it, and which matching call this was for
/// the spec that fired (from 1).
#[derive(Debug, Default)]
pub struct FaultLog {
    file: Option<Mutex<File>>,
}

#[derive(Serialize)]
struct Entry<'a> {
    fault: &'static str,
    tool: &'a str,
    id: &'a Value,
    n: u64,
}

impl FaultLog {
    /// A log that records nothing.
    pub fn disabled() -> Self {
        FaultLog { file: None }
    }

    /// Appends to `path`, creating it if needed, so several proxies (or
    /// several runs) can share one file.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(FaultLog {
            file: Some(Mutex::new(file)),
        })
    }

    /// Writes one line for `fired`. A write error is reported on stderr and
    /// otherwise ignored: the fault itself still happens.
    pub fn record(&self, fired: &Fired) {
        let Some(file) = &self.file else { return };
        let entry = Entry {
            fault: fired.action.name(),
            tool: &fired.tool,
            id: &fired.id,
            n: fired.n,
        };
        let mut line = match serde_json::to_vec(&entry) {
            Ok(line) => line,
            Err(error) => {
                eprintln!("fault-proxy: cannot encode a fault log line: {error}");
                return;
            }
        };
        line.push(b'\n');
        let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
        // One `write_all` of a whole line on an O_APPEND file: a reader never
        // sees half a line from us. `File` has no buffer, so the line is in the
        // file when this returns.
        if let Err(error) = file.write_all(&line).and_then(|()| file.flush()) {
            eprintln!("fault-proxy: cannot write the fault log: {error}");
        }
    }
}
