//! Hints checked against behaviour: sequences of calls on a fresh server,
//! each declared hint tested as an invariant over a read-back of the
//! server's state, the way property-based testing checks a stateful system.
//!
//! A **snapshot** is the JSON a read-back returns (a read-only tool the
//! user names, or a closure over a server's state in `mcp_hints::testing` (feature `testing`)).
//! After each call of a tool T:
//!
//! | T declares | checked |
//! |---|---|
//! | `readOnlyHint: true` | the snapshot after equals the snapshot before |
//! | `idempotentHint: true` (not read-only) | T called again at once with the same arguments leaves the snapshot unchanged |
//! | `destructiveHint: false` (not read-only) | nothing present before is removed or changed: objects keep every member, arrays every element (as a multiset), scalars stay equal |
//! | `openWorldHint: false` | not observable from here: reported unchecked |
//!
//! The other values (readOnlyHint false, destructiveHint true,
//! idempotentHint false, openWorldHint true) promise nothing, and the spec's
//! defaults are exactly those, so a tool that declares nothing has nothing
//! to check. Equality is of JSON values: numbers by value, members in any
//! order.
//!
//! [`verify`] starts a fresh [`System`] for every run (so runs never see
//! each other's state), draws a sequence of [`Options::steps`] calls from a
//! seeded generator (writing tools three times as often as reading ones, so
//! state is not empty when a hint is checked; arguments from each tool's
//! `inputSchema` and from [`Options::examples`]), and checks each call. A
//! hint that does not hold is a [`Finding`], shrunk to the shortest
//! sequence that still shows it (each replay on a fresh system). The same
//! seed draws the same calls; the findings are as deterministic as the
//! server.
//!
//! Each run reads the system's tool list again ([`System::tools`]): a tool
//! added, removed or declaring other hint values than in the list given is
//! a [`ListChange`], which fails the report as a finding does. Generated
//! arguments are bounded (65,536 characters per string, 1,000 items per
//! array, 1 MiB per argument set): a schema no bounded value meets leaves
//! its tool unchecked, as one no value meets. The destructiveHint check
//! matches array elements by hash, and gives up past 20,000,000 steps
//! (the hint is then unchecked, saying so).
//!
//! Behind cargo feature `verify`. The `mcp-hints verify` command runs it
//! against any server; `mcp_hints::testing` (feature `testing`) (feature `testing`) against a
//! `#[tool_router]` server in process.

mod generate;
mod snapshot;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use mcp_hints_core::escape;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::hints::{Hint, ToolHints};

/// A tool to verify: its name, its hints (as [`ToolHints`] read them) and
/// the JSON Schema of its arguments.
#[derive(Clone, Debug)]
pub struct ToolUnderTest {
    /// The tool's name, as served.
    pub name: String,
    /// Its four hints, declared or defaulted.
    pub hints: ToolHints,
    /// Its `inputSchema` (`{"type": "object"}` when it has none).
    pub input_schema: Value,
}

impl ToolUnderTest {
    /// From one tool definition of a `tools/list` result (`name` and
    /// `inputSchema`; the hints read elsewhere, for example by
    /// [`crate::collect`]). A missing name is the empty string; a missing
    /// schema is `{"type": "object"}`.
    pub fn from_definition(definition: &Map<String, Value>, hints: ToolHints) -> ToolUnderTest {
        ToolUnderTest {
            name: definition
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            hints,
            input_schema: definition
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        }
    }

    /// From an rmcp [`Tool`](rmcp::model::Tool), hints read by
    /// [`ToolHints::of`].
    pub fn from_tool(tool: &rmcp::model::Tool) -> ToolUnderTest {
        ToolUnderTest {
            name: tool.name.to_string(),
            hints: ToolHints::of(tool),
            input_schema: Value::Object((*tool.input_schema).clone()),
        }
    }

    /// The hints this tool makes a promise with, in schema order.
    fn claims(&self) -> Vec<Hint> {
        let value = |hint| self.hints.get(hint).value;
        if value(Hint::ReadOnly) {
            return vec![Hint::ReadOnly];
        }
        let mut claims = Vec::new();
        if !value(Hint::Destructive) {
            claims.push(Hint::Destructive);
        }
        if value(Hint::Idempotent) {
            claims.push(Hint::Idempotent);
        }
        claims
    }
}

