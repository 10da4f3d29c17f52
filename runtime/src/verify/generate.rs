//! Arguments from a tool's `inputSchema`: values of the JSON Schema subset
//! tools use (types, `enum`, `const`, `required`, bounds, `anyOf`/`oneOf`/
//! `allOf`, local `$ref`s), drawn so that calls meet each other's state.
//!
//! Strings come from a small vocabulary or from a pool of the strings a run
//! has seen (earlier arguments, the snapshots), half the time each: a
//! delete then names what a create made, and an update finds its record.
//! What the subset cannot express (`pattern`, `format` beyond a few,
//! `not`) is left to the server to refuse; a schema no value can meet
//! (`false`, an empty `enum`, a minimum above the maximum) is an
//! [`Unsatisfiable`] error naming where. So is one whose every value is
//! larger than the bounds of a draw: [`MAX_STRING_CHARS`] per string,
//! [`MAX_ITEMS`] per array, [`MAX_ARGUMENT_BYTES`] per argument set.

use mcp_hints_core::escape;
use serde_json::{Map, Number, Value};

/// Depth past which optional members and extra items are left out, so a
/// recursive schema (a tree of `$ref`s) still yields a value.
const MINIMAL_DEPTH: usize = 6;

/// Depth past which a schema counts as unsatisfiable: a `$ref` cycle with a
/// required member on every step has no finite value.
const MAX_DEPTH: usize = 24;

/// The most subschemas one draw visits: `anyOf` branches tried in turn
/// multiply, so a hostile schema (a `$ref` to an `anyOf` of itself) would
/// otherwise take exponential time before any call is made.
const MAX_VISITS: usize = 20_000;

/// The longest string drawn, in characters: a `minLength` above it is a
/// schema no drawn value meets (a server that asks for 4e9 characters
/// would otherwise have them allocated, and sent on every call).
pub(crate) const MAX_STRING_CHARS: u64 = 65_536;

/// The most items of one array drawn: a `minItems` above it is a schema no
/// drawn value meets.
pub(crate) const MAX_ITEMS: u64 = 1_000;

/// The most bytes of one drawn argument set (its strings, and a few bytes
/// per member, item and scalar): a draw that would pass it is given up,
/// as one no value meets.
pub(crate) const MAX_ARGUMENT_BYTES: usize = 1 << 20;

/// The strings a run draws from besides its pool.
const WORDS: [&str; 8] = [
    "alpha", "beta", "gamma", "delta", "note", "item-1", "item-2", "x",
];

/// How many distinct strings a pool keeps (the newest).
const POOL_SIZE: usize = 64;

/// Why no value meets a schema: the JSON pointer of the subschema within
/// `inputSchema`, and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unsatisfiable {
    pub(crate) at: String,
    pub(crate) reason: String,
}

impl std::fmt::Display for Unsatisfiable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.at.is_empty() { "/" } else { &self.at };
        write!(f, "at {at}: {}", self.reason)
    }
}

/// The strings seen in one run, newest last.
#[derive(Default)]
pub(crate) struct Pool {
    strings: Vec<String>,
}

