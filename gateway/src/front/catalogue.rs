//! The tools the gateway serves: every upstream's tools, namespaced, with
//! all four hints explicit and their sources in `_meta`; the tools left
//! out for their names; and [`served_tools`], what `gateway check` reads.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mcp_hints::fingerprint::PinnedTool;
use mcp_hints::{Hint, PROVENANCE_META_KEY, ToolHints};
use mcp_hints_core::name;
use rmcp::model::{MetaObject, Tool, ToolAnnotations};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::approval::DriftLock;
use crate::config::Config;
use crate::policy::{self, EffectiveHints};
use crate::state::{InProcess, SharedState};
use crate::upstream::{self, ProcessGroups, UNAVAILABLE_META_KEY, Upstream};
use crate::{Error, check_names, namespaced};

/// One namespaced tool: where it goes and what the policy knows of it.
pub(super) struct Listed {
    pub(super) upstream: Arc<Upstream>,
    /// The upstream's own name for it.
    pub(super) tool: String,
    pub(super) hints: EffectiveHints,
    /// `hints` as each audit entry records them, serialised once here
    /// rather than on every call.
    pub(super) logged_hints: Value,
    /// The upstream's definition's fingerprint and annotations, for the
    /// drift lock.
    pub(super) pinned: PinnedTool,
    /// The definition as the upstream serves it, so that an approver of a
    /// drifted tool sees what changed (the lock keeps only digests).
    pub(super) definition: Map<String, Value>,
}

/// The tools the gateway serves, as last built from the upstreams' lists.
#[derive(Default)]
pub(super) struct Catalogue {
    /// As clients see them: namespaced, all four hints explicit.
    pub(super) tools: Vec<Tool>,
    pub(super) by_name: HashMap<String, Arc<Listed>>,
    /// The tools left out for their names, as `(upstream, tool)`, with
    /// what is wrong with the name.
    left_out: HashMap<(String, String), String>,
}

impl Catalogue {
    /// Builds the catalogue from every upstream's last known tools; a tool
    /// whose own name is not one the spec allows ([`name::problem`]) is left
    /// out, in [`left_out`](Catalogue::left_out), and its upstream's other
    /// tools are served.
    ///
    /// # Errors
    ///
    /// [`Error::Names`] for colliding or over-long namespaced names, every
    /// one named (and no config path).
    pub(super) fn build(config: &Config, upstreams: &[Arc<Upstream>]) -> Result<Catalogue, Error> {
        let mut catalogue = Catalogue::default();
        for upstream in upstreams {
            let unavailable = upstream.unavailable();
            for tool in upstream.tools().iter() {
                // Left out by the operator, who knows: said nowhere.
                if upstream.excludes(&tool.name) {
                    continue;
                }
                if let Some(problem) = name::problem(&tool.name) {
                    catalogue.left_out.insert(
                        (upstream.name.clone(), tool.name.to_string()),
                        problem.to_string(),
                    );
                    continue;
                }
                let name = namespaced(&upstream.name, &tool.name);
                let served = ToolHints::of(tool);
                let hints =
                    policy::effective_hints(&config.asserts, &upstream.name, &tool.name, &served);
                let definition = match serde_json::to_value(tool) {
                    Ok(Value::Object(definition)) => definition,
                    _ => Map::new(),
                };
                let pinned = DriftLock::pinned(&definition);
                catalogue
                    .tools
                    .push(exposed(tool, &name, &hints, unavailable.as_deref()));
                catalogue.by_name.insert(
                    name,
                    Arc::new(Listed {
                        upstream: upstream.clone(),
                        tool: tool.name.to_string(),
                        logged_hints: serde_json::to_value(hints).unwrap_or(Value::Null),
                        hints,
                        pinned,
                        definition,
                    }),
                );
            }
        }
        check_names(catalogue.tools.iter().map(|tool| tool.name.as_ref()))?;
        Ok(catalogue)
    }
}

/// `tool` as the gateway's clients see it: named `name`, its four hints
/// set to `hints`, their sources under [`PROVENANCE_META_KEY`], and, when
/// its upstream is unavailable, the reason under [`UNAVAILABLE_META_KEY`].
fn exposed(tool: &Tool, name: &str, hints: &EffectiveHints, unavailable: Option<&str>) -> Tool {
    let mut tool = tool.clone();
    tool.name = name.to_owned().into();
    let mut annotations = match serde_json::to_value(&tool.annotations) {
        Ok(Value::Object(annotations)) => annotations,
        _ => Map::new(),
    };
    annotations.extend(hints.to_annotations());
    // Every field came from a ToolAnnotations or is one of the four hints.
    tool.annotations = serde_json::from_value::<ToolAnnotations>(Value::Object(annotations)).ok();
    let sources: Map<String, Value> = Hint::ALL
        .iter()
        .map(|hint| {
            let (_, source) = hints.get(*hint);
            let source = serde_json::to_value(source).unwrap_or(Value::Null);
            (hint.wire_name().to_owned(), source)
        })
        .collect();
    let meta = tool.meta.get_or_insert_with(MetaObject::default);
    meta.0
        .insert(PROVENANCE_META_KEY.to_owned(), Value::Object(sources));
    if let Some(reason) = unavailable {
        meta.0
            .insert(UNAVAILABLE_META_KEY.to_owned(), Value::from(reason));
    }
    tool
}