/// One `tools/call`: the tool and its arguments.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Call {
    /// The tool's name.
    pub tool: String,
    /// The `arguments` object.
    pub arguments: Map<String, Value>,
}

/// What a call got back.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Answer {
    /// A `CallToolResult`; `is_error` is its `isError`.
    Result {
        /// The tool reported an error (`isError: true`).
        is_error: bool,
    },
    /// A JSON-RPC error response.
    Error {
        /// The error's `code`.
        code: i64,
        /// The error's `message`.
        message: String,
    },
}

impl Answer {
    /// Whether the tool did its work: a result without `isError`.
    pub fn succeeded(&self) -> bool {
        matches!(self, Answer::Result { is_error: false })
    }
}

/// One fresh server under test: it takes calls and reads its state back.
///
/// An `Err` from either method ends the run: a server that died, a
/// transport that failed, a snapshot that is not JSON. A tool's own error
/// is an [`Answer`], not an `Err`.
pub trait System: Send {
    /// Sends one `tools/call`.
    fn call(&mut self, call: &Call) -> impl Future<Output = Result<Answer, SystemError>> + Send;
    /// Reads the server's state back.
    fn snapshot(&mut self) -> impl Future<Output = Result<Value, SystemError>> + Send;
    /// The tools this system lists now (its `tools/list`), read once at the
    /// start of each run and compared with the list [`verify`] was given:
    /// each difference is a [`ListChange`]. `Ok(None)`, the default, for a
    /// system whose list cannot change.
    fn tools(
        &mut self,
    ) -> impl Future<Output = Result<Option<Vec<ToolUnderTest>>, SystemError>> + Send {
        async { Ok(None) }
    }
    /// Stops the server (for a process: ends it).
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// Starts a fresh [`System`] for every run, and for every replay while a
/// finding is shrunk.
pub trait Start: Send {
    /// The system it starts.
    type System: System;
    /// Starts one, with state of its own.
    fn start(&mut self) -> impl Future<Output = Result<Self::System, SystemError>> + Send;
}

/// Why a [`System`] could not start, answer or read back: a sentence for
/// people (peer text in it already escaped by whoever wrote it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SystemError(pub String);

impl SystemError {
    /// A system error saying `message`.
    pub fn new(message: impl Into<String>) -> SystemError {
        SystemError(message.into())
    }
}

/// How [`verify`] runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The seed of the generator: the same seed draws the same calls.
    /// Default 0.
    pub seed: u64,
    /// How many sequences, each on a fresh system. Default 10.
    pub runs: u32,
    /// Calls per sequence. Default 20.
    pub steps: u32,
    /// Argument objects per tool, drawn three times in four for a tool that
    /// has some (always, when its schema yields none).
    pub examples: HashMap<String, Vec<Map<String, Value>>>,
    /// The most replays (fresh systems) spent shrinking one finding.
    /// Default 32.
    pub max_replays: u32,
    skip: Vec<(String, glob::Pattern)>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            seed: 0,
            runs: 10,
            steps: 20,
            examples: HashMap::new(),
            max_replays: 32,
            skip: Vec::new(),
        }
    }
}

impl Options {
    /// Never calls a tool whose name matches `glob` (`*` any run of
    /// characters, `?` one, `[a-z]` a class): its hints are reported
    /// unchecked.
    ///
    /// # Errors
    ///
    /// [`VerifyError::BadGlob`] when `glob` is not a pattern.
    pub fn skip(&mut self, glob: &str) -> Result<&mut Options, VerifyError> {
        let pattern = glob::Pattern::new(glob).map_err(|error| VerifyError::BadGlob {
            glob: glob.to_owned(),
            reason: error.msg.to_owned(),
        })?;
        self.skip.push((glob.to_owned(), pattern));
        Ok(self)
    }