impl Pool {
    /// Takes in every string of `value`, object keys included.
    pub(crate) fn absorb(&mut self, value: &Value) {
        match value {
            Value::String(text) => self.add(text),
            Value::Array(items) => items.iter().for_each(|item| self.absorb(item)),
            Value::Object(map) => {
                for (key, member) in map {
                    self.add(key);
                    self.absorb(member);
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, text: &str) {
        // Long texts (a whole document) never make a useful name.
        if text.is_empty() || text.len() > 200 {
            return;
        }
        if let Some(at) = self.strings.iter().position(|known| known == text) {
            let known = self.strings.remove(at);
            self.strings.push(known);
            return;
        }
        if self.strings.len() == POOL_SIZE {
            self.strings.remove(0);
        }
        self.strings.push(text.to_owned());
    }
}

/// Draws values for one schema document (`root`, against which `$ref`s
/// resolve).
pub(crate) struct Generator<'a> {
    root: &'a Value,
    rng: &'a mut fastrand::Rng,
    pool: &'a Pool,
    visits: usize,
    /// Bytes drawn so far, as [`MAX_ARGUMENT_BYTES`] counts them.
    size: usize,
}

impl<'a> Generator<'a> {
    pub(crate) fn new(root: &'a Value, rng: &'a mut fastrand::Rng, pool: &'a Pool) -> Self {
        Generator {
            root,
            rng,
            pool,
            visits: 0,
            size: 0,
        }
    }

    /// A value of the whole schema: a tool's arguments object.
    pub(crate) fn arguments(&mut self) -> Result<Map<String, Value>, Unsatisfiable> {
        // Arguments are always an object: a root that says nothing of its
        // type (`{}`, only `additionalProperties`) is an object schema.
        let root = match self.root {
            Value::Object(schema)
                if !schema.contains_key("type")
                    && !schema.contains_key("$ref")
                    && !["anyOf", "oneOf", "allOf", "enum", "const"]
                        .iter()
                        .any(|key| schema.contains_key(*key)) =>
            {
                let mut schema = schema.clone();
                schema.insert("type".to_owned(), Value::String("object".to_owned()));
                Value::Object(schema)
            }
            Value::Bool(true) => serde_json::json!({"type": "object"}),
            other => other.clone(),
        };
        match self.value(&root, String::new(), 0)? {
            Value::Object(map) => Ok(map),
            other => Err(Unsatisfiable {
                at: String::new(),
                reason: format!(
                    "arguments must be an object, but the schema yields {}",
                    crate::hints::json_type(&other)
                ),
            }),
        }
    }

    fn value(&mut self, schema: &Value, at: String, depth: usize) -> Result<Value, Unsatisfiable> {
        let fail = |reason: String| Unsatisfiable {
            at: at.clone(),
            reason,
        };
        self.visits += 1;
        // A few bytes for each value's own syntax (a member's name is its
        // property's, counted with the schema it comes from).
        self.grow(8).map_err(fail)?;
        if self.visits > MAX_VISITS {
            return Err(fail(format!(
                "no value found within {MAX_VISITS} subschemas (nested `anyOf`/`oneOf` branches multiply)"
            )));
        }
        if depth > MAX_DEPTH {
            return Err(fail(format!(
                "nested more than {MAX_DEPTH} deep (a $ref cycle no value ends)"
            )));
        }
        let schema = match schema {
            Value::Bool(true) => return Ok(self.string(None, None)),
            Value::Bool(false) => return Err(fail("the schema is `false`".to_owned())),
            Value::Object(schema) => schema,
            other => {
                return Err(fail(format!(
                    "a schema must be an object or a boolean, not {}",
                    crate::hints::json_type(other)
                )));
            }
        };
        if let Some(reference) = schema.get("$ref") {
            let target = self.resolve(reference).map_err(fail)?;
            return self.value(target, at.clone(), depth + 1);
        }
        if let Some(not) = schema.get("not")
            && (not == &Value::Bool(true) || not.as_object().is_some_and(Map::is_empty))
        {
            return Err(fail("`not` of a schema every value meets".to_owned()));
        }
        if let Some(constant) = schema.get("const") {
            self.grow(approximate_size(constant)).map_err(fail)?;
            return Ok(constant.clone());
        }
        if let Some(choices) = schema.get("enum") {
            let Some(choices) = choices.as_array() else {
                return Err(fail("`enum` is not an array".to_owned()));
            };
            if choices.is_empty() {
                return Err(fail("`enum` is empty".to_owned()));
            }
            let choice = &choices[self.rng.usize(..choices.len())];
            self.grow(approximate_size(choice)).map_err(fail)?;
            return Ok(choice.clone());
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(branches) = schema.get(keyword) {
                return self.branch(schema, keyword, branches, &at, depth);
            }
        }
        if let Some(parts) = schema.get("allOf") {
            let merged = merge_all_of(schema, parts).map_err(fail)?;
            return self.value(&merged, at.clone(), depth + 1);
        }
        let kind = self.kind(schema).map_err(fail)?;
        match kind {
            "null" => Ok(Value::Null),
            "boolean" => Ok(Value::Bool(self.rng.bool())),
            "integer" => self.integer(schema).map_err(fail),
            "number" => self.number(schema).map_err(fail),
            "string" => {
                let (min, max) = (count(schema, "minLength"), count(schema, "maxLength"));
                if let (Some(min), Some(max)) = (min, max)
                    && min > max
                {
                    return Err(fail(format!("minLength {min} is above maxLength {max}")));
                }
                if let Some(min) = min
                    && min > MAX_STRING_CHARS
                {
                    return Err(fail(format!(
                        "minLength {min} is above the longest string verify draws \
                         ({MAX_STRING_CHARS} characters)"
                    )));
                }
                let value = self.string_of_format(schema, min, max);
                let length = value.as_str().map_or(0, str::len);
                self.grow(length).map_err(fail)?;
                Ok(value)
            }
            "array" => self.array(schema, &at, depth),
            "object" => self.object(schema, &at, depth),
            other => Err(fail(format!("unknown type {}", escape::quoted(other)))),
        }
    }

    /// One branch of `anyOf`/`oneOf` that yields a value, tried in a random
    /// order. Members beside the keyword (a `type`, `properties`) apply to
    /// every branch, as in JSON Schema, so they are merged in.
    fn branch(
        &mut self,
        schema: &Map<String, Value>,
        keyword: &str,
        branches: &Value,
        at: &str,
        depth: usize,
    ) -> Result<Value, Unsatisfiable> {
        let Some(branches) = branches.as_array() else {
            return Err(Unsatisfiable {
                at: at.to_owned(),
                reason: format!("`{keyword}` is not an array"),
            });
        };
        let mut order: Vec<usize> = (0..branches.len()).collect();
        self.rng.shuffle(&mut order);
        let mut last = Unsatisfiable {
            at: at.to_owned(),
            reason: format!("`{keyword}` has no branch"),
        };
        let mut rest = schema.clone();
        rest.remove(keyword);
        for index in order {
            let branch = match (&branches[index], rest.is_empty()) {
                (branch, true) => branch.clone(),
                (Value::Object(branch), false) => {
                    let mut merged = rest.clone();
                    merged.extend(branch.clone());
                    Value::Object(merged)
                }
                (branch, false) => branch.clone(),
            };
            let size = self.size;
            match self.value(&branch, format!("{at}/{keyword}/{index}"), depth + 1) {
                Ok(value) => return Ok(value),
                Err(error) => {
                    self.size = size;
                    last = error;
                }
            }
        }
        Err(last)
    }

    fn resolve(&self, reference: &Value) -> Result<&'a Value, String> {
        let Some(reference) = reference.as_str() else {
            return Err("`$ref` is not a string".to_owned());
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(format!(
                "`$ref` {} points outside the schema (only local `#/...` references are followed)",
                escape::quoted(reference)
            ));
        };
        self.root
            .pointer(pointer)
            .ok_or_else(|| format!("`$ref` {} points at nothing", escape::quoted(reference)))
    }

    /// The `type` to draw: the one given, one of a list, or what the other
    /// keywords imply.
    fn kind(&mut self, schema: &Map<String, Value>) -> Result<&'static str, String> {
        const KINDS: [&str; 7] = [
            "null", "boolean", "integer", "number", "string", "array", "object",
        ];
        let known = |name: &str| KINDS.into_iter().find(|kind| *kind == name);
        match schema.get("type") {
            Some(Value::String(name)) => {
                known(name).ok_or_else(|| format!("unknown type {}", escape::quoted(name)))
            }
            Some(Value::Array(names)) => {
                let names: Vec<&'static str> = names
                    .iter()
                    .filter_map(Value::as_str)
                    .filter_map(known)
                    .collect();
                if names.is_empty() {
                    return Err("`type` lists no known type".to_owned());
                }
                // null only when it is all there is: a null in place of a
                // value checks little.
                let useful: Vec<&'static str> = names
                    .iter()
                    .copied()
                    .filter(|kind| *kind != "null")
                    .collect();
                let names = if useful.is_empty() { names } else { useful };
                Ok(names[self.rng.usize(..names.len())])
            }
            Some(other) => Err(format!(
                "`type` is {}, not a string or an array",
                crate::hints::json_type(other)
            )),
            None if schema.contains_key("properties") || schema.contains_key("required") => {
                Ok("object")
            }
            None if schema.contains_key("items") => Ok("array"),
            None if schema.contains_key("minimum") || schema.contains_key("maximum") => {
                Ok("number")
            }
            None => Ok("string"),
        }
    }

