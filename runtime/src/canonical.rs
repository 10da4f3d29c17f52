//! The canonical JSON text that a call's arguments are compared by, and
//! its digest: RFC 8785 (the JSON Canonicalization Scheme), except for
//! integers that no double holds exactly, which keep their digits.
//!
//! RFC 8785 writes every number as the IEEE double it reads as, so
//! `9007199254740993` and `9007199254740992` (2^53 + 1 and 2^53) are one
//! number to it; for the arguments of a payment they are two accounts. Here
//! an integer the parser kept exactly (`serde_json` keeps every integer
//! that fits `u64` or `i64`) and that no double holds is written with its
//! digits and a trailing `n`, as JavaScript writes a BigInt:
//! `9007199254740993n`. No RFC 8785 text has a letter after a number's
//! digits and every string is quoted, so the text of distinct values
//! differs; and where no such integer occurs the text is RFC 8785's, byte
//! for byte, so every digest made before integers kept their digits is
//! still the same.
//!
//! Two values have one text exactly when they are equal as JSON values
//! whose numbers are compared by their mathematical value: object members
//! in any order, `1` and `1.0`, `0` and `-0`, and an integer and the double
//! of the same value (`1152921504606846976` and `1.152921504606846976e18`)
//! are equal. A fraction or exponent form is the double the parser read
//! (RFC 8259 §6 leaves the precision to the parser), so `0.1` and
//! `0.10000000000000000001` are one number, and so would be two integers
//! beyond 64 bits, which `serde_json` reads as doubles:
//! [`Idempotency::prepare`](crate::idempotency::Idempotency::prepare)
//! refuses those in a keyed call rather than let one stand for the other.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// The canonical text of `value` (see the [module](self)), appended to
/// `out`: RFC 8785, members sorted by the UTF-16 code units of their names,
/// no whitespace, integers no double holds written with their digits and a
/// trailing `n`.
pub fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(number, out),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push(b'[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(members) => write_object(members, None, out),
    }
}

/// `sha256:` and the 64 lowercase hex digits of SHA-256 over the canonical
/// text (see the [module](self)) of the object `arguments` without its
/// member `left_out`; no arguments is `{}`.
///
/// For arguments without an integer beyond 2^53 that no double holds, this
/// is [`fingerprint::digest`](crate::fingerprint::digest) of the same
/// object.
pub fn arguments_digest(arguments: Option<&Map<String, Value>>, left_out: Option<&str>) -> String {
    let mut text = String::with_capacity(SHA256_TEXT_LEN);
    let _ = push_arguments_digest(arguments, left_out, &mut text);
    text
}

/// [`arguments_digest`], appended to `out`; the hash's bytes.
pub(crate) fn push_arguments_digest(
    arguments: Option<&Map<String, Value>>,
    left_out: Option<&str>,
    out: &mut String,
) -> [u8; 32] {
    let hash: [u8; 32] = crate::scratch::with(|text| {
        match arguments {
            Some(arguments) => write_object(arguments, left_out, text),
            None => text.extend_from_slice(b"{}"),
        }
        Sha256::digest(&*text).into()
    });
    push_sha256_text(&hash, out);
    hash
}

/// Whether `number` is held as a double of 2^63 or more in magnitude, and
/// so may be an integer beyond 64 bits that the parser rounded:
/// `serde_json` keeps an integer exactly only when it fits `u64` or `i64`,
/// and reads `100000000000000000001` as the double `1e20`, as it reads
/// `1e20` itself.
pub fn may_be_rounded(number: &Number) -> bool {
    const BOUND: f64 = 9_223_372_036_854_775_808.0; // 2^63
    number.is_f64() && number.as_f64().is_some_and(|double| double.abs() >= BOUND)
}

/// The length of [`sha256_text`]'s text: `sha256:` and 64 digits.
pub(crate) const SHA256_TEXT_LEN: usize = 7 + 64;

/// `sha256:` and the hash's 64 lowercase hex digits.
pub(crate) fn sha256_text(hash: &[u8; 32]) -> String {
    let mut text = String::with_capacity(SHA256_TEXT_LEN);
    push_sha256_text(hash, &mut text);
    text
}

/// [`sha256_text`], appended to `out`.
pub(crate) fn push_sha256_text(hash: &[u8; 32], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0; 64];
    for (pair, byte) in digits.chunks_exact_mut(2).zip(hash) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
    out.push_str("sha256:");
    // Hex digits only: ASCII.
    out.push_str(std::str::from_utf8(&digits).unwrap_or_default());
}

/// The 32 bytes of a digest [`sha256_text`] wrote; `None` for any other
/// text (uppercase hex included, so that the bytes write back as the text).
pub(crate) fn sha256_bytes(text: &str) -> Option<[u8; 32]> {
    let hex = text.strip_prefix("sha256:")?.as_bytes();
    // Checked all at once, without a branch per digit: `0-9` and `a-f`.
    let lowercase_hex = hex.len() == 64
        && hex.iter().fold(true, |all, digit| {
            all & (digit.is_ascii_digit() | (b'a'..=b'f').contains(digit))
        });
    if !lowercase_hex {
        return None;
    }
    // A digit's low four bits, plus 9 for a letter (`a` is 0x61).
    let value = |digit: u8| (digit & 0xf) + 9 * (digit >> 6);
    let mut bytes = [0; 32];
    for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = value(pair[0]) << 4 | value(pair[1]);
    }
    Some(bytes)
}

