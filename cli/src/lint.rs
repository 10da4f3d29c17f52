//! The rules of `mcp-hints lint`, over a collected tool list.
//!
//! | rule | default | finds |
//! |---|---|---|
//! | `undeclared_hints` | warn | a tool whose read/write side (readOnlyHint true, or both destructiveHint and idempotentHint) or world (openWorldHint) is left to the spec's pessimistic defaults: the macro's lint of the same name, on the wire |
//! | `contradicting_hints` | warn | readOnlyHint true declared with destructiveHint true or idempotentHint false |
//! | `meaningless_hints` | allow | destructiveHint or idempotentHint declared beside readOnlyHint true, where the spec says they mean nothing (harmless when they agree, and `#[tool(read_only)]` emits them on purpose for clients that read them anyway) |
//! | `misplaced_hints` | warn | a hint outside `annotations`, or a misspelt hint inside it: clients ignore both |
//! | `missing_title` | warn | no `title` and no `annotations.title`: clients show the name to people asking for confirmation |
//! | `invalid_tool_name` | warn | a name the spec's rule rejects: 1 to 128 of `A-Z a-z 0-9 _ - .` |
//! | `colliding_tool_names` | warn | names that become one once a client replaces characters outside `[A-Za-z0-9_-]` (`get.user` and `get_user`) |
//!
//! Sources: MCP schema `Tool` and `ToolAnnotations` (2025-06-18 to
//! 2026-07-28), the tool-name rule of 2025-11-25 (`server/tools`).

use std::collections::HashMap;
use std::fmt;

use mcp_hints::collect::{ListedTool, ToolList};
use mcp_hints::hints::json_type;
use mcp_hints::{Hint, Provenance, ToolHints};
use mcp_hints_core::lint::{self as rule, Declarations, Fix, HintState, join};
use mcp_hints_core::name;
use serde_json::{Map, Value};

use crate::text::shown;

/// A lint rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// See the module table.
    UndeclaredHints,
    /// See the module table.
    ContradictingHints,
    /// See the module table.
    MeaninglessHints,
    /// See the module table.
    MisplacedHints,
    /// See the module table.
    MissingTitle,
    /// See the module table.
    InvalidToolName,
    /// See the module table.
    CollidingToolNames,
}

impl Rule {
    /// Every rule.
    pub const ALL: [Rule; 7] = [
        Rule::UndeclaredHints,
        Rule::ContradictingHints,
        Rule::MeaninglessHints,
        Rule::MisplacedHints,
        Rule::MissingTitle,
        Rule::InvalidToolName,
        Rule::CollidingToolNames,
    ];

    /// The rule's id, e.g. `"undeclared_hints"`.
    pub fn id(self) -> &'static str {
        match self {
            Rule::UndeclaredHints => rule::NAME,
            Rule::ContradictingHints => "contradicting_hints",
            Rule::MeaninglessHints => "meaningless_hints",
            Rule::MisplacedHints => "misplaced_hints",
            Rule::MissingTitle => "missing_title",
            Rule::InvalidToolName => "invalid_tool_name",
            Rule::CollidingToolNames => "colliding_tool_names",
        }
    }

    /// Whether the rule runs when neither `--allow` nor `--warn` names it.
    pub fn on_by_default(self) -> bool {
        self != Rule::MeaninglessHints
    }

    /// The rule with id `id`.
    ///
    /// # Errors
    ///
    /// A message naming the unknown id, with the closest known one.
    pub fn parse(id: &str) -> Result<Rule, String> {
        if let Some(rule) = Rule::ALL.into_iter().find(|rule| rule.id() == id) {
            return Ok(rule);
        }
        Err(
            match mcp_hints_core::suggest::closest(id, Rule::ALL.map(Rule::id)) {
                Some(rule) => format!("unknown lint rule `{id}`: did you mean `{rule}`?"),
                None => format!(
                    "unknown lint rule `{id}`: the rules are {}",
                    Rule::ALL.map(Rule::id).join(", ")
                ),
            },
        )
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// The tool it is about (the first of a collision).
    pub tool: String,
    /// The page the tool was served on, from 1.
    pub page: usize,
    /// What is wrong.
    pub message: String,
    /// What it means for clients, when not evident.
    pub note: Option<String>,
    /// How to fix it.
    pub help: String,
}

