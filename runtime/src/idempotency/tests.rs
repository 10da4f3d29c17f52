//! The rules of keyed calls, one test each, on the in-memory store with
//! tokio's clock paused (time moves only when a test advances it).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, JsonObject};
use serde_json::{Value, json};

use super::*;

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments are an object, not {other}"),
    }
}

/// A handler that counts its runs and answers `text`.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicUsize>);

impl Counter {
    fn runs(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    async fn answer(&self, text: &str) -> Result<CallToolResponse, ErrorData> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(text),
        ])))
    }
}

fn complete(response: Result<CallToolResponse, ErrorData>) -> CallToolResult {
    match response {
        Ok(CallToolResponse::Complete(result)) => result,
        other => panic!("expected a complete result, got {other:?}"),
    }
}

fn refused(response: Result<CallToolResponse, ErrorData>) -> ErrorData {
    match response {
        Err(error) => error,
        Ok(other) => panic!("expected a refusal, got {other:?}"),
    }
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn call(idempotency: &Idempotency, args: Value) -> KeyedCall {
    idempotency
        .prepare("append", "request_id", Some(&arguments(args)), None)
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn same_key_and_arguments_replay_without_running() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let first = call(
        &idempotency,
        json!({"request_id": "k", "text": "hi", "n": 1}),
    );
    let result = complete(idempotency.run(&first, counter.answer("one")).await);
    assert_eq!(text(&result), "one");
    assert!(result.meta.is_none(), "a first run is not marked replayed");

    // Key order and 1 against 1.0 do not make other arguments.
    let again = call(
        &idempotency,
        json!({"n": 1.0, "text": "hi", "request_id": "k"}),
    );
    assert_eq!(again.arguments_digest(), first.arguments_digest());
    let replayed = complete(idempotency.run(&again, counter.answer("two")).await);
    assert_eq!(counter.runs(), 1);
    assert_eq!(text(&replayed), "one");
    let marker = &replayed.meta.unwrap().0[REPLAYED_META_KEY];
    assert_eq!(marker["key"], "k");
    assert!(marker["recordedMs"].as_u64().unwrap() > 0);
}

#[tokio::test(start_paused = true)]
async fn a_memory_store_asked_directly_or_as_a_shared_store_answers_alike() {
    let shared: Arc<dyn IdempotencyStore> = Arc::new(MemoryStore::new());
    let layers = [
        // Asked directly: the default, and a `MemoryStore` given by value.
        Idempotency::default(),
        Idempotency::builder().store(MemoryStore::new()).build(),
        // Asked through the store trait, as any other store is.
        Idempotency::builder().shared_store(shared).build(),
    ];
    assert!(layers[0].inner.memory.is_some() && layers[1].inner.memory.is_some());
    assert!(layers[2].inner.memory.is_none());
    for idempotency in layers {
        let counter = Counter::default();
        let first = call(&idempotency, json!({"request_id": "k", "text": "hi"}));
        let result = complete(idempotency.run(&first, counter.answer("one")).await);
        assert_eq!(text(&result), "one");
        let replayed = complete(idempotency.run(&first, counter.answer("two")).await);
        assert_eq!((counter.runs(), text(&replayed)), (1, "one".to_owned()));
        let other = call(&idempotency, json!({"request_id": "k", "text": "other"}));
        let error = refused(idempotency.run(&other, counter.answer("three")).await);
        assert_eq!(error.code.0, codes::KEY_CONFLICT);
        assert_eq!(counter.runs(), 1);
    }
}

#[test]
fn integers_beyond_two_to_the_53_are_compared_exactly() {
    let digest = |value: Value| arguments_digest(Some(&arguments(value)), "request_id");
    // Doubles: one number however written.
    assert_eq!(digest(json!({"n": 1})), digest(json!({"n": 1.0})));
    assert_eq!(
        digest(json!({"n": 9007199254740992_u64})),
        digest(json!({"n": 9007199254740992.0}))
    );
    // Beyond 2^53 a double would round them together; their digits differ.
    for (a, b) in [
        (
            json!({"n": 9007199254740993_u64}),
            json!({"n": 9007199254740992_u64}),
        ),
        (
            json!({"n": 1234567890123456789_u64}),
            json!({"n": 1234567890123456700_u64}),
        ),
        (
            json!({"n": -9007199254740993_i64}),
            json!({"n": -9007199254740992_i64}),
        ),
        (
            json!({"n": [{"m": 9007199254740993_u64}]}),
            json!({"n": [{"m": 9007199254740992_u64}]}),
        ),
    ] {
        assert_ne!(digest(a.clone()), digest(b), "{a}");
    }
    assert_eq!(
        digest(json!({"n": 1234567890123456789_u64, "request_id": "x"})),
        digest(json!({"n": 1234567890123456789_u64}))
    );
}

/// The arguments of a JSON text, read as rmcp reads a request's.
fn parsed(text: &str) -> JsonObject {
    serde_json::from_str(text).unwrap()
}

#[test]
fn an_integer_and_a_string_holding_its_digits_differ() {
    let digest = |value: Value| arguments_digest(Some(&arguments(value)), "request_id");
    for n in [9007199254740993_u64, 1234567890123456789, u64::MAX] {
        let number = digest(json!({ "n": n }));
        for mimic in [format!("\u{0}integer {n}"), format!("{n}n"), n.to_string()] {
            assert_ne!(
                number,
                digest(json!({ "n": mimic })),
                "{n} against {mimic:?}"
            );
        }
    }
    assert_ne!(
        digest(json!({"n": -9007199254740993_i64})),
        digest(json!({"n": "\u{0}integer -9007199254740993"}))
    );
}

#[tokio::test(start_paused = true)]
async fn integers_beyond_64_bits_are_refused_not_replayed() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    for (first, second) in [
        ("100000000000000000001", "100000000000000000000"),
        ("18446744073709551616", "18446744073709551617"),
        ("-9223372036854775809", "-9223372036854775810"),
        ("1e20", "100000000000000000000"),
    ] {
        for (n, text) in [first, second].into_iter().enumerate() {
            let args = parsed(&format!(
                r#"{{"request_id": "k-{first}", "deep": [{{"n": {text}}}]}}"#
            ));
            // Without the refusal, the second would be the first's replay.
            let error = match idempotency.prepare("append", "request_id", Some(&args), None) {
                Err(error) => error,
                Ok(call) => {
                    let outcome = idempotency.run(&call, counter.answer(text)).await;
                    panic!("call {n} with {text} was taken: {outcome:?}");
                }
            };
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{text}");
            assert_eq!(error.data.as_ref().unwrap()["argument"], "deep", "{text}");
            assert!(
                error.message.contains("send such a number as a string"),
                "{}",
                error.message
            );
        }
    }
    assert_eq!(counter.runs(), 0);
    // 64-bit integers, however large, are kept and compared exactly.
    let exact = |n: &str| {
        idempotency
            .prepare(
                "append",
                "request_id",
                Some(&parsed(&format!(r#"{{"request_id": "k", "n": {n}}}"#))),
                None,
            )
            .unwrap()
    };
    assert_ne!(
        exact("18446744073709551615").arguments_digest(),
        exact("18446744073709551614").arguments_digest()
    );
    assert_ne!(
        exact("-9223372036854775808").arguments_digest(),
        exact("-9223372036854775807").arguments_digest()
    );
}

/// What the digest must tell apart: a JSON value whose numbers are their
/// mathematical values (an integer, or a double that holds no integer) and
/// whose objects are unordered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Model {
    Null,
    Bool(bool),
    Integer(i128),
    Double(u64),
    Text(String),
    Array(Vec<Model>),
    Object(std::collections::BTreeMap<String, Model>),
}

fn model(value: &Value) -> Model {
    match value {
        Value::Null => Model::Null,
        Value::Bool(b) => Model::Bool(*b),
        Value::Number(number) => {
            if let Some(n) = number.as_u64() {
                Model::Integer(n.into())
            } else if let Some(n) = number.as_i64() {
                Model::Integer(n.into())
            } else {
                let double = number.as_f64().unwrap();
                // Every integral double below 2^127 is an i128, exactly.
                if double.fract() == 0.0 && double.abs() < 2f64.powi(127) {
                    Model::Integer(double as i128)
                } else {
                    Model::Double(double.to_bits())
                }
            }
        }
        Value::String(text) => Model::Text(text.clone()),
        Value::Array(items) => Model::Array(items.iter().map(model).collect()),
        Value::Object(members) => Model::Object(
            members
                .iter()
                .map(|(name, value)| (name.clone(), model(value)))
                .collect(),
        ),
    }
}

/// A number from pools where the encodings of integers, doubles and
/// strings meet: near 2^53, 2^63 and 2^64, integers with the digits of a
/// double's RFC 8785 text, exponents, negative zero.
fn random_number(rng: &mut fastrand::Rng) -> Value {
    let near =
        |rng: &mut fastrand::Rng, base: u64| base.wrapping_add(rng.u64(0..5)).wrapping_sub(2);
    match rng.u32(0..12) {
        0 => json!(rng.i64(-3..=3)),
        1 => json!(near(rng, 1 << 53)),
        2 => json!(-(near(rng, 1 << 53) as i64)),
        3 => json!(near(rng, 1 << 63)),
        4 => json!(u64::MAX - rng.u64(0..3)),
        5 => json!(i64::MIN + rng.i64(0..3)),
        // A double's integer value, as the integer or as the double.
        6 => {
            let n = (rng.u64(1..1 << 11)) << rng.u32(40..53);
            if rng.bool() {
                json!(n)
            } else {
                json!(n as f64)
            }
        }
        // The integer RFC 8785 writes for a double beyond 2^53 (2^60 is
        // written 1152921504606847000), read back as an integer.
        7 => {
            let double = ((rng.u64(1..1 << 11)) << rng.u32(50..53)) as f64;
            let text = ryu_js::Buffer::new().format_finite(double).to_owned();
            json!(text.parse::<u64>().unwrap())
        }
        8 => json!(
            [
                -0.0,
                0.0,
                0.5,
                1e20,
                -1e20,
                1e21,
                1e-7,
                2f64.powi(64),
                2f64.powi(63)
            ][rng.usize(0..9)]
        ),
        9 => json!(rng.f64() * 10f64.powi(rng.i32(-30..30))),
        10 => serde_json::from_str(&format!("{}e{}", rng.u32(0..100), rng.i32(-3..25))).unwrap(),
        _ => json!(rng.u64(..)),
    }
}

/// A string crafted to look like an encoding of a number: the old one
/// (`"\u0000integer <digits>"`), the `<digits>n` of the canonical text, a
/// number's own text.
fn random_mimic(rng: &mut fastrand::Rng) -> Value {
    let number = random_number(rng);
    let mut digits = Vec::new();
    crate::canonical::write(&number, &mut digits);
    let digits = String::from_utf8(digits).unwrap();
    let plain = digits.trim_end_matches('n').to_owned();
    json!(match rng.u32(0..5) {
        0 => format!("\u{0}integer {plain}"),
        1 => format!("{plain}n"),
        2 => digits,
        3 => number.to_string(),
        _ => ["", "\u{0}", "n", "null", "-0", "0"][rng.usize(0..6)].to_owned(),
    })
}

fn random_member(rng: &mut fastrand::Rng, depth: u32) -> Value {
    match rng.u32(0..if depth == 0 { 3 } else { 5 }) {
        0 | 1 => random_number(rng),
        2 => random_mimic(rng),
        3 => Value::Array(
            (0..rng.usize(0..3))
                .map(|_| random_member(rng, depth - 1))
                .collect(),
        ),
        _ => random_arguments(rng, depth - 1),
    }
}

fn random_arguments(rng: &mut fastrand::Rng, depth: u32) -> Value {
    let names = [
        "a",
        "b",
        "request_id",
        "\u{0}integer 1",
        "\u{e000}",
        "\u{1f600}",
    ];
    Value::Object(
        (0..rng.usize(0..3))
            .map(|_| {
                (
                    names[rng.usize(0..names.len())].to_owned(),
                    random_member(rng, depth),
                )
            })
            .collect(),
    )
}

#[test]
fn no_two_different_argument_sets_share_a_digest() {
    let mut rng = fastrand::Rng::with_seed(53);
    let mut by_digest = std::collections::HashMap::new();
    let mut by_model = std::collections::HashMap::new();
    for _ in 0..100_000 {
        let args = random_arguments(&mut rng, 2);
        let digest = arguments_digest(Some(&arguments(args.clone())), "request_id");
        let mut without = args.clone();
        without.as_object_mut().unwrap().remove("request_id");
        let model = model(&without);
        if let Some((earlier, earlier_model)) = by_digest.get(&digest) {
            assert_eq!(&model, earlier_model, "{args} and {earlier} share {digest}");
        }
        if let Some((earlier, earlier_digest)) = by_model.get(&model) {
            assert_eq!(&digest, earlier_digest, "{args} and {earlier} are equal");
        }
        by_digest.insert(digest.clone(), (args.clone(), model.clone()));
        by_model.insert(model, (args, digest));
    }
    // The pools are small enough that equal values, written apart, met.
    assert!(
        by_model.len() < 95_000,
        "{} distinct of 100000",
        by_model.len()
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_error_is_recorded_and_replayed_too() {
    let idempotency = Idempotency::default();
    let runs = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let failing = || async {
        runs.0.fetch_add(1, Ordering::SeqCst);
        Ok(CallToolResponse::Complete(CallToolResult::error(vec![
            ContentBlock::text("no such account"),
        ])))
    };
    let first = complete(idempotency.run(&keyed, failing()).await);
    let second = complete(idempotency.run(&keyed, failing()).await);
    assert_eq!(runs.runs(), 1);
    assert_eq!(first.is_error, Some(true));
    assert_eq!(second.is_error, Some(true));
    assert_eq!(text(&second), "no such account");
}

#[tokio::test(start_paused = true)]
async fn same_key_other_arguments_is_a_conflict_and_never_runs() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let first = call(&idempotency, json!({"request_id": "k", "text": "hi"}));
    complete(idempotency.run(&first, counter.answer("one")).await);
    let other = call(&idempotency, json!({"request_id": "k", "text": "bye"}));
    let error = refused(idempotency.run(&other, counter.answer("two")).await);
    assert_eq!(counter.runs(), 1);
    assert_eq!(error.code.0, codes::KEY_CONFLICT);
    assert_eq!(
        error.message,
        "the idempotency key \"k\" of `append` was first used with other arguments: a key names \
         one operation, so use a new key for new arguments"
    );
    assert_eq!(
        error.data,
        Some(json!({"tool": "append", "idempotencyKey": "k", "reason": "conflict"}))
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_in_progress_is_refused_and_never_runs_twice() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let (release, gate) = tokio::sync::oneshot::channel::<()>();
    let slow = {
        let (idempotency, keyed, counter) = (idempotency.clone(), keyed.clone(), counter.clone());
        tokio::spawn(async move {
            let run = async {
                gate.await.unwrap();
                counter.answer("slow").await
            };
            idempotency.run(&keyed, run).await
        })
    };
    tokio::task::yield_now().await;
    let error = refused(idempotency.run(&keyed, counter.answer("fast")).await);
    assert_eq!(error.code.0, codes::KEY_IN_PROGRESS);
    assert_eq!(error.data.as_ref().unwrap()["reason"], "in_progress");
    assert_eq!(error.data.as_ref().unwrap()["retryAfterMs"], 1_000);
    // Another argument set is a conflict even while the first runs.
    let other = call(&idempotency, json!({"request_id": "k", "x": 1}));
    assert_eq!(
        refused(idempotency.run(&other, counter.answer("other")).await)
            .code
            .0,
        codes::KEY_CONFLICT
    );
    release.send(()).unwrap();
    assert_eq!(text(&complete(slow.await.unwrap())), "slow");
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn waiting_for_a_key_in_progress_returns_the_first_result() {
    let idempotency = Idempotency::builder()
        .in_progress(InProgress::Wait(Duration::from_secs(5)))
        .build();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let first = {
        let (idempotency, keyed, counter) = (idempotency.clone(), keyed.clone(), counter.clone());
        tokio::spawn(async move {
            let run = async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                counter.answer("first").await
            };
            idempotency.run(&keyed, run).await
        })
    };
    tokio::task::yield_now().await;
    let waited = complete(idempotency.run(&keyed, counter.answer("second")).await);
    assert_eq!(text(&waited), "first");
    assert!(waited.meta.unwrap().0.contains_key(REPLAYED_META_KEY));
    complete(first.await.unwrap());
    assert_eq!(counter.runs(), 1);

    // A wait is bounded: past it, the answer is "in progress".
    let long = call(&idempotency, json!({"request_id": "long"}));
    let _running = {
        let (idempotency, long, counter) = (idempotency.clone(), long.clone(), counter.clone());
        tokio::spawn(async move {
            let run = async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                counter.answer("long").await
            };
            idempotency.run(&long, run).await
        })
    };
    tokio::task::yield_now().await;
    let started = tokio::time::Instant::now();
    let error = refused(idempotency.run(&long, counter.answer("no")).await);
    assert_eq!(error.code.0, codes::KEY_IN_PROGRESS);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn fifty_concurrent_calls_with_one_key_run_once() {
    for in_progress in [
        InProgress::Refuse,
        InProgress::Wait(Duration::from_secs(10)),
    ] {
        let idempotency = Idempotency::builder().in_progress(in_progress).build();
        let counter = Counter::default();
        let keyed = call(&idempotency, json!({"request_id": "k"}));
        let calls: Vec<_> = (0..50)
            .map(|_| {
                let (idempotency, keyed, counter) =
                    (idempotency.clone(), keyed.clone(), counter.clone());
                tokio::spawn(async move {
                    let run = async {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        counter.answer("once").await
                    };
                    idempotency.run(&keyed, run).await
                })
            })
            .collect();
        let mut results = 0;
        let mut in_progress_refusals = 0;
        for call in calls {
            match call.await.unwrap() {
                Ok(CallToolResponse::Complete(result)) => {
                    assert_eq!(text(&result), "once");
                    results += 1;
                }
                Err(error) if error.code.0 == codes::KEY_IN_PROGRESS => in_progress_refusals += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(counter.runs(), 1, "{in_progress:?}");
        match in_progress {
            InProgress::Refuse => assert_eq!((results, in_progress_refusals), (1, 49)),
            InProgress::Wait(_) => assert_eq!((results, in_progress_refusals), (50, 0)),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_json_rpc_error_leaves_no_record() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let error = refused(
        idempotency
            .run(&keyed, async {
                Err(ErrorData::invalid_params("no such note", None))
            })
            .await,
    );
    assert_eq!(error.message, "no such note");
    assert_eq!(
        text(&complete(
            idempotency.run(&keyed, counter.answer("ran")).await
        )),
        "ran"
    );
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_panic_or_a_dropped_call_leaves_no_record() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let panicking = {
        let (idempotency, keyed) = (idempotency.clone(), keyed.clone());
        tokio::spawn(async move {
            idempotency
                .run(&keyed, async { panic!("the handler panicked") })
                .await
        })
    };
    assert!(panicking.await.unwrap_err().is_panic());
    // The release runs in a task of its own.
    tokio::task::yield_now().await;
    assert_eq!(
        text(&complete(
            idempotency.run(&keyed, counter.answer("after panic")).await
        )),
        "after panic"
    );

    let dropped = call(&idempotency, json!({"request_id": "dropped"}));
    let pending = idempotency.run(&dropped, std::future::pending());
    assert!(
        tokio::time::timeout(Duration::from_millis(10), pending)
            .await
            .is_err()
    );
    tokio::task::yield_now().await;
    assert_eq!(
        text(&complete(
            idempotency
                .run(&dropped, counter.answer("after drop"))
                .await
        )),
        "after drop"
    );
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(start_paused = true)]
async fn unfinished_calls_release_the_key() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let input_required: CallToolResponse =
        serde_json::from_value::<rmcp::model::InputRequiredResult>(
            json!({"resultType": "input_required", "inputRequests": {}}),
        )
        .map(CallToolResponse::InputRequired)
        .unwrap();
    let answer = idempotency.run(&keyed, async { Ok(input_required) }).await;
    assert!(matches!(answer, Ok(CallToolResponse::InputRequired(_))));
    complete(
        idempotency
            .run(&keyed, counter.answer("second round"))
            .await,
    );
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn keys_are_one_to_255_characters_and_must_be_strings() {
    let idempotency = Idempotency::default();
    let prepare =
        |args: Value| idempotency.prepare("append", "request_id", Some(&arguments(args)), None);
    assert!(prepare(json!({"request_id": "k"})).is_ok());
    // Characters, not bytes: 255 of a two-byte character is still a key.
    assert!(prepare(json!({"request_id": "é".repeat(255)})).is_ok());
    for (args, problem) in [
        (json!({}), "is missing"),
        (json!({"request_id": null}), "is missing"),
        (json!({"request_id": ""}), "is empty"),
        (json!({"request_id": 7}), "is not a string"),
        (
            json!({"request_id": "k".repeat(256)}),
            "is longer than 255 characters",
        ),
    ] {
        let error = prepare(args).unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(
            error.message,
            format!(
                "the idempotency key `request_id` of `append` {problem}: send a string of 1 to \
                 255 characters that names this operation, and the same one on every resend"
            )
        );
    }
    assert!(
        idempotency
            .prepare("append", "request_id", None, None)
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_key_counts_as_new() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    complete(idempotency.run(&keyed, counter.answer("day one")).await);
    tokio::time::advance(defaults::RETENTION - Duration::from_millis(1)).await;
    assert_eq!(
        text(&complete(
            idempotency.run(&keyed, counter.answer("no")).await
        )),
        "day one"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        text(&complete(
            idempotency.run(&keyed, counter.answer("day two")).await
        )),
        "day two"
    );
    assert_eq!(counter.runs(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_dead_callers_lease_is_taken_over_once_it_is_over() {
    let clock = Arc::new(TokioClock::new());
    let idempotency = Idempotency::builder()
        .lease(Duration::from_secs(3))
        .clock(clock.clone())
        .build();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    // A process that died mid-call left its record in progress.
    let now_ms = clock.now_ms();
    let dead = Claim {
        arguments: keyed.arguments_digest().to_owned(),
        token: "dead".to_owned(),
        now_ms,
        lease_until_ms: now_ms + 3_000,
        retention: defaults::RETENTION,
    };
    idempotency
        .store()
        .reserve(keyed.record_key(), &dead)
        .await
        .unwrap();
    let error = refused(idempotency.run(&keyed, counter.answer("too soon")).await);
    assert_eq!(error.code.0, codes::KEY_IN_PROGRESS);
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(
        text(&complete(
            idempotency.run(&keyed, counter.answer("taken over")).await
        )),
        "taken over"
    );
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_long_call_renews_its_lease() {
    let idempotency = Idempotency::builder().lease(Duration::from_secs(3)).build();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let long = {
        let (idempotency, keyed, counter) = (idempotency.clone(), keyed.clone(), counter.clone());
        tokio::spawn(async move {
            let run = async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                counter.answer("long").await
            };
            idempotency.run(&keyed, run).await
        })
    };
    // Ten leases later the first call still holds the key.
    tokio::time::sleep(Duration::from_secs(29)).await;
    let error = refused(idempotency.run(&keyed, counter.answer("second")).await);
    assert_eq!(error.code.0, codes::KEY_IN_PROGRESS);
    complete(long.await.unwrap());
    assert_eq!(counter.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn callers_in_other_scopes_do_not_share_keys() {
    let idempotency = Idempotency::default();
    let counter = Counter::default();
    let args = arguments(json!({"request_id": "k"}));
    for caller in ["alice", "bob"] {
        let keyed = idempotency
            .prepare("append", "request_id", Some(&args), Some(caller))
            .unwrap();
        assert_eq!(
            text(&complete(
                idempotency.run(&keyed, counter.answer(caller)).await
            )),
            caller
        );
    }
    assert_eq!(counter.runs(), 2);
}

/// A store that cannot be reached.
#[derive(Debug)]
struct DeadStore;

#[async_trait]
impl IdempotencyStore for DeadStore {
    async fn reserve(&self, _: &RecordKey, _: &Claim) -> Result<Reservation, StoreError> {
        Err(StoreError::unavailable("connection refused"))
    }
    async fn renew(&self, _: &RecordKey, _: &str, _: u64, _: u64) -> Result<bool, StoreError> {
        Err(StoreError::unavailable("connection refused"))
    }
    async fn complete(
        &self,
        _: &RecordKey,
        _: &str,
        _: RecordedResult,
        _: u64,
        _: Duration,
    ) -> Result<bool, StoreError> {
        Err(StoreError::unavailable("connection refused"))
    }
    async fn release(&self, _: &RecordKey, _: &str) -> Result<bool, StoreError> {
        Err(StoreError::unavailable("connection refused"))
    }
}

#[tokio::test(start_paused = true)]
async fn a_dead_store_refuses_the_call_without_running_it() {
    let idempotency = Idempotency::builder().store(DeadStore).build();
    let counter = Counter::default();
    let keyed = call(&idempotency, json!({"request_id": "k"}));
    let error = refused(idempotency.run(&keyed, counter.answer("no")).await);
    assert_eq!(counter.runs(), 0);
    assert_eq!(error.code.0, codes::STORE_FAILED);
    assert_eq!(
        error.message,
        "the idempotency store failed: connection refused, so `append` was not run; retry later"
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_store_refuses_new_keys_without_running_them() {
    let idempotency = Idempotency::builder()
        .store(MemoryStore::with_capacity(1))
        .build();
    let counter = Counter::default();
    let first = call(&idempotency, json!({"request_id": "a"}));
    let _running = {
        let (idempotency, first) = (idempotency.clone(), first.clone());
        tokio::spawn(async move { idempotency.run(&first, std::future::pending()).await })
    };
    tokio::task::yield_now().await;
    let second = call(&idempotency, json!({"request_id": "b"}));
    let error = refused(idempotency.run(&second, counter.answer("no")).await);
    assert_eq!(error.code.0, codes::STORE_FAILED);
    assert_eq!(counter.runs(), 0);
}
