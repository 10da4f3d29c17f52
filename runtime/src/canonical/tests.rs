//! The canonical text against RFC 8785's (serde_json_canonicalizer's) where
//! they must agree, and known texts where they must not.

use serde_json::{Value, json};

use super::*;

fn text(value: &Value) -> String {
    let mut out = Vec::new();
    write(value, &mut out);
    String::from_utf8(out).unwrap()
}

fn jcs(value: &Value) -> String {
    serde_json_canonicalizer::to_string(value).unwrap()
}

#[test]
fn known_texts() {
    for (value, expected) in [
        (
            json!({"b": 1.0, "a": [true, null, "x"]}),
            r#"{"a":[true,null,"x"],"b":1}"#,
        ),
        (json!(-0.0), "0"),
        (json!(1e21), "1e+21"),
        (json!(0.000001), "0.000001"),
        (json!(1e-7), "1e-7"),
        (json!(9007199254740992_u64), "9007199254740992"),
        (json!(9007199254740993_u64), "9007199254740993n"),
        (json!(-9007199254740993_i64), "-9007199254740993n"),
        // 2^60 is a double: written as RFC 8785 writes that double.
        (json!(1152921504606846976_u64), "1152921504606847000"),
        // Its RFC 8785 text read as an integer is another number.
        (json!(1152921504606847000_u64), "1152921504606847000n"),
        (json!(u64::MAX), "18446744073709551615n"),
        // -2^63 is a double.
        (json!(i64::MIN), "-9223372036854776000"),
        (
            json!("\u{0}\u{1f}\"\\/\u{7f}\u{2028}"),
            r#""\u0000\u001f\"\\/\u{7f}\u{2028}""#,
        ),
        (json!("\u{8}\t\n\u{c}\r"), r#""\b\t\n\f\r""#),
    ] {
        let expected = expected
            .replace("\\u{7f}", "\u{7f}")
            .replace("\\u{2028}", "\u{2028}");
        assert_eq!(text(&value), expected, "{value}");
    }
}

#[test]
fn members_sort_by_utf16_code_units() {
    // U+E000 sorts after U+1F600 in UTF-16 (a surrogate pair starts with
    // 0xD83D) and before it in UTF-8.
    let value = json!({"\u{e000}": 1, "\u{1f600}": 2, "a": 3, "ab": 4, "": 5, "é": 6});
    assert_eq!(text(&value), jcs(&value));
    assert_eq!(
        text(&value),
        "{\"\":5,\"a\":3,\"ab\":4,\"é\":6,\"\u{1f600}\":2,\"\u{e000}\":1}"
    );
}

#[test]
fn the_left_out_member_is_left_out_wherever_it_sorts() {
    let value = json!({"a": 1, "request_id": "k", "z": [2]});
    let Value::Object(members) = &value else {
        unreachable!()
    };
    let mut out = Vec::new();
    write_object(members, Some("request_id"), &mut out);
    assert_eq!(out, br#"{"a":1,"z":[2]}"#);
    let mut out = Vec::new();
    write_object(members, Some("absent"), &mut out);
    assert_eq!(out, br#"{"a":1,"request_id":"k","z":[2]}"#);
}

/// A random JSON value of at most `depth` levels, from pools that make
/// strings, keys and numbers likely to meet at the edges.
fn random_value(rng: &mut fastrand::Rng, depth: u32) -> Value {
    let strings = [
        "",
        "a",
        "\u{0}",
        "\u{1f}",
        "\"",
        "\\",
        "/",
        "\u{7f}",
        "\u{e000}",
        "\u{1f600}",
        "é",
        "\u{2028}",
        "1",
        "1e20",
    ];
    match rng.u32(0..if depth == 0 { 4 } else { 6 }) {
        0 => [Value::Null, json!(true), json!(false)][rng.usize(0..3)].clone(),
        1 => match rng.u32(0..3) {
            0 => json!(rng.i64(-(1 << 53)..=1 << 53)),
            // Beyond 2^53, integers a double holds (11 significant bits).
            1 => json!(rng.u64(1..1 << 11) << 53),
            _ => json!(-(rng.i64(1..1 << 10) << 53)),
        },
        2 => loop {
            let double = f64::from_bits(rng.u64(..));
            if double.is_finite() {
                break json!(double);
            }
        },
        3 => {
            let length = rng.usize(0..4);
            Value::String(
                (0..length)
                    .map(|_| strings[rng.usize(0..strings.len())])
                    .collect(),
            )
        }
        4 => Value::Array(
            (0..rng.usize(0..4))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.usize(0..5))
                .map(|_| {
                    let name = strings[rng.usize(0..strings.len())].to_owned();
                    (name, random_value(rng, depth - 1))
                })
                .collect(),
        ),
    }
}

#[test]
fn without_unheld_integers_the_text_is_rfc_8785s() {
    let mut rng = fastrand::Rng::with_seed(8785);
    for _ in 0..20_000 {
        let value = random_value(&mut rng, 3);
        assert_eq!(text(&value), jcs(&value), "{value}");
    }
    // So the digests made before integers kept their digits still hold.
    let arguments = json!({"text": "x", "n": 1.5, "request_id": "k"});
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let mut without = arguments.clone();
    without.remove("request_id");
    assert_eq!(
        arguments_digest(Some(&arguments), Some("request_id")),
        crate::fingerprint::digest(&without)
    );
    assert_eq!(
        arguments_digest(None, None),
        crate::fingerprint::digest(&json!({}))
    );
}

#[test]
fn only_doubles_of_2_to_the_63_or_more_may_be_rounded() {
    let number = |text: &str| match serde_json::from_str::<Value>(text).unwrap() {
        Value::Number(number) => number,
        other => panic!("{other}"),
    };
    for rounded in [
        "100000000000000000001",
        "18446744073709551616",
        "-9223372036854775809",
        "1e20",
        "9223372036854775808.0",
        "-1e300",
    ] {
        assert!(may_be_rounded(&number(rounded)), "{rounded}");
    }
    for exact in [
        "18446744073709551615",
        "-9223372036854775808",
        "9223372036854775807",
        "9.2e18",
        "1.5",
        "-0",
        "0",
    ] {
        assert!(!may_be_rounded(&number(exact)), "{exact}");
    }
}
