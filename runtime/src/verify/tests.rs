//! The engine against systems in memory: tools that keep and lie about a
//! JSON state, so that each rule is seen to catch its lie and pass the
//! honest tools.

use serde_json::json;

use super::*;
use crate::hints::ToolHints;

/// A tool of the fake server: hints, then what it does to the state.
struct FakeTool {
    name: &'static str,
    annotations: Value,
    schema: Value,
    act: fn(&mut Value, &Map<String, Value>) -> Answer,
}

fn ok() -> Answer {
    Answer::Result { is_error: false }
}

fn items(state: &mut Value) -> &mut Vec<Value> {
    state["items"].as_array_mut().unwrap()
}

fn text_arg() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// Honest tools, and one liar for each rule.
fn tools() -> Vec<FakeTool> {
    vec![
        FakeTool {
            name: "read",
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            schema: json!({"type": "object"}),
            act: |_, _| ok(),
        },
        FakeTool {
            name: "peek",
            // Declares read-only, but logs each call.
            annotations: json!({"readOnlyHint": true, "openWorldHint": false}),
            schema: json!({"type": "object"}),
            act: |state, _| {
                state["log"] = json!(state["log"].as_u64().unwrap_or(0) + 1);
                ok()
            },
        },
        FakeTool {
            name: "set",
            annotations: json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
            schema: text_arg(),
            act: |state, args| {
                state["value"] = args["text"].clone();
                ok()
            },
        },
        FakeTool {
            name: "bump",
            // Declares idempotent, but counts.
            annotations: json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
            schema: json!({"type": "object"}),
            act: |state, _| {
                state["count"] = json!(state["count"].as_u64().unwrap_or(0) + 1);
                ok()
            },
        },
        FakeTool {
            name: "append",
            annotations: json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}),
            schema: text_arg(),
            act: |state, args| {
                items(state).push(args["text"].clone());
                ok()
            },
        },
        FakeTool {
            name: "replace",
            // Declares additive, but clears the list first.
            annotations: json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}),
            schema: text_arg(),
            act: |state, args| {
                *items(state) = vec![args["text"].clone()];
                ok()
            },
        },
        FakeTool {
            name: "strict",
            // Honest and additive, but refuses what is not "alpha": its
            // checks count only the calls that succeed.
            annotations: json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
            schema: text_arg(),
            act: |state, args| {
                if args["text"] != "alpha" {
                    return Answer::Error {
                        code: -32602,
                        message: "only alpha".to_owned(),
                    };
                }
                if !items(state).contains(&json!("alpha")) {
                    items(state).push(json!("alpha"));
                }
                ok()
            },
        },
    ]
}

fn under_test(tools: &[FakeTool]) -> Vec<ToolUnderTest> {
    tools
        .iter()
        .map(|tool| ToolUnderTest {
            name: tool.name.to_owned(),
            hints: ToolHints::from_json(Some(&tool.annotations), None).unwrap(),
            input_schema: tool.schema.clone(),
        })
        .collect()
}

struct Fake {
    tools: Vec<FakeTool>,
    starts: u32,
    /// Every run's system dies at this call, counting from 1.
    dies_at: Option<u64>,
    /// From the second start on, the list [`System::tools`] gives.
    relisted: Option<Vec<ToolUnderTest>>,
}

struct FakeSystem<'a> {
    tools: &'a [FakeTool],
    state: Value,
    calls: u64,
    dies_at: Option<u64>,
    listed: Option<Vec<ToolUnderTest>>,
}

impl Start for Fake {
    type System = FakeSystem<'static>;

    async fn start(&mut self) -> Result<FakeSystem<'static>, SystemError> {
        self.starts += 1;
        // The tools live as long as the test; leaking a copy keeps the
        // fake free of lifetimes in `Start`.
        let tools: &'static [FakeTool] = Box::leak(
            self.tools
                .iter()
                .map(|tool| FakeTool {
                    name: tool.name,
                    annotations: tool.annotations.clone(),
                    schema: tool.schema.clone(),
                    act: tool.act,
                })
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        Ok(FakeSystem {
            tools,
            state: json!({"items": []}),
            calls: 0,
            dies_at: self.dies_at,
            listed: self.relisted.clone().filter(|_| self.starts >= 2),
        })
    }
}

