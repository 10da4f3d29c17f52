//! Which fault, if any, a `tools/call` gets: one counter per spec, and the
//! first spec listed wins when several fire on the same call.

use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::jsonrpc::Call;
use crate::log::FaultLog;
use crate::spec::{Action, FaultSpec};

/// A fault that fired on one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Fired {
    /// What to do to the exchange.
    pub action: Action,
    /// The call's `params.name`.
    pub tool: String,
    /// The call's JSON-RPC id, as the client sent it.
    pub id: Value,
    /// Which matching call this was for the spec that fired, from 1.
    pub n: u64,
}

/// The specs given on the command line, their counters and the fault log,
/// shared by every connection of one proxy process.
#[derive(Debug)]
pub struct Injector {
    specs: Vec<FaultSpec>,
    counts: Mutex<Vec<u64>>,
    log: FaultLog,
}

impl Injector {
    /// An injector for `specs`, in command-line order, recording into `log`.
    pub fn new(specs: Vec<FaultSpec>, log: FaultLog) -> Self {
        let counts = Mutex::new(vec![0; specs.len()]);
        Injector { specs, counts, log }
    }

    /// The specs, in command-line order.
    pub fn specs(&self) -> &[FaultSpec] {
        &self.specs
    }

    /// Counts `call` against every spec whose tool it matches, then returns
    /// the fault of the first of those specs that selects this count.
    ///
    /// Every matching spec counts the call, including specs listed after the
    /// one that fires, so `@N` always means "the Nth call to this tool" no
    /// matter what other specs did to earlier calls.
    pub fn on_call(&self, call: &Call) -> Option<Fired> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut fired = None;
        for (spec, count) in self.specs.iter().zip(counts.iter_mut()) {
            if !spec.tool.matches(&call.tool) {
                continue;
            }
            *count += 1;
            if fired.is_none() && spec.nth.selects(*count) {
                fired = Some(Fired {
                    action: spec.action,
                    tool: call.tool.clone(),
                    id: call.id.clone(),
                    n: *count,
                });
            }
        }
        fired
    }

    /// Counts every call of one message (a batch may hold several) and
    /// returns the fault of the first call that got one: one message gets at
    /// most one fault.
    pub fn on_message(&self, calls: &[Call]) -> Option<Fired> {
        let mut first = None;
        for call in calls {
            let fired = self.on_call(call);
            if first.is_none() {
                first = fired;
            }
        }
        first
    }

    /// Writes `fired` to the fault log; called when the fault takes effect,
    /// before the client can observe it.
    pub fn record(&self, fired: &Fired) {
        self.log.record(fired);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn injector(specs: &[&str]) -> Injector {
        let specs = specs.iter().map(|s| s.parse().unwrap()).collect();
        Injector::new(specs, FaultLog::disabled())
    }

    fn call(tool: &str, id: u64) -> Call {
        Call {
            tool: tool.into(),
            id: id.into(),
        }
    }

    fn fired(injector: &Injector, tool: &str, id: u64) -> Option<(&'static str, u64)> {
        injector
            .on_call(&call(tool, id))
            .map(|fired| (fired.action.name(), fired.n))
    }

    #[test]
    fn nth_selects_that_call_only() {
        let injector = injector(&["drop-response:add@2"]);
        assert_eq!(fired(&injector, "add", 1), None);
        assert_eq!(fired(&injector, "sub", 2), None);
        assert_eq!(fired(&injector, "add", 3), Some(("drop-response", 2)));
        assert_eq!(fired(&injector, "add", 4), None);
    }

    #[test]
    fn first_spec_listed_wins_and_every_spec_counts() {
        let injector = injector(&["drop-request:add", "drop-response:*@*"]);
        assert_eq!(fired(&injector, "add", 1), Some(("drop-request", 1)));
        assert_eq!(fired(&injector, "sub", 2), Some(("drop-response", 2)));
        assert_eq!(fired(&injector, "add", 3), Some(("drop-response", 3)));
    }

    #[test]
    fn a_batch_gets_the_first_fault_and_counts_every_call() {
        let injector = injector(&["drop-response:add@*"]);
        let fired = injector.on_message(&[call("sub", 1), call("add", 2), call("add", 3)]);
        assert_eq!(fired.map(|f| (f.id, f.n)), Some((2.into(), 1)));
        assert_eq!(injector.on_call(&call("add", 4)).map(|f| f.n), Some(3));
    }
}
