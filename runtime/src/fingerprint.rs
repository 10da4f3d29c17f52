//! Stable fingerprints of tool definitions, and a lock of them, so that a
//! client can refuse a tool that changed since it was approved.
//!
//! A fingerprint is the SHA-256 of the definition's canonical JSON (RFC 8785,
//! the JSON Canonicalization Scheme: keys sorted, no whitespace, numbers in
//! their shortest form), over the members that say what the tool does:
//! `name`, `title`, `description`, `inputSchema`, `outputSchema` and
//! `annotations`. Key order, whitespace, `1.0` against `1`, and
//! `"annotations": null` against an absent member do not change it;
//! `_meta`, `icons` and members this version does not know do not count.
//! Each of those members also has a fingerprint of its own, so a change can
//! be named.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::collect::ToolList;
use crate::hints::{Hint, ToolHints};

/// A member of a tool definition that a [`Fingerprint`] covers, besides the
/// name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Part {
    /// `title`.
    Title,
    /// `description`.
    Description,
    /// `inputSchema`.
    InputSchema,
    /// `outputSchema`.
    OutputSchema,
    /// `annotations`.
    Annotations,
}

impl Part {
    /// Every part, in the order of the spec's `Tool` schema.
    pub const ALL: [Part; 5] = [
        Part::Title,
        Part::Description,
        Part::InputSchema,
        Part::OutputSchema,
        Part::Annotations,
    ];

    /// The member's name on the wire, e.g. `"inputSchema"`.
    pub fn wire_name(self) -> &'static str {
        match self {
            Part::Title => "title",
            Part::Description => "description",
            Part::InputSchema => "inputSchema",
            Part::OutputSchema => "outputSchema",
            Part::Annotations => "annotations",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_name())
    }
}

/// The fingerprint of one tool definition: of the whole, and of each
/// [`Part`] present. Digests are written `sha256:` and 64 lowercase hex
/// digits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// The digest of the canonical JSON of the covered members together.
    pub definition: String,
    /// The digest of each covered member present (absent and `null` members
    /// have none), by wire name.
    #[serde(default)]
    pub parts: BTreeMap<String, String>,
}

impl Fingerprint {
    /// Fingerprints one tool definition from a `tools/list` result.
    pub fn of_definition(tool: &Map<String, Value>) -> Fingerprint {
        let mut covered = Map::new();
        if let Some(name) = tool.get("name") {
            covered.insert("name".to_owned(), name.clone());
        }
        let mut parts = BTreeMap::new();
        for part in Part::ALL {
            match tool.get(part.wire_name()) {
                None | Some(Value::Null) => {}
                Some(value) => {
                    let value = match (part, value) {
                        // A null hint is an absent one (see `ToolHints`), so
                        // it changes nothing.
                        (Part::Annotations, Value::Object(annotations)) => Value::Object(
                            annotations
                                .iter()
                                .filter(|(_, value)| !value.is_null())
                                .map(|(key, value)| (key.clone(), value.clone()))
                                .collect(),
                        ),
                        _ => value.clone(),
                    };
                    parts.insert(part.wire_name().to_owned(), digest(&value));
                    covered.insert(part.wire_name().to_owned(), value);
                }
            }
        }
        Fingerprint {
            definition: digest(&Value::Object(covered)),
            parts,
        }
    }

    /// The parts whose digests differ between `self` and `other` (present
    /// in one and absent in the other included), in [`Part::ALL`] order.
    pub fn changed_parts(&self, other: &Fingerprint) -> Vec<Part> {
        Part::ALL
            .into_iter()
            .filter(|part| self.parts.get(part.wire_name()) != other.parts.get(part.wire_name()))
            .collect()
    }
}

/// `sha256:` and the 64 lowercase hex digits of SHA-256 over `value`'s
/// RFC 8785 canonical JSON (members sorted, numbers in their shortest
/// form, so key order and `1` vs `1.0` give the same digest): the digest a
/// [`Fingerprint`] holds, for any JSON value (a call's arguments, say).
pub fn digest(value: &impl Serialize) -> String {
    /// Feeds the canonical JSON straight into the hash, with no buffer.
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hashing = Hashing(Sha256::new());
    // Canonicalising JSON values cannot fail: every number they hold is
    // finite and every key a string.
    let _ = serde_json_canonicalizer::to_writer(value, &mut hashing);
    let hash = hashing.0.finalize();
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in hash.iter() {
        text.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        text.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    text
}

/// The lock file format's version, written as `"mcpHintsLock"`.
pub const LOCK_VERSION: u32 = 1;

/// A pinned tool list: each approved tool's fingerprint and annotations, by
/// name. Serialised as JSON (`mcp-hints pin`), keys in a stable order:
///
/// ```json
/// { "mcpHintsLock": 1,
///   "tools": { "echo": { "fingerprint": { "definition": "sha256:…", "parts": { … } },
///                        "annotations": { "readOnlyHint": true } } } }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// [`LOCK_VERSION`].
    #[serde(rename = "mcpHintsLock")]
    pub version: u32,
    /// The pinned tools, by name.
    pub tools: BTreeMap<String, PinnedTool>,
}