    /// The first [`skip`](Self::skip) pattern `name` matches, as given;
    /// `None` when the tool is called.
    pub fn skipped(&self, name: &str) -> Option<&str> {
        self.skip
            .iter()
            .find(|(_, pattern)| pattern.matches(name))
            .map(|(glob, _)| glob.as_str())
    }
}

/// What [`verify`] found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Hints that did not hold, one per tool and hint, in the order found.
    pub findings: Vec<Finding>,
    /// Tools whose listing in a run differed from the list verified, each
    /// change once, in the order found.
    pub list_changes: Vec<ListChange>,
    /// Hints checked on at least one call that succeeded (or found not to
    /// hold), by tool then hint.
    pub checked: Vec<Checked>,
    /// Hints promised but not checked, and why, by tool then hint.
    pub unchecked: Vec<Unchecked>,
    /// Sequences run.
    pub runs: u32,
    /// `tools/call` requests sent, replays included.
    pub calls: u64,
}

impl Report {
    /// Whether every checked hint held and the tool list never changed.
    pub fn holds(&self) -> bool {
        self.findings.is_empty() && self.list_changes.is_empty()
    }
}

/// A tool whose listing changed between the list [`verify`] was given and
/// the one a run's system gave ([`System::tools`]). In that run the tool is
/// not called: the hints it was verified by were not the ones it then
/// declared.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListChange {
    /// The run whose list showed it first, from 1.
    pub run: u32,
    /// The tool.
    pub tool: String,
    /// What changed.
    #[serde(flatten)]
    pub change: ListChangeKind,
}

/// What changed in a tool's listing, as `{"change": "added" | "removed" |
/// "hints", "hints": [...]}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "change", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ListChangeKind {
    /// Listed in the run, not in the list verified.
    Added,
    /// In the list verified, not listed in the run.
    Removed,
    /// Listed with other hint values (provenance aside: a hint declared
    /// `false` and one defaulted to `false` promise the same).
    Hints {
        /// Each hint whose value changed.
        hints: Vec<HintChange>,
    },
}

/// One hint's value in the list verified (`was`) and in a run's (`now`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HintChange {
    /// The hint.
    pub hint: Hint,
    /// Its value in the list verified.
    pub was: bool,
    /// Its value in the run's list.
    pub now: bool,
}

/// What [`verify_with`] is doing, for a progress display. Tool names are
/// the server's, unescaped.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// A run starts on a fresh system: `run` of `runs`, from 1.
    Run {
        /// The run, from 1.
        run: u32,
        /// Runs in all ([`Options::runs`]).
        runs: u32,
    },
    /// A `tools/call` of `tool` is about to be sent; `calls` were sent
    /// before it (replays included).
    Call {
        /// The tool called.
        tool: &'a str,
        /// Calls sent before this one.
        calls: u64,
    },
    /// A finding of `hint` on `tool` is being shrunk, with replays on
    /// fresh systems.
    Shrink {
        /// The tool.
        tool: &'a str,
        /// The hint it broke.
        hint: Hint,
    },
}

/// A hint that did not hold.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// The tool.
    pub tool: String,
    /// The hint it declares and breaks.
    pub hint: Hint,
    /// The calls that show it, on a fresh system, shrunk: the hint fails at
    /// the last one (for `idempotentHint`, the last two are the same call).
    pub sequence: Vec<Call>,
    /// The snapshot before the last call.
    pub before: Value,
    /// The snapshot after it.
    pub after: Value,
    /// What differs from `before` to `after` (at most 50 changes).
    pub difference: Vec<Change>,
}

/// One difference between two snapshots.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// Where, as a JSON pointer (RFC 6901); `""` is the whole snapshot.
    pub path: String,
    /// The value before; absent when it was added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The value after; absent when it was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// A hint that was checked.
#[derive(Clone, Debug, Serialize)]
pub struct Checked {
    /// The tool.
    pub tool: String,
    /// The hint.
    pub hint: Hint,
    /// On how many calls that succeeded.
    pub times: u64,
}

/// A promised hint that was not checked.
#[derive(Clone, Debug, Serialize)]
pub struct Unchecked {
    /// The tool.
    pub tool: String,
    /// The hint.
    pub hint: Hint,
    /// Why, as a phrase (`"not observable from here"`).
    pub reason: String,
}