    fn integer(&mut self, schema: &Map<String, Value>) -> Result<Value, String> {
        let (low, high) = bounds(schema)?;
        let low = low.map(f64::ceil);
        let high = high.map(f64::floor);
        let (low, high) = match (low, high) {
            (Some(low), Some(high)) if low > high => {
                return Err(format!("no integer lies between {low} and {high}"));
            }
            (Some(low), Some(high)) => (low, high),
            (Some(low), None) => (low, low + 5.0),
            (None, Some(high)) => (high.min(5.0) - 5.0, high.min(5.0)),
            (None, None) => (0.0, 5.0),
        };
        // Small values near the lower bound mostly: they meet each other
        // (ids, counts); the bounds themselves now and then.
        let value = match self.rng.u8(..8) {
            0 => low,
            1 => high,
            _ => low + (self.rng.f64() * (high - low).min(5.0)).floor(),
        };
        let value = value.clamp(low, high);
        if value.abs() < 9_007_199_254_740_992.0 {
            Ok(Value::Number(Number::from(value as i64)))
        } else {
            Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
        }
    }

    fn number(&mut self, schema: &Map<String, Value>) -> Result<Value, String> {
        let (low, high) = bounds(schema)?;
        let (low, high) = match (low, high) {
            (Some(low), Some(high)) if low > high => {
                return Err(format!("no number lies between {low} and {high}"));
            }
            (Some(low), Some(high)) => (low, high),
            (Some(low), None) => (low, low + 10.0),
            (None, Some(high)) => (high - 10.0, high),
            (None, None) => (0.0, 10.0),
        };
        let value = if self.rng.bool() {
            (low + self.rng.f64() * (high - low)).clamp(low, high)
        } else {
            (low + (self.rng.f64() * (high - low)).floor()).clamp(low, high)
        };
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn string_of_format(
        &mut self,
        schema: &Map<String, Value>,
        min: Option<u64>,
        max: Option<u64>,
    ) -> Value {
        let formatted = match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => Some("2026-07-28T12:00:00Z"),
            Some("date") => Some("2026-07-28"),
            Some("time") => Some("12:00:00Z"),
            Some("email") => Some("someone@example.com"),
            Some("uri" | "url" | "iri") => Some("https://example.com/a"),
            Some("uuid") => Some("6f1c2a0e-8b7d-4c3e-9a21-5d4b3c2a1f00"),
            Some("ipv4") => Some("127.0.0.1"),
            Some("ipv6") => Some("::1"),
            Some("hostname") => Some("localhost"),
            _ => None,
        };
        match formatted {
            Some(text) => Value::String(text.to_owned()),
            None => self.string(min, max),
        }
    }