/// One tool of a [`Lock`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedTool {
    /// Its fingerprint when pinned.
    pub fingerprint: Fingerprint,
    /// Its `annotations` when pinned, as served (absent when it had none),
    /// kept so that a changed hint can be named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

/// Why a [`Lock`] cannot be made or read.
#[derive(Debug)]
#[non_exhaustive]
pub enum LockError {
    /// A tool of the list was collected without
    /// [`CollectOptions::fingerprints`](crate::collect::CollectOptions::fingerprints).
    MissingFingerprint {
        /// The tool.
        tool: String,
    },
    /// The lock is not valid JSON of the lock's shape.
    Parse(serde_json::Error),
    /// The lock's `mcpHintsLock` version is not [`LOCK_VERSION`].
    Version {
        /// The version found.
        found: u32,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::MissingFingerprint { tool } => {
                write!(f, "tool `{tool}` was collected without its fingerprint")
            }
            LockError::Parse(error) => write!(f, "not a tools lock: {error}"),
            LockError::Version { found } => write!(
                f,
                "lock version {found} is not supported (this version reads {LOCK_VERSION})"
            ),
        }
    }
}

impl std::error::Error for LockError {}

impl Lock {
    /// Pins every tool of `list`.
    ///
    /// # Errors
    ///
    /// [`LockError::MissingFingerprint`] when the list was collected without
    /// fingerprints; the list must also keep definitions for annotations to
    /// be pinned (otherwise the lock stores none).
    pub fn of(list: &ToolList) -> Result<Lock, LockError> {
        let mut tools = BTreeMap::new();
        for tool in &list.tools {
            let fingerprint =
                tool.fingerprint
                    .clone()
                    .ok_or_else(|| LockError::MissingFingerprint {
                        tool: tool.name.clone(),
                    })?;
            let annotations = tool
                .definition
                .as_ref()
                .and_then(|definition| definition.get("annotations"))
                .filter(|annotations| !annotations.is_null())
                .cloned();
            tools.insert(
                tool.name.clone(),
                PinnedTool {
                    fingerprint,
                    annotations,
                },
            );
        }
        Ok(Lock {
            version: LOCK_VERSION,
            tools,
        })
    }

    /// Reads a lock from its JSON text.
    ///
    /// # Errors
    ///
    /// [`LockError::Parse`] for text that is not a lock,
    /// [`LockError::Version`] for another version.
    pub fn from_json(text: &str) -> Result<Lock, LockError> {
        let lock: Lock = serde_json::from_str(text).map_err(LockError::Parse)?;
        if lock.version != LOCK_VERSION {
            return Err(LockError::Version {
                found: lock.version,
            });
        }
        Ok(lock)
    }

    /// The lock as pretty JSON, keys in a stable order, ending in a newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Compares a freshly collected `list` (with fingerprints and
    /// definitions) with the lock.
    ///
    /// # Errors
    ///
    /// [`LockError::MissingFingerprint`] when the list was collected without
    /// fingerprints.
    pub fn diff(&self, list: &ToolList) -> Result<Drift, LockError> {
        let current = Lock::of(list)?;
        let mut drift = Drift::default();
        for (name, now) in &current.tools {
            match self.tools.get(name) {
                None => drift.added.push(name.clone()),
                Some(then) if then.fingerprint.definition != now.fingerprint.definition => {
                    drift.changed.push(ChangedTool {
                        name: name.clone(),
                        parts: then.fingerprint.changed_parts(&now.fingerprint),
                        hints: changed_hints(then.annotations.as_ref(), now.annotations.as_ref()),
                    });
                }
                Some(_) => {}
            }
        }
        drift.removed = self
            .tools
            .keys()
            .filter(|name| !current.tools.contains_key(*name))
            .cloned()
            .collect();
        Ok(drift)
    }
}

/// How a tool list differs from its [`Lock`]. Every list is sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drift {
    /// Tools served now that the lock does not have.
    pub added: Vec<String>,
    /// Tools in the lock that are no longer served.
    pub removed: Vec<String>,
    /// Tools whose definition changed.
    pub changed: Vec<ChangedTool>,
}

impl Drift {
    /// True when the list matches the lock exactly.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// A tool whose definition differs from the pinned one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedTool {
    /// The tool's name.
    pub name: String,
    /// The parts that changed. Empty when only the name's encoding or a
    /// part this version does not split out changed.
    pub parts: Vec<Part>,
    /// Each hint whose effective value changed: (hint, pinned, now).
    pub hints: Vec<(Hint, bool, bool)>,
}