/// Why [`verify`] could not finish.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A skip pattern that is not a glob.
    #[error("`{glob}` is not a glob pattern: {reason}")]
    BadGlob {
        /// The pattern as given.
        glob: String,
        /// What is wrong with it.
        reason: String,
    },
    /// [`Options::examples`] names a tool the server does not list.
    #[error("the examples name tool `{tool}`, which the server does not list")]
    UnknownExampleTool {
        /// The tool named.
        tool: String,
    },
    /// A system did not start.
    #[error("run {run}: the server did not start: {error}")]
    Start {
        /// The run, from 1.
        run: u32,
        /// Why.
        error: SystemError,
    },
    /// The snapshot changed with no call between two reads (a clock, a
    /// counter of reads in it): no hint can be checked against it.
    #[error(
        "run {run}: the snapshot changed between two reads with no call between them ({}), so \
         no hint can be checked against it: name a snapshot of the state alone",
        paths(difference)
    )]
    UnstableSnapshot {
        /// The run, from 1.
        run: u32,
        /// What changed between the two reads.
        difference: Vec<Change>,
    },
    /// A system failed in the middle of a run (it died, or its snapshot
    /// failed): the calls made so far, the failing one last.
    #[error("run {run}: the server failed after {} call(s): {error}", sequence.len())]
    Died {
        /// The run, from 1.
        run: u32,
        /// The calls sent in that run, the one that failed last (empty when
        /// the first snapshot failed).
        sequence: Vec<Call>,
        /// Why.
        error: SystemError,
    },
}

/// The paths of `changes`, `/` for the whole snapshot, comma-separated.
fn paths(changes: &[Change]) -> String {
    let paths: Vec<&str> = changes
        .iter()
        .map(|change| {
            if change.path.is_empty() {
                "/"
            } else {
                change.path.as_str()
            }
        })
        .collect();
    paths.join(", ")
}

/// Checks every promised hint of `tools` against the behaviour of systems
/// `start` makes, as the [module](self) says.
///
/// Tools matching an [`Options::skip`] pattern are never called. A tool
/// whose schema no value meets (and that has no examples) is not called
/// either, its hints [`Unchecked`] with the reason.
///
/// # Errors
///
/// [`VerifyError::UnknownExampleTool`] before anything starts;
/// [`VerifyError::Start`] when a run's system does not start;
/// [`VerifyError::UnstableSnapshot`] when two reads with no call between
/// them differ;
/// [`VerifyError::Died`] when one fails mid-run. A system that fails while
/// a finding is shrunk only ends that replay.
pub async fn verify<S: Start>(
    tools: &[ToolUnderTest],
    start: &mut S,
    options: &Options,
) -> Result<Report, VerifyError> {
    verify_with(tools, start, options, &mut |_| {}).await
}

/// [`verify`], telling `observe` what it is doing ([`Progress`]) as it
/// goes: before each run, each call, each shrink.
///
/// # Errors
///
/// As [`verify`].
pub async fn verify_with<S: Start>(
    tools: &[ToolUnderTest],
    start: &mut S,
    options: &Options,
    observe: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<Report, VerifyError> {
    if let Some(tool) = options
        .examples
        .keys()
        .find(|name| !tools.iter().any(|tool| &tool.name == *name))
    {
        return Err(VerifyError::UnknownExampleTool { tool: tool.clone() });
    }
    let mut state = Verification::new(tools, options, observe);
    for run in 1..=options.runs {
        state.run(run, start).await?;
    }
    Ok(state.report())
}

/// Where each promised hint stands.
#[derive(Default)]
struct Standing {
    times: u64,
    found: bool,
    tried: u64,
    /// Calls that succeeded whose check gave up (its step budget spent).
    undecided: u64,
    last_failure: Option<String>,
}

/// What one check of a hint over one call found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Yes,
    No,
    /// Past the check's step budget ([`snapshot::MAX_STEPS`]).
    Undecided,
}