impl System for FakeSystem<'_> {
    async fn call(&mut self, call: &Call) -> Result<Answer, SystemError> {
        self.calls += 1;
        if self.dies_at == Some(self.calls) {
            return Err(SystemError::new("the server exited (signal 9)"));
        }
        let tool = self
            .tools
            .iter()
            .find(|tool| tool.name == call.tool)
            .expect("only listed tools are called");
        Ok((tool.act)(&mut self.state, &call.arguments))
    }

    async fn snapshot(&mut self) -> Result<Value, SystemError> {
        Ok(self.state.clone())
    }

    async fn tools(&mut self) -> Result<Option<Vec<ToolUnderTest>>, SystemError> {
        Ok(self.listed.clone())
    }

    async fn close(self) {}
}

fn fake(tools: Vec<FakeTool>) -> Fake {
    Fake {
        tools,
        starts: 0,
        dies_at: None,
        relisted: None,
    }
}

fn run(options: &Options) -> Report {
    let all = tools();
    let listed = under_test(&all);
    let mut start = fake(all);
    block_on(verify(&listed, &mut start, options)).unwrap()
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

fn found(report: &Report) -> Vec<(String, Hint)> {
    let mut found: Vec<(String, Hint)> = report
        .findings
        .iter()
        .map(|finding| (finding.tool.clone(), finding.hint))
        .collect();
    found.sort();
    found
}

#[test]
fn each_lie_is_found_with_its_hint_and_a_shrunk_sequence() {
    let report = run(&Options::default());
    assert_eq!(
        found(&report),
        vec![
            ("bump".to_owned(), Hint::Idempotent),
            ("peek".to_owned(), Hint::ReadOnly),
            ("replace".to_owned(), Hint::Destructive),
        ]
    );
    for finding in &report.findings {
        let tools: Vec<&str> = finding
            .sequence
            .iter()
            .map(|call| call.tool.as_str())
            .collect();
        match finding.hint {
            // One call shows it.
            Hint::ReadOnly => assert_eq!(tools, ["peek"]),
            // The call and its repeat.
            Hint::Idempotent => assert_eq!(tools, ["bump", "bump"]),
            // Something to lose first, then the replace.
            _ => {
                assert_eq!(tools.len(), 2, "{tools:?}");
                assert_eq!(tools[1], "replace");
            }
        }
        assert!(!finding.difference.is_empty());
        assert!(!snapshot::same(&finding.before, &finding.after));
    }
    let peek = report
        .findings
        .iter()
        .find(|finding| finding.tool == "peek")
        .unwrap();
    assert_eq!(
        peek.difference,
        vec![Change {
            path: "/log".to_owned(),
            before: None,
            after: Some(json!(1)),
        }]
    );
}

#[test]
fn honest_tools_are_never_flagged_across_seeds() {
    for seed in 0..20 {
        let report = run(&Options {
            seed,
            runs: 2,
            steps: 15,
            ..Options::default()
        });
        for finding in &report.findings {
            assert!(
                ["peek", "bump", "replace"].contains(&finding.tool.as_str()),
                "seed {seed}: {finding:?}"
            );
        }
    }
}

#[test]
fn checked_counts_only_calls_that_succeeded() {
    let report = run(&Options::default());
    let times = |tool: &str, hint| {
        report
            .checked
            .iter()
            .find(|checked| checked.tool == tool && checked.hint == hint)
            .map(|checked| checked.times)
    };
    assert!(times("append", Hint::Destructive).unwrap() > 0);
    assert!(times("set", Hint::Idempotent).unwrap() > 0);
    // Destructive and non-idempotent tools promise nothing.
    assert_eq!(times("set", Hint::Destructive), None);
    assert_eq!(times("append", Hint::Idempotent), None);
    // openWorldHint false is never observable.
    assert!(
        report
            .unchecked
            .iter()
            .any(|unchecked| unchecked.tool == "read"
                && unchecked.hint == Hint::OpenWorld
                && unchecked.reason == "not observable from here")
    );
    // `strict` succeeds only on "alpha", which the vocabulary holds.
    assert!(times("strict", Hint::Idempotent).unwrap() > 0);
}

#[test]
fn a_tool_that_never_succeeds_is_unchecked_with_its_answer() {
    let all = vec![FakeTool {
        name: "refuses",
        annotations: json!({"readOnlyHint": true, "openWorldHint": true}),
        schema: json!({"type": "object"}),
        act: |_, _| Answer::Error {
            code: -32603,
            message: "disk\nfull".to_owned(),
        },
    }];
    let listed = under_test(&all);
    let report = block_on(verify(&listed, &mut fake(all), &Options::default())).unwrap();
    assert!(report.holds());
    assert!(report.checked.is_empty());
    assert_eq!(report.unchecked.len(), 1);
    assert_eq!(
        report.unchecked[0].reason,
        "no call of it succeeded (200 tried; the last got JSON-RPC error -32603 \"disk\\nfull\")"
    );
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let options = Options {
        seed: 7,
        ..Options::default()
    };
    let first = serde_json::to_value(run(&options)).unwrap();
    let second = serde_json::to_value(run(&options)).unwrap();
    assert_eq!(first, second);
    let other = serde_json::to_value(run(&Options {
        seed: 8,
        ..Options::default()
    }))
    .unwrap();
    assert_ne!(first["calls"], Value::Null);
    assert_ne!(first, other, "another seed draws other calls");
}

#[test]
fn skipped_tools_are_never_called() {
    let mut options = Options::default();
    options.skip("pe*").unwrap().skip("[br]*").unwrap();
    let report = run(&options);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    for tool in ["peek", "bump", "replace", "read"] {
        assert!(
            report
                .unchecked
                .iter()
                .any(|unchecked| unchecked.tool == tool
                    && unchecked
                        .reason
                        .starts_with("never called: it matches skip")),
            "{tool}: {:?}",
            report.unchecked
        );
    }
    assert!(matches!(
        Options::default().skip("[a"),
        Err(VerifyError::BadGlob { .. })
    ));
}

#[test]
fn a_schema_no_value_meets_leaves_the_tool_unchecked_unless_examples_meet_it() {
    let unsatisfiable = || FakeTool {
        name: "odd",
        annotations: json!({"readOnlyHint": true, "openWorldHint": true}),
        schema: json!({"type": "object", "properties": {"a": {"type": "string", "not": {}}}, "required": ["a"]}),
        act: |state, _| {
            state["odd"] = json!(true);
            ok()
        },
    };
    let all = vec![unsatisfiable()];
    let listed = under_test(&all);
    let report = block_on(verify(&listed, &mut fake(all), &Options::default())).unwrap();
    assert_eq!(report.calls, 0);
    assert_eq!(
        report.unchecked[0].reason,
        "never called: no arguments meet its inputSchema (at /properties/a: `not` of a schema every value meets)"
    );
    // With an example, it is called, and its lie found.
    let all = vec![unsatisfiable()];
    let listed = under_test(&all);
    let mut options = Options::default();
    options.examples.insert(
        "odd".to_owned(),
        vec![json!({"a": "b"}).as_object().unwrap().clone()],
    );
    let report = block_on(verify(&listed, &mut fake(all), &options)).unwrap();
    assert_eq!(found(&report), vec![("odd".to_owned(), Hint::ReadOnly)]);
    assert_eq!(
        report.findings[0].sequence[0].arguments,
        *json!({"a": "b"}).as_object().unwrap()
    );
}

#[test]
fn a_system_that_dies_mid_run_ends_verification_with_its_calls() {
    let all = tools();
    let listed = under_test(&all);
    let mut start = fake(all);
    start.dies_at = Some(3);
    let error = block_on(verify(&listed, &mut start, &Options::default())).unwrap_err();
    let VerifyError::Died {
        run,
        sequence,
        error,
    } = error
    else {
        panic!("{error:?}");
    };
    assert_eq!(run, 1);
    assert_eq!(sequence.len(), 3);
    assert_eq!(error.0, "the server exited (signal 9)");
}

#[test]
fn examples_for_an_unknown_tool_are_refused() {
    let mut options = Options::default();
    options.examples.insert("nope".to_owned(), vec![Map::new()]);
    let all = tools();
    let listed = under_test(&all);
    let error = block_on(verify(&listed, &mut fake(all), &options)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the examples name tool `nope`, which the server does not list"
    );
}

#[test]
fn every_run_and_replay_starts_afresh() {
    let all = tools();
    let listed = under_test(&all);
    let mut start = fake(all);
    let options = Options {
        runs: 4,
        ..Options::default()
    };
    let report = block_on(verify(&listed, &mut start, &options)).unwrap();
    // Four runs, and the shrinking replays on top.
    assert!(start.starts > 4, "{}", start.starts);
    assert_eq!(report.runs, 4);
}

/// A system whose snapshot has a clock in it, or is prose.
struct Clocked {
    reads: u64,
    prose: bool,
}

impl Start for Clocked {
    type System = Clocked;

    async fn start(&mut self) -> Result<Clocked, SystemError> {
        Ok(Clocked {
            reads: 0,
            prose: self.prose,
        })
    }
}

impl System for Clocked {
    async fn call(&mut self, call: &Call) -> Result<Answer, SystemError> {
        if call.tool == "append" {
            self.reads += 1;
        }
        Ok(ok())
    }

    async fn snapshot(&mut self) -> Result<Value, SystemError> {
        if self.prose {
            // Stable, but a sentence: nothing in it to keep.
            return Ok(json!(format!("There are {} items.", self.reads)));
        }
        self.reads += 1;
        Ok(json!({"items": [], "now": self.reads}))
    }

    async fn close(self) {}
}

#[test]
fn a_snapshot_that_changes_by_itself_is_refused_before_any_call() {
    let listed = under_test(&tools());
    let mut start = Clocked {
        reads: 0,
        prose: false,
    };
    let error = block_on(verify(&listed, &mut start, &Options::default())).unwrap_err();
    assert!(
        matches!(error, VerifyError::UnstableSnapshot { run: 1, .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "run 1: the snapshot changed between two reads with no call between them (/now), so no \
         hint can be checked against it: name a snapshot of the state alone"
    );
}

#[test]
fn a_prose_snapshot_leaves_destructive_hints_unchecked() {
    let listed = under_test(&tools());
    let mut start = Clocked {
        reads: 0,
        prose: true,
    };
    let report = block_on(verify(&listed, &mut start, &Options::default())).unwrap();
    assert!(
        !report
            .findings
            .iter()
            .any(|finding| finding.hint == Hint::Destructive),
        "{:?}",
        report.findings
    );
    let append = report
        .unchecked
        .iter()
        .find(|unchecked| unchecked.tool == "append" && unchecked.hint == Hint::Destructive)
        .expect("append's destructiveHint is unchecked");
    assert!(
        append
            .reason
            .starts_with("the snapshot is not a JSON object or array")
    );
}

#[test]
fn a_list_that_changes_between_runs_is_a_list_change_and_its_tool_not_called() {
    let honest = |name| tools().into_iter().find(|tool| tool.name == name).unwrap();
    let all = vec![honest("read"), honest("set"), honest("append")];
    let listed = under_test(&all);
    // From run 2 on, `read` declares a write and `extra` appears.
    let mut relisted = listed.clone();
    relisted[0].hints = ToolHints::from_json(
        Some(&json!({"readOnlyHint": false, "openWorldHint": false})),
        None,
    )
    .unwrap();
    relisted.push(ToolUnderTest {
        name: "extra".to_owned(),
        hints: ToolHints::from_json(None, None).unwrap(),
        input_schema: json!({"type": "object"}),
    });
    let mut start = fake(all);
    start.relisted = Some(relisted);
    let options = Options {
        runs: 3,
        ..Options::default()
    };
    let mut run = 0;
    let mut calls: Vec<(u32, String)> = Vec::new();
    let report = block_on(verify_with(
        &listed,
        &mut start,
        &options,
        &mut |event| match event {
            Progress::Run { run: now, runs } => {
                assert_eq!(runs, 3);
                run = now;
            }
            Progress::Call { tool, .. } => calls.push((run, tool.to_owned())),
            _ => {}
        },
    ))
    .unwrap();
    assert_eq!(
        report.list_changes,
        vec![
            ListChange {
                run: 2,
                tool: "read".to_owned(),
                change: ListChangeKind::Hints {
                    hints: vec![HintChange {
                        hint: Hint::ReadOnly,
                        was: true,
                        now: false
                    }]
                },
            },
            ListChange {
                run: 2,
                tool: "extra".to_owned(),
                change: ListChangeKind::Added,
            },
        ]
    );
    assert!(!report.holds());
    assert!(report.findings.is_empty());
    // Runs 2 and 3 drew their 40 steps among the other tools (a step of
    // `set`, idempotent, is two calls).
    assert!(calls.iter().filter(|(run, _)| *run >= 2).count() >= 40);
    assert!(
        !calls.iter().any(|(run, tool)| *run >= 2 && tool == "read"),
        "{calls:?}"
    );
    assert_eq!(calls.len() as u64, report.calls);
}