fn write_object(members: &Map<String, Value>, left_out: Option<&str>, out: &mut Vec<u8>) {
    let kept = |(name, _): &(&String, &Value)| Some(name.as_str()) != left_out;
    // serde_json's map is sorted by code point (or, with its
    // `preserve_order` feature on anywhere in the build, in the order
    // read); RFC 8785 sorts by UTF-16 code unit. The two orders differ only
    // between a character of U+E000..=U+FFFF and one beyond U+FFFF, so the
    // map's own order serves whenever it already is RFC 8785's.
    let mut names = members
        .keys()
        .filter(|name| Some(name.as_str()) != left_out);
    let in_order = match names.next() {
        None => true,
        Some(first) => names
            .try_fold(first, |before, name| {
                (utf16_order(before, name) == Ordering::Less).then_some(name)
            })
            .is_some(),
    };
    out.push(b'{');
    let mut member = |n: usize, (name, value): (&String, &Value)| {
        if n > 0 {
            out.push(b',');
        }
        write_string(name, out);
        out.push(b':');
        write(value, out);
    };
    if in_order {
        members
            .iter()
            .filter(kept)
            .enumerate()
            .for_each(|(n, entry)| member(n, entry));
    } else {
        let mut sorted: Vec<(&String, &Value)> = members.iter().filter(kept).collect();
        sorted.sort_unstable_by(|(a, _), (b, _)| utf16_order(a, b));
        sorted
            .into_iter()
            .enumerate()
            .for_each(|(n, entry)| member(n, entry));
    }
    out.push(b'}');
}

/// `a` against `b` by their UTF-16 code units (RFC 8785 §3.2.3).
fn utf16_order(a: &str, b: &str) -> Ordering {
    let same = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    // The first character that differs starts at or before `same`.
    let mut start = same;
    while !a.is_char_boundary(start) {
        start -= 1;
    }
    match (a[start..].chars().next(), b[start..].chars().next()) {
        (Some(x), Some(y)) => {
            let (mut x16, mut y16) = ([0; 2], [0; 2]);
            (*x.encode_utf16(&mut x16)).cmp(&*y.encode_utf16(&mut y16))
        }
        _ => a.len().cmp(&b.len()),
    }
}

/// A string as RFC 8785 §3.2.2.2 writes it (as ECMAScript's
/// `JSON.stringify` does): `"` and `\` escaped, the control characters
/// below U+0020 as `\b`, `\t`, `\n`, `\f`, `\r` or `\u00xx`, every other
/// character as itself: byte for byte what serde_json writes for a string,
/// which record keys, written with it, rely on.
pub(crate) fn write_string(text: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut plain = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0c => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ],
            _ => continue,
        };
        out.extend_from_slice(&bytes[plain..at]);
        out.extend_from_slice(escape);
        plain = at + 1;
    }
    out.extend_from_slice(&bytes[plain..]);
    out.push(b'"');
}

fn write_number(number: &Number, out: &mut Vec<u8>) {
    if let Some(integer) = number.as_u64() {
        write_integer(i128::from(integer), out);
    } else if let Some(integer) = number.as_i64() {
        write_integer(i128::from(integer), out);
    } else if let Some(double) = number.as_f64() {
        write_double(double, out);
    }
}

/// An integer: as the double of the same value when there is one (every
/// integer up to 2^53 in magnitude has one), else its digits and `n`.
fn write_integer(integer: i128, out: &mut Vec<u8>) {
    const SAFE: i128 = 1 << 53;
    if (-SAFE..=SAFE).contains(&integer) {
        // The digits are RFC 8785's text of the double.
        out.extend_from_slice(itoa::Buffer::new().format(integer).as_bytes());
        return;
    }
    // Beyond 2^53 a cast rounds, and casting back tells whether it did (an
    // i128 holds every double of a u64 or i64, 2^64 included).
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let double = integer as f64;
    #[allow(clippy::cast_possible_truncation)]
    if double as i128 == integer {
        write_double(double, out);
    } else {
        out.extend_from_slice(itoa::Buffer::new().format(integer).as_bytes());
        out.push(b'n');
    }
}

/// A double as ECMAScript's `Number.prototype.toString` writes it (RFC
/// 8785 §3.2.2.3): the shortest digits that read back as it, `-0` as `0`.
/// A JSON value holds no NaN or infinity.
fn write_double(double: f64, out: &mut Vec<u8>) {
    if double.is_finite() {
        out.extend_from_slice(ryu_js::Buffer::new().format_finite(double).as_bytes());
    }
}

#[cfg(test)]
mod tests;