    /// Counts `bytes` more drawn; the reason, past [`MAX_ARGUMENT_BYTES`].
    fn grow(&mut self, bytes: usize) -> Result<(), String> {
        self.size = self.size.saturating_add(bytes);
        if self.size > MAX_ARGUMENT_BYTES {
            return Err(format!(
                "the arguments would be larger than the most verify draws \
                 ({MAX_ARGUMENT_BYTES} bytes)"
            ));
        }
        Ok(())
    }

    fn string(&mut self, min: Option<u64>, max: Option<u64>) -> Value {
        let mut text = if !self.pool.strings.is_empty() && self.rng.bool() {
            self.pool.strings[self.rng.usize(..self.pool.strings.len())].clone()
        } else {
            WORDS[self.rng.usize(..WORDS.len())].to_owned()
        };
        let length = text.chars().count() as u64;
        if let Some(min) = min
            && length < min
        {
            let missing = (min - length) as usize;
            text.extend(std::iter::repeat_n('x', missing));
        }
        if let Some(max) = max
            && text.chars().count() as u64 > max
        {
            text = text.chars().take(max as usize).collect();
        }
        Value::String(text)
    }

    fn array(
        &mut self,
        schema: &Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<Value, Unsatisfiable> {
        let min = count(schema, "minItems").unwrap_or(0);
        let max = count(schema, "maxItems");
        if let Some(max) = max
            && min > max
        {
            return Err(Unsatisfiable {
                at: at.to_owned(),
                reason: format!("minItems {min} is above maxItems {max}"),
            });
        }
        if min > MAX_ITEMS {
            return Err(Unsatisfiable {
                at: at.to_owned(),
                reason: format!(
                    "minItems {min} is above the most items verify draws in an array \
                     ({MAX_ITEMS})"
                ),
            });
        }
        let spare = if depth >= MINIMAL_DEPTH { 0 } else { 3 };
        let top = max.unwrap_or(u64::MAX).min(min.saturating_add(spare));
        // An empty array checks little: one item at least, where allowed.
        let low = if top > 0 { min.max(1) } else { 0 };
        let length = if top > low {
            self.rng.u64(low..=top)
        } else {
            low
        };
        let unique = schema.get("uniqueItems") == Some(&Value::Bool(true));
        let mut items = Vec::new();
        let item_schema = |index: usize| -> (Value, String) {
            if let Some(Value::Array(tuple)) = schema.get("prefixItems")
                && let Some(item) = tuple.get(index)
            {
                return (item.clone(), format!("{at}/prefixItems/{index}"));
            }
            match schema.get("items") {
                Some(item) => (item.clone(), format!("{at}/items")),
                None => (Value::Bool(true), format!("{at}/items")),
            }
        };
        let mut tries = 0;
        while (items.len() as u64) < length {
            let (item, item_at) = item_schema(items.len());
            let value = self.value(&item, item_at, depth + 1)?;
            tries += 1;
            if unique && items.contains(&value) {
                // Few distinct values (an enum of two): take fewer items,
                // unless minItems needs them.
                if tries > 16 {
                    if (items.len() as u64) < min {
                        return Err(Unsatisfiable {
                            at: at.to_owned(),
                            reason: format!("no {min} distinct items found"),
                        });
                    }
                    break;
                }
                continue;
            }
            items.push(value);
        }
        Ok(Value::Array(items))
    }

    fn object(
        &mut self,
        schema: &Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<Value, Unsatisfiable> {
        let empty = Map::new();
        let properties = match schema.get("properties") {
            None => &empty,
            Some(Value::Object(properties)) => properties,
            Some(_) => {
                return Err(Unsatisfiable {
                    at: at.to_owned(),
                    reason: "`properties` is not an object".to_owned(),
                });
            }
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut object = Map::new();
        for (name, property) in properties {
            let needed = required.contains(&name.as_str());
            if !needed && (depth >= MINIMAL_DEPTH || self.rng.bool()) {
                continue;
            }
            let property_at = format!("{at}/properties/{}", escape_pointer(name));
            let size = self.size;
            match self.value(property, property_at, depth + 1) {
                Ok(value) => {
                    object.insert(name.clone(), value);
                }
                Err(error) if needed => return Err(error),
                // Left out: what it drew is not sent.
                Err(_) => self.size = size,
            }
        }
        for name in required {
            if !object.contains_key(name) {
                // Required but not described: any value will do.
                let value = self.string(None, None);
                object.insert(name.to_owned(), value);
            }
        }
        Ok(Value::Object(object))
    }
}

/// `allOf`: the parts' object keywords merged into one schema (properties
/// and required lists joined; for other keywords the first part that gives
/// one wins). Exact for the object schemas tools use.
fn merge_all_of(schema: &Map<String, Value>, parts: &Value) -> Result<Value, String> {
    let Some(parts) = parts.as_array() else {
        return Err("`allOf` is not an array".to_owned());
    };
    let mut merged = schema.clone();
    merged.remove("allOf");
    for part in parts {
        let part = match part {
            Value::Bool(true) => continue,
            Value::Bool(false) => return Err("an `allOf` part is `false`".to_owned()),
            Value::Object(part) => part,
            _ => return Err("an `allOf` part is not a schema".to_owned()),
        };
        for (keyword, value) in part {
            match (keyword.as_str(), merged.get_mut(keyword)) {
                ("properties", Some(Value::Object(known))) => {
                    if let Value::Object(more) = value {
                        known.extend(more.clone());
                    }
                }
                ("required", Some(Value::Array(known))) => {
                    if let Value::Array(more) = value {
                        known.extend(more.iter().cloned());
                    }
                }
                (_, Some(_)) => {}
                (_, None) => {
                    merged.insert(keyword.clone(), value.clone());
                }
            }
        }
    }
    Ok(Value::Object(merged))
}

/// The inclusive bounds of a number schema (exclusive ones nudged inward).
fn bounds(schema: &Map<String, Value>) -> Result<(Option<f64>, Option<f64>), String> {
    let number = |keyword: &str| schema.get(keyword).and_then(Value::as_f64);
    let mut low = number("minimum");
    let mut high = number("maximum");
    // Draft 6 and later: exclusive bounds are numbers.
    if let Some(bound) = number("exclusiveMinimum") {
        let bound = bound + bound.abs().max(1.0) * 1e-9;
        low = Some(low.map_or(bound, |low| low.max(bound)));
    }
    if let Some(bound) = number("exclusiveMaximum") {
        let bound = bound - bound.abs().max(1.0) * 1e-9;
        high = Some(high.map_or(bound, |high| high.min(bound)));
    }
    match (low, high) {
        (Some(low), Some(high)) if low > high => {
            Err(format!("minimum {low} is above maximum {high}"))
        }
        bounds => Ok(bounds),
    }
}

/// Roughly the bytes of `value` as JSON (strings by their length, 8 for
/// anything else), without writing it out.
fn approximate_size(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(approximate_size).sum::<usize>() + 2,
        Value::Object(members) => {
            members
                .iter()
                .map(|(key, member)| key.len() + 3 + approximate_size(member))
                .sum::<usize>()
                + 2
        }
        _ => 8,
    }
}

fn count(schema: &Map<String, Value>, keyword: &str) -> Option<u64> {
    schema.get(keyword).and_then(Value::as_u64)
}

/// One reference token of a JSON pointer (RFC 6901).
pub(crate) fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn draw(schema: Value, seed: u64) -> Result<Map<String, Value>, Unsatisfiable> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let pool = Pool::default();
        Generator::new(&schema, &mut rng, &pool).arguments()
    }