/// Says, as an event once each, the tools `catalogue` leaves out for their
/// names that are not in `said` already; returns the ones it leaves out,
/// the next `said`.
pub(super) fn say_left_out(
    catalogue: &Catalogue,
    said: &HashSet<(String, String)>,
) -> HashSet<(String, String)> {
    let mut new: Vec<(&(String, String), &String)> = catalogue
        .left_out
        .iter()
        .filter(|(key, _)| !said.contains(*key))
        .collect();
    new.sort();
    for ((upstream, tool), problem) in new {
        let tool = mcp_hints_core::escape::shown(tool);
        tracing::warn!(
            %upstream,
            %tool,
            %problem,
            "upstream `{upstream}` lists a tool whose name `{tool}` {problem} (the spec's tool \
             names are 1 to 128 of `A-Z a-z 0-9 _ - .`); it is not served, the upstream's other \
             tools are"
        );
    }
    catalogue.left_out.keys().cloned().collect()
}

/// Connects every upstream of `config`, their process groups recorded in
/// `groups`, and builds the served list, saying, as events, what start-up
/// says: each unavailable upstream, each tool left out for its name, and
/// the count of tools. Returns the upstreams, the list, the tools left
/// out, and the receiver of their `notifications/tools/list_changed`. Cut
/// short (an error, its future dropped), it stops `groups`.
///
/// # Errors
///
/// [`Error::Names`] for colliding or over-long namespaced names, after the
/// config's path (the upstreams were started; `groups` are stopped).
pub(super) async fn start_upstreams(
    config: &Config,
    groups: &ProcessGroups,
    state: &Arc<dyn SharedState>,
) -> Result<
    (
        Vec<Arc<Upstream>>,
        Catalogue,
        HashSet<(String, String)>,
        mpsc::UnboundedReceiver<String>,
    ),
    Error,
> {
    let stop = groups.stop_on_drop();
    let (sender, receiver) = mpsc::unbounded_channel();
    let upstreams = upstream::connect_all(config, sender, groups, state).await;
    let catalogue = Catalogue::build(config, &upstreams).map_err(|error| match error {
        Error::Names { problems, .. } => Error::Names {
            config: Some(config.path.clone()),
            problems,
        },
        other => other,
    })?;
    let left_out = say_left_out(&catalogue, &HashSet::new());
    let unavailable = upstreams
        .iter()
        .filter(|upstream| upstream.unavailable().is_some())
        .count();
    tracing::info!(
        tools = catalogue.tools.len(),
        upstreams = upstreams.len(),
        unavailable,
        "{} from {} ({unavailable} unavailable)",
        mcp_hints_core::escape::count(catalogue.tools.len(), "tool", "tools"),
        mcp_hints_core::escape::count(upstreams.len(), "upstream", "upstreams"),
    );
    stop.disarm();
    Ok((upstreams, catalogue, left_out, receiver))
}

/// One tool as `gateway serve` would serve it.
#[derive(Clone, Debug)]
pub struct ServedTool {
    /// As clients see it, `UPSTREAM__TOOL`.
    pub name: String,
    /// Its upstream's name.
    pub upstream: String,
    /// The upstream's own name for it.
    pub tool: String,
    /// The hints the policy acts on, with their sources.
    pub hints: EffectiveHints,
}

/// What [`served_tools`] found.
pub struct ServedTools {
    /// The served tools, in served order.
    pub served: Vec<ServedTool>,
    /// `(upstream, tool)` of every tool the upstreams listed.
    pub listed: Vec<(String, String)>,
    /// `(upstream, reason)` of every upstream that could not be reached.
    pub unavailable: Vec<(String, String)>,
}

/// What `gateway serve` on `config` would serve, for `gateway check`: the
/// upstreams are started and listed by the same code as
/// [`GatewayBuilder::start`](super::GatewayBuilder::start) (with the same
/// stderr lines), then closed and their process groups stopped, on every
/// way out (its future dropped too). Returns the served tools in served
/// order, `(upstream, tool)` of every tool the upstreams listed (for
/// [`unmatched_tool_globs`](policy::unmatched_tool_globs)), and
/// `(upstream, reason)` of each upstream that could not be reached.
///
/// # Errors
///
/// [`Error::Names`] for colliding or over-long namespaced names, as
/// [`GatewayBuilder::start`](super::GatewayBuilder::start) says them.
pub async fn served_tools(config: &Config) -> Result<ServedTools, Error> {
    let groups = ProcessGroups::new();
    let _stop = groups.stop_on_drop();
    // Nothing is called: the budgets are never drawn on.
    let state: Arc<dyn SharedState> = Arc::new(InProcess::new(None));
    let (upstreams, catalogue, _, _) = start_upstreams(config, &groups, &state).await?;
    let served = catalogue
        .tools
        .iter()
        .filter_map(|tool| {
            let listed = catalogue.by_name.get(tool.name.as_ref())?;
            Some(ServedTool {
                name: tool.name.to_string(),
                upstream: listed.upstream.name.clone(),
                tool: listed.tool.clone(),
                hints: listed.hints,
            })
        })
        .collect();
    let listed = upstreams
        .iter()
        .flat_map(|upstream| {
            upstream
                .tools()
                .iter()
                .map(|tool| (upstream.name.clone(), tool.name.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let unavailable = upstreams
        .iter()
        .filter_map(|upstream| Some((upstream.name.clone(), upstream.unavailable()?)))
        .collect();
    for upstream in &upstreams {
        upstream.close();
    }
    Ok(ServedTools {
        served,
        listed,
        unavailable,
    })
}