/// Runs the rules in `enabled` over `list`, whose tools must have been
/// collected with their definitions. Findings come in tool order, then rule
/// order; collisions after all tools.
pub fn check(list: &ToolList, enabled: &[Rule]) -> Vec<Finding> {
    let on = |rule| enabled.contains(&rule);
    let empty = Map::new();
    let author = if built_with_tool_macro(list) {
        Author::ToolMacro
    } else {
        Author::Wire
    };
    let mut findings = Vec::new();
    for tool in &list.tools {
        let definition = tool.definition.as_ref().unwrap_or(&empty);
        let mut push = |rule, message, note, help| {
            if on(rule) {
                findings.push(Finding {
                    rule,
                    tool: tool.name.clone(),
                    page: tool.page,
                    message,
                    note,
                    help,
                });
            }
        };
        // Names go into messages for people: escaped and cut (the JSON
        // report's `tool` field keeps the name as served).
        let shown = shown(&tool.name);
        if let Some((message, note, help)) = undeclared(&shown, &tool.hints, author) {
            push(Rule::UndeclaredHints, message, Some(note), help);
        }
        for (message, help) in contradictions(&shown, &tool.hints) {
            push(Rule::ContradictingHints, message, None, help);
        }
        if let Some((message, help)) = meaningless(&shown, &tool.hints) {
            push(Rule::MeaninglessHints, message, None, help);
        }
        for (message, note, help) in misplaced(&shown, definition) {
            push(Rule::MisplacedHints, message, Some(note), help);
        }
        if tool.title.is_none() {
            push(
                Rule::MissingTitle,
                match definition.get("title") {
                    Some(title) if !title.is_null() && !title.is_string() => format!(
                        "tool `{shown}` has a `title` that is {}, not a string",
                        json_type(title)
                    ),
                    _ => format!("tool `{shown}` has no title"),
                },
                Some("clients show the bare name to people asked to confirm a call".to_owned()),
                "add a human-readable `title` to the tool (spec 2025-06-18 and later)".to_owned(),
            );
        }
        if let Some(problem) = name::problem(&tool.name) {
            push(
                Rule::InvalidToolName,
                format!("tool name `{shown}` {problem}"),
                Some("clients may reject the tool or fail to call it".to_owned()),
                format!(
                    "use 1 to {} of `{}` (spec 2025-11-25, tool names)",
                    name::MAX_LEN,
                    name::ALPHABET
                ),
            );
        }
    }
    if on(Rule::CollidingToolNames) {
        findings.extend(collisions(list));
    }
    findings
}

/// The hints of a tool as the core's rules read them: declared when the
/// server declared them (not when defaulted, nor asserted by an operator).
fn declarations(hints: &ToolHints) -> Declarations {
    Declarations::from_fn(|hint| {
        let value = hints.get(hint);
        HintState {
            value: value.value,
            declared: value.provenance == Provenance::Declared,
        }
    })
}

/// Who a finding's help speaks to: the author of any server (in the
/// wire's fields), or one who wrote the tools with mcp-hints' `#[tool]`
/// (in its flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Author {
    Wire,
    ToolMacro,
}

/// Whether `list` was served by a server built with mcp-hints' `#[tool]`:
/// at least one tool carries `_meta["mcp-hints/provenance"]` as `#[tool]`
/// writes it (only on a tool that left a hint to its default, each of the
/// four `declared` or `defaulted`), and none carries it otherwise. The
/// gateway writes the key on every tool, with `asserted` too and all four
/// `declared` on a fully declared tool: its tools come from any server, so
/// its list is not taken for one built with `#[tool]`.
fn built_with_tool_macro(list: &ToolList) -> bool {
    let mut seen = false;
    for tool in &list.tools {
        let provenance = tool
            .definition
            .as_ref()
            .and_then(|definition| definition.get("_meta"))
            .and_then(|meta| meta.get(mcp_hints::PROVENANCE_META_KEY));
        let Some(provenance) = provenance else {
            continue;
        };
        let Some(provenance) = provenance.as_object() else {
            return false;
        };
        let as_written = Hint::ALL.iter().all(|hint| {
            matches!(
                provenance.get(hint.wire_name()).and_then(Value::as_str),
                Some("declared" | "defaulted")
            )
        }) && provenance.len() == Hint::ALL.len()
            && provenance.values().any(|value| value == "defaulted");
        if !as_written {
            return false;
        }
        seen = true;
    }
    seen
}

/// The `#[tool]` flags that fix `finding`, in the words of the build's own
/// warning.
fn flag_fixes(finding: &rule::Undeclared) -> String {
    let flag = |name: &str| format!("`#[tool({name})]`");
    let fixes: Vec<String> = finding
        .fixes()
        .iter()
        .map(|fix| match fix {
            Fix::World => format!(
                "{} (or `#[tool_router(closed_world)]` for every tool)",
                fix.flags(flag)
            ),
            other => other.flags(flag),
        })
        .collect();
    format!(
        "add {} (the server's `_meta` shows it was built with mcp-hints' `#[tool]`; flags \
         combine: `#[tool(non_idempotent, additive)]`)",
        fixes.join(", and ")
    )
}