    #[test]
    fn values_meet_types_bounds_enums_and_required() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 3, "maxLength": 5},
                "count": {"type": "integer", "minimum": 10, "maximum": 12},
                "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "kind": {"enum": ["a", "b"]},
                "fixed": {"const": 7},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
                "on": {"type": "boolean"},
            },
            "required": ["name", "count", "ratio", "kind", "fixed", "tags", "on"],
        });
        for seed in 0..200 {
            let value = draw(schema.clone(), seed).unwrap();
            let name = value["name"].as_str().unwrap();
            assert!((3..=5).contains(&name.chars().count()), "{name}");
            let count = value["count"].as_i64().unwrap();
            assert!((10..=12).contains(&count), "{count}");
            let ratio = value["ratio"].as_f64().unwrap();
            assert!(ratio > 0.0 && ratio <= 1.0, "{ratio}");
            assert!(["a", "b"].contains(&value["kind"].as_str().unwrap()));
            assert_eq!(value["fixed"], 7);
            assert_eq!(value["tags"].as_array().unwrap().len(), 2);
            assert!(value["on"].is_boolean());
        }
    }

    #[test]
    fn optional_members_come_and_go() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let present = (0..100)
            .filter(|seed| draw(schema.clone(), *seed).unwrap().contains_key("a"))
            .count();
        assert!((20..80).contains(&present), "{present}");
    }

    #[test]
    fn refs_any_of_and_all_of_are_followed() {
        let schema = json!({
            "type": "object",
            "$defs": {"entity": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
            "properties": {
                "entities": {"type": "array", "items": {"$ref": "#/$defs/entity"}},
                "either": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "both": {"allOf": [
                    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                    {"properties": {"y": {"type": "boolean"}}, "required": ["y"]},
                ]},
            },
            "required": ["entities", "either", "both"],
        });
        for seed in 0..50 {
            let value = draw(schema.clone(), seed).unwrap();
            for entity in value["entities"].as_array().unwrap() {
                assert!(entity["name"].is_string(), "{entity}");
            }
            assert!(value["either"].is_i64() || value["either"].is_null());
            assert!(value["both"]["x"].is_i64() && value["both"]["y"].is_boolean());
        }
    }

    #[test]
    fn a_recursive_schema_still_ends() {
        let schema = json!({
            "type": "object",
            "$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["children"]}},
            "properties": {"root": {"$ref": "#/$defs/node"}},
            "required": ["root"],
        });
        for seed in 0..20 {
            draw(schema.clone(), seed).unwrap();
        }
    }

    #[test]
    fn schemas_no_value_meets_say_where() {
        let cases = [
            (
                json!({"type": "object", "properties": {"a": false}, "required": ["a"]}),
                "/properties/a",
                "`false`",
            ),
            (
                json!({"type": "object", "properties": {"a": {"enum": []}}, "required": ["a"]}),
                "/properties/a",
                "`enum` is empty",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "not": {}}}, "required": ["a"]}),
                "/properties/a",
                "`not`",
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 1}}, "required": ["n"]}),
                "/properties/n",
                "above maximum",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "required": ["a"]}),
                "/properties/a",
                "points at nothing",
            ),
            (json!({"type": "string"}), "", "must be an object"),
        ];
        for (schema, at, reason) in cases {
            let error = draw(schema.clone(), 1).unwrap_err();
            assert_eq!(error.at, at, "{schema}: {error}");
            assert!(error.reason.contains(reason), "{schema}: {error}");
        }
        // An optional member no value meets is left out instead.
        let optional = json!({"type": "object", "properties": {"a": false}});
        assert_eq!(draw(optional, 1).unwrap(), Map::new());
    }

    #[test]
    fn what_a_schema_asks_for_is_bounded() {
        let long = |length: u64| json!({"type": "object", "properties": {"s": {"type": "string", "minLength": length}}, "required": ["s"]});
        for length in [100_000_000_u64, 4_000_000_000] {
            let error = draw(long(length), 1).unwrap_err();
            assert_eq!(error.at, "/properties/s");
            assert_eq!(
                error.reason,
                format!(
                    "minLength {length} is above the longest string verify draws (65536 \
                     characters)"
                )
            );
        }
        // Up to the bound, drawn in full.
        let drawn = draw(long(MAX_STRING_CHARS), 1).unwrap();
        assert_eq!(drawn["s"].as_str().unwrap().len(), 65_536);
        let many = json!({"type": "object", "properties": {"a": {"type": "array", "minItems": 100_000_000u64}}, "required": ["a"]});
        let error = draw(many, 1).unwrap_err();
        assert_eq!(
            error.reason,
            "minItems 100000000 is above the most items verify draws in an array (1000)"
        );
        // Each part within its bound, the whole past 1 MiB: 1000 strings
        // of 2000 characters.
        let large = json!({"type": "object", "properties": {"a": {"type": "array", "minItems": 1000,
            "items": {"type": "string", "minLength": 2000}}}, "required": ["a"]});
        let error = draw(large, 1).unwrap_err();
        assert_eq!(
            error.reason,
            "the arguments would be larger than the most verify draws (1048576 bytes)"
        );
        // An optional member past the bound is left out.
        let optional = json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 100_000_000u64}}});
        for seed in 0..10 {
            assert_eq!(draw(optional.clone(), seed).unwrap(), Map::new());
        }
    }

    #[test]
    fn a_root_without_a_type_is_an_object() {
        assert!(draw(json!({}), 1).is_ok());
        assert!(draw(json!({"additionalProperties": {"type": "string"}}), 1).is_ok());
        assert!(draw(json!(true), 1).is_ok());
    }

    #[test]
    fn a_schema_whose_branches_multiply_is_given_up_on_quickly() {
        let branches: Vec<Value> = (0..8).map(|_| json!({"$ref": "#/$defs/a"})).collect();
        let schema = json!({
            "type": "object",
            "$defs": {"a": {"anyOf": branches}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
            "required": ["x"],
        });
        let error = draw(schema, 1).unwrap_err();
        assert!(error.reason.contains("within 20000 subschemas"), "{error}");
    }

    #[test]
    fn strings_come_back_from_the_pool() {
        let schema =
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]});
        let mut pool = Pool::default();
        pool.absorb(&json!(["n-417"]));
        let mut rng = fastrand::Rng::with_seed(3);
        let hits = (0..100)
            .filter(|_| {
                Generator::new(&schema, &mut rng, &pool)
                    .arguments()
                    .unwrap()["id"]
                    == "n-417"
            })
            .count();
        assert!((25..=75).contains(&hits), "{hits}");
    }

    #[test]
    fn the_same_seed_draws_the_same_values() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}});
        for seed in 0..20 {
            assert_eq!(draw(schema.clone(), seed), draw(schema.clone(), seed));
        }
    }
}