/// One tool as the generator sees it.
struct Playable<'a> {
    tool: &'a ToolUnderTest,
    claims: Vec<Hint>,
    examples: &'a [Map<String, Value>],
    /// Whether the schema yields arguments (checked once, up front).
    generated: bool,
    weight: usize,
}

struct Verification<'a, 'o> {
    options: &'a Options,
    tools: &'a [ToolUnderTest],
    observe: &'o mut (dyn FnMut(Progress<'_>) + Send),
    playable: Vec<Playable<'a>>,
    /// Tools not called in this run: their listing changed.
    excluded: Vec<bool>,
    list_changes: Vec<ListChange>,
    standing: BTreeMap<(String, Hint), Standing>,
    unchecked: Vec<Unchecked>,
    findings: Vec<Finding>,
    calls: u64,
    /// A snapshot was a scalar: destructiveHint cannot be checked on it.
    scalar_snapshot: bool,
}

impl<'a, 'o> Verification<'a, 'o> {
    fn new(
        tools: &'a [ToolUnderTest],
        options: &'a Options,
        observe: &'o mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Verification<'a, 'o> {
        let mut playable = Vec::new();
        let mut standing = BTreeMap::new();
        let mut unchecked = Vec::new();
        let mut not_checked = |tool: &ToolUnderTest, hint, reason: String| {
            unchecked.push(Unchecked {
                tool: tool.name.clone(),
                hint,
                reason,
            });
        };
        for tool in tools {
            let claims = tool.claims();
            if !tool.hints.get(Hint::OpenWorld).value {
                not_checked(tool, Hint::OpenWorld, "not observable from here".to_owned());
            }
            if let Some(glob) = options.skipped(&tool.name) {
                for hint in &claims {
                    not_checked(
                        tool,
                        *hint,
                        format!("never called: it matches skip `{glob}`"),
                    );
                }
                continue;
            }
            let examples = options
                .examples
                .get(&tool.name)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let probe = generate::Pool::default();
            let generated = generate::Generator::new(
                &tool.input_schema,
                &mut fastrand::Rng::with_seed(options.seed),
                &probe,
            )
            .arguments();
            if let Err(error) = &generated
                && examples.is_empty()
            {
                for hint in &claims {
                    not_checked(
                        tool,
                        *hint,
                        format!("never called: no arguments meet its inputSchema ({error})"),
                    );
                }
                continue;
            }
            for hint in &claims {
                standing.insert((tool.name.clone(), *hint), Standing::default());
            }
            let writes = !tool.hints.get(Hint::ReadOnly).value;
            playable.push(Playable {
                tool,
                claims,
                examples,
                generated: generated.is_ok(),
                weight: if writes { 3 } else { 1 },
            });
        }
        Verification {
            options,
            tools,
            observe,
            excluded: vec![false; playable.len()],
            list_changes: Vec::new(),
            playable,
            standing,
            unchecked,
            findings: Vec::new(),
            calls: 0,
            scalar_snapshot: false,
        }
    }