/// The macro's rule on the wire, in the core's words: the message, what
/// clients assume, and the fix for `author`.
fn undeclared(name: &str, hints: &ToolHints, author: Author) -> Option<(String, String, String)> {
    let finding = rule::undeclared_hints(name, &declarations(hints))?;
    let help = match author {
        Author::ToolMacro => flag_fixes(&finding),
        Author::Wire => finding.wire_help(),
    };
    Some((finding.message(), finding.note(), help))
}

fn contradictions(name: &str, hints: &ToolHints) -> Vec<(String, String)> {
    declarations(hints)
        .contradictions()
        .into_iter()
        .map(|contradiction| (contradiction.message(name), contradiction.wire_help()))
        .collect()
}

fn meaningless(name: &str, hints: &ToolHints) -> Option<(String, String)> {
    let read_only = hints.get(Hint::ReadOnly);
    if !(read_only.value && read_only.provenance == Provenance::Declared) {
        return None;
    }
    let agreeing: Vec<String> = [(Hint::Destructive, false), (Hint::Idempotent, true)]
        .into_iter()
        .filter(|(hint, agrees)| {
            let value = hints.get(*hint);
            value.provenance == Provenance::Declared && value.value == *agrees
        })
        .map(|(hint, value)| format!("{hint} {value}"))
        .collect();
    (!agreeing.is_empty()).then(|| {
        (
            format!(
                "tool `{name}` declares {} beside readOnlyHint true, where the spec says {} \
                 nothing",
                join(&agreeing),
                if agreeing.len() == 1 {
                    "it means"
                } else {
                    "they mean"
                }
            ),
            "harmless; drop them, or keep them for clients that read them regardless".to_owned(),
        )
    })
}

/// Folds a key to compare it with hint names: lower case, without `_` and
/// `-`, and without a trailing `hint`.
fn fold(key: &str) -> String {
    let folded: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    folded
        .strip_suffix("hint")
        .map(str::to_owned)
        .unwrap_or(folded)
}

fn hint_like(key: &str) -> Option<Hint> {
    let folded = fold(key);
    Hint::ALL
        .into_iter()
        .find(|hint| fold(hint.wire_name()) == folded)
}

fn misplaced(name: &str, definition: &Map<String, Value>) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for key in definition.keys() {
        if let Some(hint) = hint_like(key) {
            let key = shown(key);
            found.push((
                format!("tool `{name}` has `{key}` outside `annotations`"),
                format!(
                    "clients read hints only from `annotations`: {hint} stays at its default, {}",
                    hint.spec_default()
                ),
                format!("move it into `annotations` as `{hint}`"),
            ));
        }
    }
    if let Some(Value::Object(annotations)) = definition.get("annotations") {
        for key in annotations.keys() {
            let Some(hint) = hint_like(key) else {
                continue;
            };
            if key != hint.wire_name() {
                let key = shown(key);
                found.push((
                    format!("tool `{name}` has `annotations.{key}`, which is not a hint"),
                    format!(
                        "clients ignore `{key}`: {hint} stays at its default, {}",
                        hint.spec_default()
                    ),
                    format!("spell it `{hint}`"),
                ));
            }
        }
    }
    found
}

/// One finding per set of names that collide, in the order of each set's
/// first tool; linear in the number of tools.
fn collisions(list: &ToolList) -> Vec<Finding> {
    // The sets, in the order of their first tool, and where each one is.
    let mut groups: Vec<Vec<&ListedTool>> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::with_capacity(list.tools.len());
    for tool in &list.tools {
        let next = groups.len();
        let group = *group_of
            .entry(name::client_safe(&tool.name))
            .or_insert(next);
        if group == next {
            groups.push(Vec::new());
        }
        groups[group].push(tool);
    }
    groups
        .into_iter()
        .filter(|tools| tools.len() > 1)
        .map(|tools| {
            let names: Vec<String> = tools
                .iter()
                .map(|tool| format!("`{}`", shown(&tool.name)))
                .collect();
            // The characters replaced, each once, in the order met.
            let replaced =
                name::shown_chars(&name::replaced(tools.iter().map(|tool| tool.name.as_str())));
            Finding {
                rule: Rule::CollidingToolNames,
                tool: tools[0].name.clone(),
                page: tools[0].page,
                message: format!(
                    "tool names {} collide as `{}` once {replaced} is replaced by `_`",
                    join(&names),
                    shown(&name::client_safe(&tools[0].name)),
                ),
                note: Some(format!(
                    "{replaced} is not allowed in function names by clients that require {}; \
                     they replace it, and then call one tool for the other",
                    name::CLIENT_SAFE_PATTERN
                )),
                help: "rename the tools so that they differ in letters, digits, `_` or `-`"
                    .to_owned(),
            }
        })
        .collect()
}