fn changed_hints(then: Option<&Value>, now: Option<&Value>) -> Vec<(Hint, bool, bool)> {
    let (Ok(then), Ok(now)) = (
        ToolHints::from_json(then, None),
        ToolHints::from_json(now, None),
    ) else {
        return Vec::new();
    };
    Hint::ALL
        .into_iter()
        .filter_map(|hint| {
            let (a, b) = (then.get(hint).value, now.get(hint).value);
            (a != b).then_some((hint, a, b))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fingerprint(tool: Value) -> Fingerprint {
        Fingerprint::of_definition(tool.as_object().unwrap())
    }

    #[test]
    fn key_order_whitespace_numbers_and_null_annotations_do_not_count() {
        let a = fingerprint(json!({
            "name": "t", "description": "d",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "maximum": 1.0}}},
        }));
        let b: Value = serde_json::from_str(
            r#"{ "inputSchema": { "properties": { "n": { "maximum": 1, "type": "number" } },
                 "type": "object" }, "annotations": null, "description": "d", "name": "t",
                 "_meta": {"x": 1}, "icons": [] }"#,
        )
        .unwrap();
        assert_eq!(a, fingerprint(b));
    }

    #[test]
    fn a_null_hint_is_an_absent_one() {
        let absent = fingerprint(json!({ "name": "t", "annotations": { "readOnlyHint": true } }));
        let null = fingerprint(json!({ "name": "t",
            "annotations": { "readOnlyHint": true, "destructiveHint": null } }));
        assert_eq!(absent, null);
    }

    #[test]
    fn each_covered_member_changes_the_fingerprint_and_is_named() {
        let base = json!({
            "name": "t", "title": "T", "description": "d",
            "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
        });
        let pinned = fingerprint(base.clone());
        assert!(pinned.definition.starts_with("sha256:"));
        assert_eq!(pinned.definition.len(), 7 + 64);
        for part in Part::ALL {
            let mut changed = base.clone();
            changed[part.wire_name()] = json!("something else");
            let now = fingerprint(changed);
            assert_ne!(pinned.definition, now.definition, "{part}");
            assert_eq!(pinned.changed_parts(&now), vec![part]);
        }
        let mut renamed = base.clone();
        renamed["name"] = json!("u");
        assert_ne!(pinned.definition, fingerprint(renamed).definition);
    }

    #[test]
    fn known_digest_of_a_canonical_definition() {
        // sha256 of the canonical text {"name":"t"}, computed independently
        // with `printf '{"name":"t"}' | sha256sum`.
        assert_eq!(
            fingerprint(json!({"name": "t"})).definition,
            "sha256:3647a67649228b62fe3d139c47f7a3c673c31ce57da824082b6654fc0b15751f"
        );
    }

    #[test]
    fn a_lock_round_trips_and_names_what_drifted() {
        use crate::collect::{CollectOptions, collect_pages};
        let options = || CollectOptions {
            fingerprints: true,
            keep_definitions: true,
            ..CollectOptions::default()
        };
        let then = collect_pages(
            vec![json!({ "tools": [
                { "name": "keep", "description": "k" },
                { "name": "gone" },
                { "name": "edit", "description": "e", "annotations": { "readOnlyHint": true } },
            ]})],
            options(),
        )
        .unwrap();
        let lock = Lock::of(&then).unwrap();
        let text = lock.to_json();
        assert!(text.starts_with("{\n  \"mcpHintsLock\": 1,"), "{text}");
        let lock = Lock::from_json(&text).unwrap();
        assert!(lock.diff(&then).unwrap().is_empty());

        let now = collect_pages(
            vec![json!({ "tools": [
                { "name": "keep", "description": "k" },
                { "name": "edit", "description": "e2", "annotations": { "readOnlyHint": false } },
                { "name": "new" },
            ]})],
            options(),
        )
        .unwrap();
        let drift = lock.diff(&now).unwrap();
        assert_eq!(drift.added, ["new"]);
        assert_eq!(drift.removed, ["gone"]);
        assert_eq!(
            drift.changed,
            [ChangedTool {
                name: "edit".into(),
                parts: vec![Part::Description, Part::Annotations],
                hints: vec![(Hint::ReadOnly, true, false)],
            }]
        );
    }

    #[test]
    fn bad_locks_are_refused() {
        assert!(matches!(Lock::from_json("[]"), Err(LockError::Parse(_))));
        assert!(matches!(
            Lock::from_json(r#"{"mcpHintsLock": 9, "tools": {}}"#),
            Err(LockError::Version { found: 9 })
        ));
        let list = crate::collect::collect_pages(
            vec![json!({ "tools": [{ "name": "a" }] })],
            crate::collect::CollectOptions::default(),
        )
        .unwrap();
        assert_eq!(
            Lock::of(&list).unwrap_err().to_string(),
            "tool `a` was collected without its fingerprint"
        );
    }
}