    /// One sequence on a fresh system.
    async fn run<S: Start>(&mut self, run: u32, start: &mut S) -> Result<(), VerifyError> {
        if self.playable.is_empty() {
            return Ok(());
        }
        let seed = self
            .options
            .seed
            .wrapping_add(u64::from(run).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut rng = fastrand::Rng::with_seed(seed);
        (self.observe)(Progress::Run {
            run,
            runs: self.options.runs,
        });
        let mut system = start
            .start()
            .await
            .map_err(|error| VerifyError::Start { run, error })?;
        let mut executed: Vec<Call> = Vec::new();
        let result = match system.tools().await {
            Ok(listed) => {
                self.relisted(run, listed.as_deref());
                self.steps(run, &mut rng, &mut system, &mut executed, start)
                    .await
            }
            Err(error) => Err(VerifyError::Died {
                run,
                sequence: Vec::new(),
                error,
            }),
        };
        system.close().await;
        result
    }

    /// Compares a run's list with the one verified: each change not seen
    /// before becomes a [`ListChange`], and the tools that changed are not
    /// called in this run.
    fn relisted(&mut self, run: u32, listed: Option<&[ToolUnderTest]>) {
        self.excluded.fill(false);
        let Some(listed) = listed else {
            return;
        };
        let mut changes = Vec::new();
        for tool in self.tools {
            let change = match listed.iter().find(|now| now.name == tool.name) {
                None => ListChangeKind::Removed,
                Some(now) => {
                    let hints: Vec<HintChange> = Hint::ALL
                        .into_iter()
                        .filter_map(|hint| {
                            let (was, now) =
                                (tool.hints.get(hint).value, now.hints.get(hint).value);
                            (was != now).then_some(HintChange { hint, was, now })
                        })
                        .collect();
                    if hints.is_empty() {
                        continue;
                    }
                    ListChangeKind::Hints { hints }
                }
            };
            if let Some(at) = self
                .playable
                .iter()
                .position(|playable| playable.tool.name == tool.name)
            {
                self.excluded[at] = true;
            }
            changes.push((tool.name.clone(), change));
        }
        for now in listed {
            if !self.tools.iter().any(|tool| tool.name == now.name) {
                changes.push((now.name.clone(), ListChangeKind::Added));
            }
        }
        for (tool, change) in changes {
            if !self
                .list_changes
                .iter()
                .any(|known| known.tool == tool && known.change == change)
            {
                self.list_changes.push(ListChange { run, tool, change });
            }
        }
    }

    async fn steps<S: Start>(
        &mut self,
        run: u32,
        rng: &mut fastrand::Rng,
        system: &mut S::System,
        executed: &mut Vec<Call>,
        start: &mut S,
    ) -> Result<(), VerifyError> {
        let died = |executed: &[Call], error| VerifyError::Died {
            run,
            sequence: executed.to_vec(),
            error,
        };
        let mut pool = generate::Pool::default();
        let mut snapshot = system
            .snapshot()
            .await
            .map_err(|error| died(executed, error))?;
        // Read twice before any call: a snapshot that changes by itself (a
        // clock, a counter of reads) would make every tool look like it
        // lied.
        let again = system
            .snapshot()
            .await
            .map_err(|error| died(executed, error))?;
        if !snapshot::same(&snapshot, &again) {
            return Err(VerifyError::UnstableSnapshot {
                run,
                difference: snapshot::difference(&snapshot, &again),
            });
        }
        if !(snapshot.is_object() || snapshot.is_array()) {
            self.scalar_snapshot = true;
        }
        pool.absorb(&snapshot);
        let weights: Vec<usize> = self
            .playable
            .iter()
            .zip(&self.excluded)
            .map(|(tool, excluded)| if *excluded { 0 } else { tool.weight })
            .collect();
        let total: usize = weights.iter().sum();
        if total == 0 {
            return Ok(());
        }
        for _ in 0..self.options.steps {
            let mut pick = rng.usize(..total);
            let index = weights
                .iter()
                .position(|weight| {
                    if pick < *weight {
                        return true;
                    }
                    pick -= *weight;
                    false
                })
                .unwrap_or(0);
            let call = self.draw(index, rng, &pool);
            pool.absorb(&Value::Object(call.arguments.clone()));
            let playable = &self.playable[index];
            let claims = playable.claims.clone();
            let name = playable.tool.name.clone();

            let before = snapshot;
            let (answer, after) = self
                .send(system, &call, executed)
                .await
                .map_err(|error| died(executed, error))?;
            let mut broken = Vec::new();
            let mut undecided = Vec::new();
            // idempotentHint is checked on the repeat below.
            for hint in claims.iter().filter(|hint| **hint != Hint::Idempotent) {
                match self.holds(*hint, &before, &after) {
                    Held::Yes => {}
                    Held::No => {
                        broken.push((*hint, executed.clone(), before.clone(), after.clone()));
                    }
                    Held::Undecided => undecided.push(*hint),
                }
            }
            snapshot = after;
            if claims.contains(&Hint::Idempotent) {
                // Again at once, with the same arguments: a second call of
                // its own in the sequence, so replays repeat it too.
                let before = snapshot;
                let (again, after) = self
                    .send(system, &call, executed)
                    .await
                    .map_err(|error| died(executed, error))?;
                if self.holds(Hint::Idempotent, &before, &after) == Held::No {
                    broken.push((Hint::Idempotent, executed.clone(), before, after.clone()));
                }
                if !again.succeeded() {
                    self.note_failure(&name, Hint::Idempotent, &again);
                }
                snapshot = after;
            }
            pool.absorb(&snapshot);
            for hint in &claims {
                let standing = self.standing_mut(&name, *hint);
                standing.tried += 1;
                if answer.succeeded() {
                    if undecided.contains(hint) {
                        standing.undecided += 1;
                    } else {
                        standing.times += 1;
                    }
                }
            }
            if !answer.succeeded() {
                for hint in &claims {
                    self.note_failure(&name, *hint, &answer);
                }
            }
            for (hint, sequence, before, after) in broken {
                if self.standing_mut(&name, hint).found {
                    continue;
                }
                self.standing_mut(&name, hint).found = true;
                (self.observe)(Progress::Shrink { tool: &name, hint });
                let finding = self.shrink(start, hint, sequence, before, after).await;
                self.findings.push(finding);
            }
        }
        Ok(())
    }

    /// Sends `call` (recorded in `executed`) and reads the snapshot after it.
    async fn send<Y: System>(
        &mut self,
        system: &mut Y,
        call: &Call,
        executed: &mut Vec<Call>,
    ) -> Result<(Answer, Value), SystemError> {
        executed.push(call.clone());
        (self.observe)(Progress::Call {
            tool: &call.tool,
            calls: self.calls,
        });
        self.calls += 1;
        let answer = system.call(call).await?;
        Ok((answer, system.snapshot().await?))
    }

    /// Whether `hint` held over a call whose snapshots were `before` and
    /// `after` (for idempotentHint: the repeat's).
    fn holds(&self, hint: Hint, before: &Value, after: &Value) -> Held {
        let held = |yes| if yes { Held::Yes } else { Held::No };
        match hint {
            // A string or number has no parts to keep: any change of it
            // would look destructive.
            Hint::Destructive if self.scalar_snapshot => Held::Yes,
            Hint::Destructive => {
                match snapshot::keeps(
                    before,
                    after,
                    &mut snapshot::Budget::new(snapshot::MAX_STEPS),
                ) {
                    Ok(yes) => held(yes),
                    Err(snapshot::Exhausted) => Held::Undecided,
                }
            }
            Hint::ReadOnly | Hint::Idempotent => held(snapshot::same(before, after)),
            Hint::OpenWorld => Held::Yes,
        }
    }

    /// The next call of `playable[index]`: an example or generated
    /// arguments.
    fn draw(&self, index: usize, rng: &mut fastrand::Rng, pool: &generate::Pool) -> Call {
        let playable = &self.playable[index];
        let use_example =
            !playable.examples.is_empty() && (!playable.generated || rng.u8(..4) != 0);
        let arguments = if use_example {
            playable.examples[rng.usize(..playable.examples.len())].clone()
        } else {
            generate::Generator::new(&playable.tool.input_schema, rng, pool)
                .arguments()
                // Checked up front: the schema yields arguments, though a
                // given draw through an optional branch may not.
                .unwrap_or_default()
        };
        Call {
            tool: playable.tool.name.clone(),
            arguments,
        }
    }

    fn standing_mut(&mut self, tool: &str, hint: Hint) -> &mut Standing {
        self.standing.entry((tool.to_owned(), hint)).or_default()
    }

    fn note_failure(&mut self, tool: &str, hint: Hint, answer: &Answer) {
        let failure = match answer {
            Answer::Result { .. } => "a result with isError".to_owned(),
            Answer::Error { code, message } => {
                format!("JSON-RPC error {code} {}", escape::quoted(message))
            }
        };
        self.standing_mut(tool, hint).last_failure = Some(failure);
    }

    /// The shortest sequence found that still breaks `hint` at its last
    /// call: earlier calls are dropped in halves, then quarters, down to
    /// one at a time, each drop kept when a replay on a fresh system still
    /// shows the finding.
    async fn shrink<S: Start>(
        &mut self,
        start: &mut S,
        hint: Hint,
        sequence: Vec<Call>,
        before: Value,
        after: Value,
    ) -> Finding {
        // The calls that show the finding stay: the last, and for
        // idempotentHint the call before it, which it repeats.
        let witness = if hint == Hint::Idempotent { 2 } else { 1 };
        let split = sequence.len() - witness;
        let (mut prefix, tail) = (sequence[..split].to_vec(), sequence[split..].to_vec());
        let mut shown = (before, after);
        let mut replays = 0;
        let mut chunk = prefix.len().div_ceil(2).max(1);
        while !prefix.is_empty() && replays < self.options.max_replays {
            let mut at = 0;
            let mut dropped_any = false;
            while at < prefix.len() && replays < self.options.max_replays {
                let end = (at + chunk).min(prefix.len());
                let mut candidate = prefix[..at].to_vec();
                candidate.extend_from_slice(&prefix[end..]);
                candidate.extend_from_slice(&tail);
                replays += 1;
                if let Some(pair) = self.replay(start, hint, &candidate).await {
                    shown = pair;
                    prefix.drain(at..end);
                    dropped_any = true;
                } else {
                    at = end;
                }
            }
            if chunk == 1 && !dropped_any {
                break;
            }
            chunk = (chunk / 2).max(1);
        }
        let mut sequence = prefix;
        sequence.extend(tail);
        let (before, after) = shown;
        Finding {
            tool: sequence
                .last()
                .map(|call| call.tool.clone())
                .unwrap_or_default(),
            hint,
            difference: snapshot::difference(&before, &after),
            sequence,
            before,
            after,
        }
    }

    /// Runs `sequence` on a fresh system: the snapshots around its last
    /// call when they break `hint`, else `None` (a failed system too).
    async fn replay<S: Start>(
        &mut self,
        start: &mut S,
        hint: Hint,
        sequence: &[Call],
    ) -> Option<(Value, Value)> {
        let mut system = start.start().await.ok()?;
        let outcome = async {
            let (last, earlier) = sequence.split_last()?;
            for call in earlier {
                self.calls += 1;
                system.call(call).await.ok()?;
            }
            let before = system.snapshot().await.ok()?;
            self.calls += 1;
            system.call(last).await.ok()?;
            let after = system.snapshot().await.ok()?;
            (self.holds(hint, &before, &after) == Held::No).then_some((before, after))
        }
        .await;
        system.close().await;
        outcome
    }

    fn report(self) -> Report {
        let mut checked = Vec::new();
        let mut unchecked = self.unchecked;
        for ((tool, hint), standing) in self.standing {
            if hint == Hint::Destructive && self.scalar_snapshot && !standing.found {
                unchecked.push(Unchecked {
                    tool,
                    hint,
                    reason: "the snapshot is not a JSON object or array, so what a call kept \
                             cannot be told from what it changed"
                        .to_owned(),
                });
                continue;
            }
            if standing.times > 0 || standing.found {
                checked.push(Checked {
                    tool,
                    hint,
                    times: standing.times,
                });
                continue;
            }
            let reason = match (standing.tried, standing.last_failure) {
                _ if standing.undecided > 0 => format!(
                    "every snapshot around its calls was too large to compare within {} steps \
                     ({} calls)",
                    snapshot::MAX_STEPS,
                    standing.undecided
                ),
                (0, _) => "never drawn: more --runs or --steps would reach it".to_owned(),
                (tried, Some(failure)) => {
                    format!("no call of it succeeded ({tried} tried; the last got {failure})")
                }
                (tried, None) => format!("no call of it succeeded ({tried} tried)"),
            };
            unchecked.push(Unchecked { tool, hint, reason });
        }
        unchecked.sort_by(|a, b| (&a.tool, a.hint).cmp(&(&b.tool, b.hint)));
        Report {
            findings: self.findings,
            list_changes: self.list_changes,
            checked,
            unchecked,
            runs: self.options.runs,
            calls: self.calls,
        }
    }
}

#[cfg(test)]
mod tests;
