//! `mcp-hints gateway log`: the gateway's audit log
//! ([`mcp_hints_gateway::log`]) read back, filtered, and shown as a table
//! that fits the terminal, or as JSON lines; the logs of several replicas
//! merged by time; each log read with its rotated files; and `--verify`,
//! its hash chain checked ([`mcp_hints_gateway::chain`]).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::{ArgGroup, Args};
use mcp_hints_gateway::chain::{self, At, Report};
use mcp_hints_gateway::log::{self, Decision, Entry, Outcome, ReadError, Redacted, rfc3339};
use serde_json::Value;

use crate::table::{Cell, render};

/// `mcp-hints gateway log`: the audit log's entries, filtered.
#[derive(Clone, Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["config", "log"])))]
pub struct LogArgs {
    /// The gateway's config file; the log is its `[log] path` (relative to
    /// the file's directory). Only that key is read, so the tokens the
    /// config names need not be set.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The log file itself; repeat it to read the logs of several replicas
    /// (`--log a.jsonl --log b.jsonl`), their entries merged by time (equal
    /// times in the order of the `--log`s, then of the lines), the table
    /// with a REPLICA column. Each is read after its rotated files
    /// (`FILE.000001`, `FILE.000002`, ... beside it), oldest first.
    #[arg(long, value_name = "FILE")]
    pub log: Vec<PathBuf>,
    /// Check each log's hash chain (with its rotated files) instead of
    /// printing entries: names the first line edited, removed, reordered
    /// or inserted, and says whether the log reaches its last checkpoint.
    /// Exit status 0 when every log is intact, 1 when one is not.
    #[arg(
        long,
        conflicts_with_all = ["principal", "upstream", "tool", "decision", "outcome", "since", "json", "columns"]
    )]
    pub verify: bool,
    /// With --verify: the Ed25519 public key (PEM, `openssl pkey -in
    /// KEY.pem -pubout`) every checkpoint must be signed with; at least
    /// one checkpoint must be.
    #[arg(long, value_name = "FILE", requires = "verify")]
    pub public_key: Option<PathBuf>,
    /// Only this principal's calls.
    #[arg(long, value_name = "NAME")]
    pub principal: Option<String>,
    /// Only calls to this upstream.
    #[arg(long, value_name = "NAME")]
    pub upstream: Option<String>,
    /// Only tools whose name matches, as the upstream serves it or as
    /// clients see it: `*delete*`, `notes__delete_*`.
    #[arg(long, value_name = "GLOB", value_parser = parse_glob)]
    pub tool: Option<glob::Pattern>,
    /// Only this decision.
    #[arg(long, value_parser = word_parser::<Decision>(Decision::NAMES))]
    pub decision: Option<Decision>,
    /// Only entries with this outcome (a `finished` entry's: an allowed
    /// call whose upstream was unavailable is decision `allow`, outcome
    /// `unavailable`).
    #[arg(long, value_parser = word_parser::<Outcome>(Outcome::NAMES))]
    pub outcome: Option<Outcome>,
    /// Only entries at or after this time, e.g. `2026-03-16T09:00:00Z` or
    /// `2026-03-16T11:00:00+02:00`.
    #[arg(long, value_name = "RFC3339", value_parser = parse_since)]
    pub since: Option<SystemTime>,
    /// Print the matching entries as JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The table's columns, in this order, comma-separated: time, id,
    /// principal, upstream, tool, decision, phase, outcome, attempts,
    /// hints, args, rule, by, replica, withheld, redacted; or `all` (all
    /// but by, replica, withheld and redacted).
    /// Default:
    /// all of them, or, on a terminal, the most that fit its width (id,
    /// args, hints, attempts and phase are left out first). With more
    /// than one `--log`, replica is always shown (after time, unless
    /// placed).
    // Each part as given: one column, or every one for `all`.
    #[arg(
        long,
        value_name = "COLUMNS",
        value_delimiter = ',',
        value_parser = parse_column,
        conflicts_with = "json"
    )]
    pub columns: Vec<Vec<Column>>,
}

/// A column of `gateway log`'s table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// `TIME`: the entry's time, RFC 3339.
    Time,
    /// `ID`: the call's id.
    Id,
    /// `PRINCIPAL`.
    Principal,
    /// `UPSTREAM`.
    Upstream,
    /// `TOOL`: the upstream's own name for it.
    Tool,
    /// `DECISION`.
    Decision,
    /// `PHASE`: `decided` or `finished`.
    Phase,
    /// `OUTCOME` of a finished call.
    Outcome,
    /// `ATTEMPTS`: how many times it was sent.
    Attempts,
    /// `HINTS`: the hints that were true, with their sources.
    Hints,
    /// `ARGS SHA256`: the arguments' digest, its first 12 hex digits.
    Args,
    /// `RULE`: the rule that decided.
    Rule,
    /// `REPLICA`: the gateway replica that wrote the entry (`-` in a log
    /// older than replica names); shown when asked for, and always when
    /// more than one log is read.
    Replica,
    /// `BY`: who decided a parked call (`-` on other entries); shown when
    /// asked for.
    By,
    /// `WITHHELD`: why a withheld result was withheld, the rule, the
    /// size or the sync that failed (`-` on other entries); shown when
    /// asked for.
    Withheld,
    /// `REDACTED`: what the `[[redact]]` rules masked in the result, each
    /// rule with its matches (`redact[0] (detectors slack_token): 2
    /// matches`; `-` when nothing matched); shown when asked for.
    Redacted,
}

impl Column {
    /// Every column of one log's table, in its order: what `all` names
    /// (every column but [`Column::Replica`], [`Column::By`],
    /// [`Column::Withheld`] and [`Column::Redacted`]).
    pub const ALL: [Column; 12] = [
        Column::Time,
        Column::Id,
        Column::Principal,
        Column::Upstream,
        Column::Tool,
        Column::Decision,
        Column::Phase,
        Column::Outcome,
        Column::Attempts,
        Column::Hints,
        Column::Args,
        Column::Rule,
    ];

    /// The columns a table too wide for the terminal leaves out, first
    /// to last.
    const LEFT_OUT_FIRST: [Column; 5] = [
        Column::Id,
        Column::Args,
        Column::Hints,
        Column::Attempts,
        Column::Phase,
    ];

    /// Its name for `--columns`.
    pub fn name(self) -> &'static str {
        match self {
            Column::Time => "time",
            Column::Id => "id",
            Column::Principal => "principal",
            Column::Upstream => "upstream",
            Column::Tool => "tool",
            Column::Decision => "decision",
            Column::Phase => "phase",
            Column::Outcome => "outcome",
            Column::Attempts => "attempts",
            Column::Hints => "hints",
            Column::Args => "args",
            Column::Rule => "rule",
            Column::Replica => "replica",
            Column::By => "by",
            Column::Withheld => "withheld",
            Column::Redacted => "redacted",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Column::Args => "ARGS SHA256",
            Column::Time => "TIME",
            Column::Id => "ID",
            Column::Principal => "PRINCIPAL",
            Column::Upstream => "UPSTREAM",
            Column::Tool => "TOOL",
            Column::Decision => "DECISION",
            Column::Phase => "PHASE",
            Column::Outcome => "OUTCOME",
            Column::Attempts => "ATTEMPTS",
            Column::Hints => "HINTS",
            Column::Rule => "RULE",
            Column::Replica => "REPLICA",
            Column::By => "BY",
            Column::Withheld => "WITHHELD",
            Column::Redacted => "REDACTED",
        }
    }

    fn cell(self, entry: &Entry) -> Cell {
        let optional = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
        match self {
            Column::Time => Cell::plain(&entry.time),
            Column::Id => Cell::plain(&entry.id),
            Column::Principal => Cell::plain(&entry.principal),
            Column::Upstream => Cell::plain(&entry.upstream),
            Column::Tool => Cell::plain(&entry.tool),
            Column::Decision => Cell::plain(entry.decision.as_str()),
            Column::Phase => Cell::plain(entry.phase.as_str()),
            Column::Outcome => Cell::plain(entry.outcome.map_or("-", Outcome::as_str)),
            Column::Attempts => Cell::plain(&entry.attempts.map_or("-".into(), |n| n.to_string())),
            Column::Hints => Cell::plain(&hints_text(&entry.hints)),
            Column::Args => Cell::plain(
                entry
                    .arguments_sha256
                    .get(..12)
                    .unwrap_or(&entry.arguments_sha256),
            ),
            Column::Rule => Cell::plain(&optional(&entry.rule)),
            Column::Replica => Cell::plain(&optional(&entry.replica)),
            Column::By => Cell::plain(&optional(&entry.by)),
            Column::Withheld => Cell::plain(&optional(&entry.withheld)),
            Column::Redacted => Cell::plain(&redacted_text(entry.redacted.as_deref())),
        }
    }
}

/// The `REDACTED` cell: each rule that matched and how often, `; `
/// between them, or `-`.
fn redacted_text(redacted: Option<&[Redacted]>) -> String {
    match redacted {
        Some(rules) if !rules.is_empty() => rules
            .iter()
            .map(|rule| {
                format!(
                    "{}: {}",
                    rule.rule,
                    crate::text::count(
                        usize::try_from(rule.matches).unwrap_or(usize::MAX),
                        "match",
                        "matches"
                    )
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => "-".to_owned(),
    }
}

/// One part of `--columns time,tool,decision`: a column's name, or `all`
/// for every column.
/// `--decision` and `--outcome`: clap lists `names` in its help and its
/// error for any other word, and gives the word as its [`Decision`] or
/// [`Outcome`].
fn word_parser<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(names).try_map(|word| word.parse::<T>())
}

fn parse_column(text: &str) -> Result<Vec<Column>, String> {
    if text.trim() == "all" {
        return Ok(Column::ALL.to_vec());
    }
    let every = Column::ALL.into_iter().chain([
        Column::Replica,
        Column::By,
        Column::Withheld,
        Column::Redacted,
    ]);
    every
        .clone()
        .find(|column| column.name() == text.trim())
        .map(|column| vec![column])
        .ok_or_else(|| {
            let names: Vec<&str> = every.map(|column| column.name()).collect();
            format!(
                "`{}` is not a column: give {} or all",
                crate::text::shown(text),
                names.join(", ")
            )
        })
}

fn parse_glob(text: &str) -> Result<glob::Pattern, String> {
    glob::Pattern::new(text).map_err(|error| format!("not a glob: {error}"))
}

fn parse_since(text: &str) -> Result<SystemTime, String> {
    rfc3339::parse(text).map_err(|error| error.to_string())
}

impl LogArgs {
    /// Whether `entry` passes every filter given; an error when `--since`
    /// is given and the entry's time is not RFC 3339.
    fn matches(&self, entry: &Entry) -> Result<bool, String> {
        let same =
            |filter: &Option<String>, value: &str| filter.as_deref().is_none_or(|f| f == value);
        if !(same(&self.principal, &entry.principal)
            && same(&self.upstream, &entry.upstream)
            && self
                .decision
                .is_none_or(|decision| decision == entry.decision)
            && (self.outcome.is_none() || self.outcome == entry.outcome)
            && self.tool.as_ref().is_none_or(|pattern| {
                mcp_hints_gateway::policy::tool_matches(pattern, &entry.upstream, &entry.tool)
            }))
        {
            return Ok(false);
        }
        match self.since {
            None => Ok(true),
            Some(since) => Ok(parse_since(&entry.time)? >= since),
        }
    }
}

/// Reads the logs named by `args` (each `--log`, or `[log] path` of
/// `--config`) and prints the entries that pass every filter: for one log
/// in its order, for several merged by time (equal times in the order of
/// the logs, then of their lines), with each entry's replica. A table for
/// people (every field escaped, as all peer text is), or with `--json` one
/// entry per line. Returns exit status 0.
///
/// # Errors
///
/// A message naming the file for a config or log that cannot be read, and
/// the file and line number for a line whose time is not RFC 3339 (with
/// `--since`, or when several logs are merged by time). A line that is
/// not an entry (one a crash cut short) is skipped, said on stderr with
/// its file and number.
pub fn run_log(args: &LogArgs) -> Result<u8, String> {
    let paths = match (args.log.as_slice(), &args.config) {
        ([], Some(config)) => vec![log_path_of(config)?],
        ([], None) => return Err("give --log FILE or --config FILE".to_owned()),
        (logs, _) => logs.to_vec(),
    };
    if args.verify {
        return run_verify(&paths, args.public_key.as_deref());
    }
    let (entries, skipped) = match paths.as_slice() {
        [path] => read_matching(path, args)?,
        several => read_merged(several, args)?,
    };
    for problem in &skipped {
        eprintln!("mcp-hints gateway log: {problem}");
    }
    let out = if args.json {
        let mut out = String::new();
        for entry in &entries {
            let json = serde_json::to_string(entry).map_err(|error| error.to_string())?;
            out.push_str(&crate::text::json_for_terminal(&json));
            out.push('\n');
        }
        out
    } else {
        let width = std::io::IsTerminal::is_terminal(&std::io::stdout())
            .then(|| terminal_size::terminal_size().map(|(width, _)| usize::from(width.0)))
            .flatten();
        let merged = paths.len() > 1;
        table(
            &entries,
            &chosen_columns(&args.columns, &entries, width, merged),
        )
    };
    crate::print(&out).map(|()| 0)
}

/// Exit status of `gateway log --verify` when a log is not intact.
pub const EXIT_TAMPERED: u8 = 1;

/// `gateway log --verify`: checks the chain of each log in `paths` (with
/// its rotated files), its checkpoints' signatures against the key at
/// `public_key` if given, and prints what it found, log by log. Returns
/// 0 when every log is intact, [`EXIT_TAMPERED`] when one is not.
///
/// # Errors
///
/// A message naming the file for a public key or a log that cannot be
/// read.
fn run_verify(paths: &[PathBuf], public_key: Option<&Path>) -> Result<u8, String> {
    let key = public_key.map(chain::load_public_key).transpose()?;
    let mut out = String::new();
    let mut intact = true;
    for path in paths {
        let report = chain::verify(path, key.as_ref())?;
        intact &= report.tampering.is_none();
        out.push_str(&report_text(path, &report, key.is_some()));
    }
    crate::print(&out)?;
    Ok(if intact { 0 } else { EXIT_TAMPERED })
}

/// What `--verify` says about the log at `path`: a first line with the
/// verdict (`intact`, or `TAMPERED:` and the first thing wrong), then
/// what was checked. Every path and word from the log is escaped.
fn report_text(path: &Path, report: &Report, keyed: bool) -> String {
    let shown = |path: &Path| crate::text::shown(&path.to_string_lossy()).into_owned();
    let mut out = match &report.tampering {
        None => format!("{}: intact\n", shown(path)),
        Some(tampering) => format!("{}: TAMPERED: {tampering}\n", shown(path)),
    };
    let files: Vec<String> = report.files.iter().map(|file| shown(file)).collect();
    let files = format!(
        "{} ({})",
        crate::text::count(files.len(), "file", "files"),
        files.join(", ")
    );
    if report.tampering.is_some() {
        // What held before the first break; nothing after it is vouched for.
        if report.holds_to == 0 {
            out.push_str(&format!("  no entry of {files} is vouched for\n"));
        } else {
            out.push_str(&format!(
                "  the chain holds from the first line to entry {}, in {files}\n",
                report.holds_to
            ));
        }
        for at in &report.torn {
            out.push_str(&format!(
                "  {at}: a line cut short by a crash (not part of the chain, not tampering)\n"
            ));
        }
        return out;
    }
    out.push_str(&format!(
        "  {} and {} in {files}, chained from the first line",
        crate::text::count(report.entries as usize, "entry", "entries"),
        crate::text::count(report.checkpoints as usize, "checkpoint", "checkpoints"),
    ));
    if report.head_seq > 0 {
        out.push_str(&format!(
            " to entry {} (hash {})",
            report.head_seq,
            crate::text::shown(&report.head)
        ));
    }
    out.push('\n');
    if report.unchained > 0 {
        out.push_str(&format!(
            "  {} at the start carry no chain (written before the log was chained): not verified\n",
            crate::text::count(report.unchained as usize, "line", "lines")
        ));
    }
    if report.checkpoints > 0 {
        let signed = crate::text::count(report.signed as usize, "checkpoint", "checkpoints");
        out.push_str(&match (keyed, report.signed) {
            (true, _) => format!("  {signed} signed by the key given\n"),
            (false, 0) => "  checkpoints unsigned: whoever can write the log can rewrite it \
                            whole (`[log] signing_key` signs them)\n"
                .to_owned(),
            (false, _) => format!(
                "  {signed} signed, each checked against the key it names (give --public-key \
                 to check who signed)\n"
            ),
        });
    }
    match report.copy_matched {
        Some(seq) => out.push_str(&format!(
            "  reaches its last checkpoint, entry {seq} ({})\n",
            shown(&chain::checkpoint_path(path))
        )),
        None => out.push_str(&format!(
            "  no copy of a last checkpoint ({}): a cut at the end cannot be told\n",
            shown(&chain::checkpoint_path(path))
        )),
    }
    let tail = crate::text::count(report.unsigned_tail as usize, "entry", "entries");
    out.push_str(&match report.last_checkpoint {
        // Nothing signed: a tail of 0 would read as though the rest were.
        Some(_) if report.signed == 0 => String::new(),
        Some(_) => format!("  unsigned tail of {tail} after the last checkpoint\n"),
        None => format!("  unsigned tail of {tail}: no checkpoint yet\n"),
    });
    for at in &report.torn {
        out.push_str(&format!(
            "  {at}: a line cut short by a crash (not part of the chain, not tampering)\n"
        ));
    }
    out
}

/// `[log] path` of the config at `config`, relative to its directory. Only
/// that key is read: reading a log needs none of the secrets the rest of
/// the config names.
fn log_path_of(config: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(config)
        .map_err(|error| format!("{}: {error}", config.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|error| format!("{}: {error}", config.display()))?;
    let path = table
        .get("log")
        .and_then(|log| log.get("path"))
        .ok_or_else(|| format!("{}: log.path: missing", config.display()))?
        .as_str()
        .ok_or_else(|| format!("{}: log.path: expected a string", config.display()))?;
    let directory = config.parent().unwrap_or(Path::new(""));
    Ok(directory.join(path))
}

/// The entries of the log at `path` that `args` lets through, and a
/// message for each line that is not an entry (skipped).
fn read_matching(path: &Path, args: &LogArgs) -> Result<(Vec<Entry>, Vec<String>), String> {
    let (numbered, skipped) = read_numbered(path, args)?;
    let entries = numbered.into_iter().map(|(_, entry)| entry).collect();
    Ok((entries, skipped))
}

/// A log's entries that passed the filters, each with its file and line
/// number (from 1), and a message for each line skipped.
type Numbered = (Vec<(At, Entry)>, Vec<String>);

/// As [`read_matching`], each entry with its file and line number: the
/// log's rotated files first, oldest first, then the log
/// ([`log::entries`]). Checkpoints ([`chain::Checkpoint`]) are not calls,
/// and are passed over without a word.
fn read_numbered(path: &Path, args: &LogArgs) -> Result<Numbered, String> {
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    for read in log::entries(path) {
        match read {
            Ok((at, entry)) => {
                if args
                    .matches(&entry)
                    .map_err(|error| format!("{}:{}: time: {error}", at.file.display(), at.line))?
                {
                    entries.push((at, entry));
                }
            }
            Err(ReadError::NotAnEntry { at, torn, error }) => skipped.push(format!(
                "{}:{}: {} (skipped; `gateway log --verify` tells a crash from tampering): {error}",
                at.file.display(),
                at.line,
                if torn {
                    "a line cut short"
                } else {
                    "not an audit log entry"
                }
            )),
            Err(error) => return Err(error.to_string()),
        }
    }
    Ok((entries, skipped))
}

/// The entries of the logs at `paths` that `args` lets through, merged by
/// time: a stable sort of the logs' entries in the order of `paths`, so
/// that equal times keep the order of the logs, then of their lines. And a
/// message for each line that is not an entry (skipped), log by log.
///
/// Times are compared as instants (`2026-03-16T11:00:00+02:00` is
/// `09:00:00Z`), so logs written with different offsets merge right.
fn read_merged(paths: &[PathBuf], args: &LogArgs) -> Result<(Vec<Entry>, Vec<String>), String> {
    let mut timed = Vec::new();
    let mut skipped = Vec::new();
    for path in paths {
        let (numbered, problems) = read_numbered(path, args)?;
        skipped.extend(problems);
        for (at, entry) in numbered {
            let time = parse_since(&entry.time)
                .map_err(|error| format!("{}:{}: time: {error}", at.file.display(), at.line))?;
            timed.push((time, entry));
        }
    }
    // `sort_by_key` is stable: equal times stay in the order pushed.
    timed.sort_by_key(|(time, _)| *time);
    Ok((timed.into_iter().map(|(_, entry)| entry).collect(), skipped))
}

/// The entries as a table of `columns` (every field escaped, as all peer
/// text is), and a line counting them.
fn table(entries: &[Entry], columns: &[Column]) -> String {
    let rows: Vec<Vec<Cell>> = entries
        .iter()
        .map(|entry| columns.iter().map(|column| column.cell(entry)).collect())
        .collect();
    let titles: Vec<&str> = columns.iter().map(|column| column.title()).collect();
    let mut out = render(&titles, &rows);
    out.push_str(&format!(
        "{}\n",
        crate::text::count(entries.len(), "entry", "entries")
    ));
    out
}

/// The columns of `gateway log`'s table: `--columns` as given (without
/// repeats), else every column of [`Column::ALL`], or, when `width` (the
/// terminal's, when stdout is one) is given, the most that fit in it,
/// leaving out [`Column::LEFT_OUT_FIRST`] in order. For `merged` logs,
/// [`Column::Replica`] is among them whatever was asked: after TIME (or
/// first) unless `--columns` placed it; it is never left out.
fn chosen_columns(
    asked: &[Vec<Column>],
    entries: &[Entry],
    width: Option<usize>,
    merged: bool,
) -> Vec<Column> {
    let with_replica = |mut columns: Vec<Column>| {
        if merged && !columns.contains(&Column::Replica) {
            let at = columns
                .iter()
                .position(|column| *column == Column::Time)
                .map_or(0, |time| time + 1);
            columns.insert(at, Column::Replica);
        }
        columns
    };
    if !asked.is_empty() {
        let mut columns = Vec::new();
        for column in asked.iter().flatten() {
            if !columns.contains(column) {
                columns.push(*column);
            }
        }
        return with_replica(columns);
    }
    let mut columns = with_replica(Column::ALL.to_vec());
    let Some(width) = width else {
        return columns;
    };
    for dropped in Column::LEFT_OUT_FIRST {
        // Measured without the header's style codes.
        let plain = anstream::adapter::strip_str(&table(entries, &columns)).to_string();
        let widest = plain
            .lines()
            .map(unicode_width::UnicodeWidthStr::width)
            .max()
            .unwrap_or(0);
        if widest <= width {
            break;
        }
        columns.retain(|column| *column != dropped);
    }
    columns
}

/// The hints that are true, each with its source unless declared:
/// `destructive(asserted), openWorld(defaulted)`; `-` when none is.
/// Anything else in the field is shown as its JSON.
fn hints_text(hints: &Value) -> String {
    let Some(map) = hints.as_object() else {
        return if hints.is_null() {
            "-".into()
        } else {
            hints.to_string()
        };
    };
    let mut shown = Vec::new();
    for (name, hint) in map {
        if hint.get("value") == Some(&Value::Bool(true)) {
            let short = name.strip_suffix("Hint").unwrap_or(name);
            match hint.get("source").and_then(Value::as_str) {
                Some("declared") | None => shown.push(short.to_owned()),
                Some(source) => shown.push(format!("{short}({source})")),
            }
        }
    }
    if shown.is_empty() {
        "-".into()
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use mcp_hints_gateway::log::{AuditLog, Durability, Phase, arguments_digest, now};
    use serde_json::{Map, json};

    use super::*;

    /// A directory of this test's own under the system's temporary
    /// directory (emptied first), removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let path = std::env::temp_dir()
                .join(format!("mcp-hints-gateway-log-{}", std::process::id()))
                .join(test);
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Scratch(path)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
            // The process's directory, once its last test's is gone.
            if let Some(parent) = self.0.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }

    /// The `decided` entry of call `n`, as the gateway writes it.
    fn entry(n: u32, principal: &str, tool: &str, decision: &str, time: &str) -> Entry {
        serde_json::from_value(json!({
            "time": time, "id": format!("call-{n}"), "principal": principal,
            "upstream": "memory", "tool": tool, "decision": decision, "phase": "decided",
            "hints": {
                "readOnlyHint": {"value": false, "source": "defaulted"},
                "destructiveHint": {"value": true, "source": "asserted"},
            },
            "arguments_sha256": arguments_digest(&Map::new()),
        }))
        .unwrap()
    }

    /// `mcp-hints gateway log ARGS`, as clap parses them.
    fn log_args(args: &[&str]) -> LogArgs {
        #[derive(Parser)]
        struct Command {
            #[command(flatten)]
            args: LogArgs,
        }
        Command::try_parse_from(std::iter::once("log").chain(args.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn filters_select_entries() {
        let scratch = Scratch::new("filter");
        let path = scratch.0.join("audit.jsonl");
        let mut lines = [
            entry(
                1,
                "alice",
                "delete_entities",
                "deny",
                "2026-03-16T09:00:00.000Z",
            ),
            entry(2, "bob", "read_graph", "allow", "2026-03-16T10:00:00.000Z"),
            entry(
                3,
                "alice",
                "read_graph",
                "allow",
                "2026-03-16T11:00:00.000Z",
            ),
            entry(
                4,
                "alice",
                "delete_relations",
                "require_approval",
                "2026-03-16T12:00:00.000Z",
            ),
        ];
        lines[1].outcome = Some(Outcome::Completed);
        lines[2].outcome = Some(Outcome::Withheld);
        let text: String = lines
            .iter()
            .map(|entry| serde_json::to_string(entry).unwrap() + "\n")
            .collect();
        std::fs::write(&path, text).unwrap();
        let log = path.to_str().unwrap();
        let ids = |args: &[&str]| -> Vec<String> {
            let args = log_args(&[&["--log", log], args].concat());
            read_matching(&path, &args)
                .unwrap()
                .0
                .into_iter()
                .map(|entry| entry.id)
                .collect()
        };
        assert_eq!(ids(&[]).len(), 4);
        assert_eq!(
            ids(&["--principal", "alice"]),
            ["call-1", "call-3", "call-4"]
        );
        assert_eq!(ids(&["--tool", "delete_*"]), ["call-1", "call-4"]);
        assert_eq!(ids(&["--tool", "memory__delete_*"]), ["call-1", "call-4"]);
        assert_eq!(ids(&["--outcome", "completed"]), ["call-2"]);
        assert_eq!(ids(&["--outcome", "withheld"]), ["call-3"]);
        assert_eq!(
            ids(&["--decision", "allow", "--principal", "alice"]),
            ["call-3"]
        );
        assert_eq!(
            ids(&["--since", "2026-03-16T12:30:00+02:00"]),
            ["call-3", "call-4"]
        );
        assert_eq!(ids(&["--upstream", "web"]), Vec::<String>::new());
        // An unknown decision is refused by clap.
        #[derive(Parser, Debug)]
        struct Command {
            #[command(flatten)]
            args: LogArgs,
        }
        assert!(Command::try_parse_from(["log", "--log", log, "--decision", "maybe"]).is_err());
        // One of --log and --config is needed.
        assert!(Command::try_parse_from(["log"]).is_err());
    }

    #[test]
    fn the_table_escapes_every_field() {
        let mut hostile = entry(
            1,
            "eve\u{1b}[2J",
            "rm\n-rf",
            "deny",
            "2026-03-16T09:00:00.000Z",
        );
        hostile.rule = Some("rule[0] (deny \u{202e}*)".into());
        let text = table(&[hostile], &Column::ALL);
        // The header alone is styled (bold); no field brings its own codes.
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert!(rows.iter().all(|row| !row.contains('\u{1b}')), "{text}");
        assert!(!text.contains('\u{202e}'), "{text}");
        assert!(text.contains("eve\\u{1b}[2J"), "{text}");
        assert!(text.contains("rm\\n-rf"), "{text}");
        assert!(text.contains("destructive(asserted)"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.ends_with("1 entry\n"));
    }

    #[test]
    fn the_table_keeps_the_columns_asked_for_or_what_fits_the_width() {
        let mut denied = entry(
            1,
            "alice",
            "delete_entities",
            "deny",
            "2026-03-16T09:00:00.000Z",
        );
        denied.rule = Some("rule[0] (deny memory__* when destructive)".into());
        let entries = [denied];
        let plain = |columns: &[Column]| {
            anstream::adapter::strip_str(&table(&entries, columns)).to_string()
        };
        let widest = |columns: &[Column]| {
            plain(columns)
                .lines()
                .map(|line| line.chars().count())
                .max()
                .unwrap()
        };
        // Asked for: those, in that order, once each (`all` is every one).
        let asked = vec![
            vec![Column::Tool],
            vec![Column::Decision],
            vec![Column::Tool],
        ];
        assert_eq!(
            chosen_columns(&asked, &entries, Some(10), false),
            [Column::Tool, Column::Decision]
        );
        assert_eq!(
            plain(&[Column::Tool, Column::Decision]),
            "TOOL             DECISION\ndelete_entities  deny\n1 entry\n"
        );
        assert_eq!(
            chosen_columns(&[Column::ALL.to_vec()], &entries, Some(10), false),
            Column::ALL
        );
        // Not a terminal: every column.
        let all = widest(&Column::ALL);
        assert_eq!(chosen_columns(&[], &entries, None, false), Column::ALL);
        assert_eq!(chosen_columns(&[], &entries, Some(all), false), Column::ALL);
        // A narrower terminal: the id goes first, then the digest, ...
        let no_id = chosen_columns(&[], &entries, Some(all - 1), false);
        assert!(
            !no_id.contains(&Column::Id) && no_id.contains(&Column::Args),
            "{no_id:?}"
        );
        assert!(widest(&no_id) < all);
        let narrow = chosen_columns(&[], &entries, Some(80), false);
        assert_eq!(
            narrow,
            [
                Column::Time,
                Column::Principal,
                Column::Upstream,
                Column::Tool,
                Column::Decision,
                Column::Outcome,
                Column::Rule
            ]
        );
        assert!(widest(&narrow) < 130, "{}", widest(&narrow));
    }

    #[test]
    fn a_missing_log_is_named_as_the_audit_log() {
        let scratch = Scratch::new("missing");
        let path = scratch.0.join("no-such-audit.jsonl");
        let args = log_args(&["--log", path.to_str().unwrap()]);
        let error = read_matching(&path, &args).unwrap_err();
        assert!(
            error.starts_with(&format!("audit log {}: cannot read it: ", path.display())),
            "{error}"
        );
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_its_number() {
        let scratch = Scratch::new("malformed");
        let path = scratch.0.join("audit.jsonl");
        let good = serde_json::to_string(&entry(1, "a", "t", "allow", &now())).unwrap();
        std::fs::write(&path, format!("{good}\n\n{{\"time\": 1}}\n")).unwrap();
        let args = log_args(&["--log", path.to_str().unwrap()]);
        let (entries, skipped) = read_matching(&path, &args).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].starts_with(&format!(
                "{}:3: not an audit log entry (skipped; `gateway log --verify` tells a crash \
                 from tampering): ",
                path.display()
            )),
            "{skipped:?}"
        );
        // A bad time is reported only when --since needs it.
        let mut bad_time = entry(1, "a", "t", "allow", "yesterday");
        bad_time.phase = Phase::Finished;
        std::fs::write(&path, serde_json::to_string(&bad_time).unwrap() + "\n").unwrap();
        assert_eq!(read_matching(&path, &args).unwrap().0.len(), 1);
        let since = log_args(&["--log", "x", "--since", "2026-01-01T00:00:00Z"]);
        let error = read_matching(&path, &since).unwrap_err();
        assert!(
            error.contains(":1: time: `yesterday` is not an RFC 3339 time"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_line_torn_by_a_crash_is_ended_and_the_log_goes_on() {
        let scratch = Scratch::new("torn");
        let path = scratch.0.join("audit.jsonl");
        let good = serde_json::to_string(&entry(1, "a", "t", "allow", &now())).unwrap();
        std::fs::write(&path, format!("{good}\n{}", &good[..40])).unwrap();
        let log = AuditLog::open(&path).unwrap();
        log.record(&entry(2, "a", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap();
        let args = log_args(&["--log", path.to_str().unwrap()]);
        let (entries, skipped) = read_matching(&path, &args).unwrap();
        let ids: Vec<&str> = entries.iter().map(|entry| entry.id.as_str()).collect();
        assert_eq!(ids, ["call-1", "call-2"]);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].contains(":2: a line cut short (skipped; "),
            "{skipped:?}"
        );
    }

    /// `entries` as a log's lines.
    fn lines(entries: &[Entry]) -> String {
        entries
            .iter()
            .map(|entry| serde_json::to_string(entry).unwrap() + "\n")
            .collect()
    }

    #[test]
    fn the_redacted_column_says_each_rule_and_its_matches() {
        let mut masked = entry(1, "alice", "read", "allow", "2026-03-16T09:00:00.000Z");
        masked.phase = Phase::Finished;
        masked.outcome = Some(Outcome::Completed);
        masked.redacted = Some(vec![
            Redacted {
                rule: "redact[0] (detectors slack_token)".to_owned(),
                matches: 2,
                places: vec!["content[0].text".to_owned()],
            },
            Redacted {
                rule: "redact[1] (pattern)".to_owned(),
                matches: 1,
                places: vec!["structuredContent.note".to_owned()],
            },
        ]);
        let other = entry(2, "alice", "read", "allow", "2026-03-16T09:00:01.000Z");
        assert_eq!(parse_column("redacted").unwrap(), [Column::Redacted]);
        let columns = [Column::Id, Column::Redacted];
        assert_eq!(
            anstream::adapter::strip_str(&table(&[masked, other], &columns)).to_string(),
            "ID      REDACTED\n\
             call-1  redact[0] (detectors slack_token): 2 matches; redact[1] (pattern): 1 match\n\
             call-2  -\n\
             2 entries\n"
        );
        assert!(!parse_column("all").unwrap().contains(&Column::Redacted));
    }

    #[test]
    fn the_withheld_column_says_why_a_result_was_withheld() {
        let mut withheld = entry(1, "alice", "read", "allow", "2026-03-16T09:00:00.000Z");
        withheld.phase = Phase::Finished;
        withheld.outcome = Some(Outcome::Withheld);
        withheld.withheld =
            Some("over [redaction] max_scan_bytes: 818 bytes of text, the limit 300".into());
        let other = entry(2, "alice", "list", "allow", "2026-03-16T09:00:01.000Z");
        let columns = parse_column("withheld").unwrap();
        assert_eq!(columns, [Column::Withheld]);
        let columns = [Column::Tool, Column::Withheld];
        assert_eq!(
            anstream::adapter::strip_str(&table(&[withheld, other], &columns)).to_string(),
            "TOOL  WITHHELD\n\
             read  over [redaction] max_scan_bytes: 818 bytes of text, the limit 300\n\
             list  -\n\
             2 entries\n"
        );
        // Not among `all`'s, as `by` and `replica` are not.
        assert!(!parse_column("all").unwrap().contains(&Column::Withheld));
    }

    /// The `decided` entry of call `n` by `replica` at `time`.
    fn by(replica: Option<&str>, n: u32, time: &str) -> Entry {
        let mut entry = entry(n, "alice", "t", "allow", time);
        entry.replica = replica.map(str::to_owned);
        entry
    }

    #[test]
    fn several_logs_merge_by_time_and_equal_times_keep_log_then_line_order() {
        let scratch = Scratch::new("merge");
        let (a, b) = (scratch.0.join("a.jsonl"), scratch.0.join("b.jsonl"));
        let a_entries = [
            by(Some("a"), 1, "2026-03-16T09:00:00.000Z"),
            by(Some("a"), 2, "2026-03-16T09:00:02.000Z"),
            // Equal to b's call-5: a's first, as --log a comes first.
            by(Some("a"), 3, "2026-03-16T09:00:03.000Z"),
            // Out of order within its own log: put in place by time.
            by(Some("a"), 4, "2026-03-16T09:00:01.500Z"),
        ];
        let b_entries = [
            // 09:00:01Z, written with an offset: compared as an instant.
            by(Some("b"), 10, "2026-03-16T11:00:01.000+02:00"),
            by(Some("b"), 5, "2026-03-16T09:00:03.000Z"),
            // Equal to call-5, a line later in the same log.
            by(Some("b"), 6, "2026-03-16T09:00:03.000Z"),
        ];
        std::fs::write(&a, lines(&a_entries)).unwrap();
        std::fs::write(&b, lines(&b_entries)).unwrap();
        let (a_text, b_text) = (a.to_str().unwrap(), b.to_str().unwrap());
        let ids = |first: &Path, second: &Path, filters: &[&str]| -> Vec<String> {
            let paths = [first.to_owned(), second.to_owned()];
            let args = log_args(&[&["--log", a_text, "--log", b_text], filters].concat());
            let (entries, skipped) = read_merged(&paths, &args).unwrap();
            assert!(skipped.is_empty(), "{skipped:?}");
            entries.into_iter().map(|entry| entry.id).collect()
        };
        assert_eq!(
            ids(&a, &b, &[]),
            [
                "call-1", "call-10", "call-4", "call-2", "call-3", "call-5", "call-6"
            ]
        );
        // The other order of the logs changes only equal times.
        assert_eq!(
            ids(&b, &a, &[]),
            [
                "call-1", "call-10", "call-4", "call-2", "call-5", "call-6", "call-3"
            ]
        );
        // Filters work on the merged stream.
        assert_eq!(
            ids(&a, &b, &["--since", "2026-03-16T09:00:02Z"]),
            ["call-2", "call-3", "call-5", "call-6"]
        );
        let args = log_args(&["--log", a_text, "--log", b_text]);
        assert_eq!(args.log, [a.clone(), b.clone()]);
    }

    #[test]
    fn a_merged_table_shows_each_entrys_replica_and_one_log_does_not() {
        let entries = [
            by(Some("eu-1"), 1, "2026-03-16T09:00:00.000Z"),
            // An entry of a log older than replica names.
            by(None, 2, "2026-03-16T09:00:01.000Z"),
        ];
        let plain = |columns: &[Column]| {
            anstream::adapter::strip_str(&table(&entries, columns)).to_string()
        };
        let merged = chosen_columns(&[], &entries, None, true);
        assert_eq!(merged[..3], [Column::Time, Column::Replica, Column::Id]);
        assert_eq!(merged.len(), Column::ALL.len() + 1);
        let asked = [vec![Column::Time], vec![Column::Tool]];
        let columns = chosen_columns(&asked, &entries, None, true);
        assert_eq!(columns, [Column::Time, Column::Replica, Column::Tool]);
        assert_eq!(
            plain(&columns),
            "TIME                      REPLICA  TOOL\n\
             2026-03-16T09:00:00.000Z  eu-1     t\n\
             2026-03-16T09:00:01.000Z  -        t\n\
             2 entries\n"
        );
        // Placed by --columns, it stays there; without TIME it comes first.
        let asked = [vec![Column::Tool], vec![Column::Replica]];
        assert_eq!(
            chosen_columns(&asked, &entries, None, true),
            [Column::Tool, Column::Replica]
        );
        assert_eq!(
            chosen_columns(&[vec![Column::Tool]], &entries, None, true),
            [Column::Replica, Column::Tool]
        );
        // Never left out for the width.
        let narrow = chosen_columns(&[], &entries, Some(10), true);
        assert!(narrow.contains(&Column::Replica), "{narrow:?}");
        // One log: only when asked for, by name (`all` is as before).
        assert!(!chosen_columns(&[], &entries, None, false).contains(&Column::Replica));
        let all = log_args(&["--log", "x", "--columns", "all"]);
        assert_eq!(
            chosen_columns(&all.columns, &entries, None, false),
            Column::ALL
        );
        let named = log_args(&["--log", "x", "--columns", "replica,tool"]);
        assert_eq!(
            chosen_columns(&named.columns, &entries, None, false),
            [Column::Replica, Column::Tool]
        );
        #[derive(Parser, Debug)]
        struct Command {
            #[command(flatten)]
            args: LogArgs,
        }
        let error = Command::try_parse_from(["log", "--log", "x", "--columns", "replicas"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "give time, id, principal, upstream, tool, decision, phase, outcome, \
                 attempts, hints, args, rule, replica, by, withheld, redacted or all"
            ),
            "{error}"
        );
    }

    #[test]
    fn a_merge_names_the_log_it_cannot_read_and_the_file_and_line_of_a_bad_one() {
        let scratch = Scratch::new("merge-errors");
        let (a, b) = (scratch.0.join("a.jsonl"), scratch.0.join("b.jsonl"));
        std::fs::write(&a, lines(&[by(Some("a"), 1, "2026-03-16T09:00:00.000Z")])).unwrap();
        let paths = [a.clone(), b.clone()];
        let args = log_args(&["--log", "a", "--log", "b"]);
        let error = read_merged(&paths, &args).unwrap_err();
        assert!(
            error.starts_with(&format!("audit log {}: cannot read it: ", b.display())),
            "{error}"
        );
        // A line that is not an entry: skipped, named by file and line.
        let good = lines(&[by(Some("b"), 2, "2026-03-16T09:00:01.000Z")]);
        std::fs::write(&b, format!("{good}{{\"time\": 1}}\n")).unwrap();
        let (entries, skipped) = read_merged(&paths, &args).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].starts_with(&format!(
                "{}:2: not an audit log entry (skipped",
                b.display()
            )),
            "{skipped:?}"
        );
        // A time that cannot be placed, even without --since.
        std::fs::write(&b, format!("{good}{}", lines(&[by(Some("b"), 3, "noon")]))).unwrap();
        let error = read_merged(&paths, &args).unwrap_err();
        assert!(
            error.starts_with(&format!(
                "{}:2: time: `noon` is not an RFC 3339 time",
                b.display()
            )),
            "{error}"
        );
    }

    #[tokio::test]
    async fn verify_names_the_break_and_escapes_the_paths_it_shows() {
        let scratch = Scratch::new("verify-text");
        let path = scratch.0.join("audit\u{1b}[2J.jsonl");
        let log = AuditLog::open(&path).unwrap();
        for n in 0..3 {
            log.record(&entry(n, "a", "t", "allow", &now()), Durability::Synced)
                .await
                .unwrap();
        }
        log.checkpoint().unwrap();
        drop(log);
        let report = chain::verify(&path, None).unwrap();
        let text = report_text(&path, &report, false);
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(text.contains("audit\\u{1b}[2J.jsonl: intact\n"), "{text}");
        assert!(
            text.contains("  3 entries and 1 checkpoint in 1 file ("),
            "{text}"
        );
        assert!(
            text.contains(
                "  checkpoints unsigned: whoever can write the log can rewrite it whole \
                 (`[log] signing_key` signs them)\n"
            ),
            "{text}"
        );
        // With nothing signed, no tail is said: a tail of 0 would read as
        // though the rest were.
        assert!(!text.contains("unsigned tail"), "{text}");
        // The second line edited: the chain vouches for the first only.
        let lines: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        let mut edited = lines.clone();
        edited[1] = edited[1].replace("\"t\"", "\"u\"");
        std::fs::write(&path, edited.join("\n") + "\n").unwrap();
        let report = chain::verify(&path, None).unwrap();
        let text = report_text(&path, &report, false);
        assert!(text.contains(".jsonl: TAMPERED: "), "{text}");
        assert!(
            text.contains(".jsonl:2: entry 2 was edited: it hashes to "),
            "{text}"
        );
        assert!(
            text.contains("  the chain holds from the first line to entry 1, in 1 file ("),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text}");
        assert_eq!(
            run_verify(std::slice::from_ref(&path), None).unwrap(),
            EXIT_TAMPERED
        );
        // Reading the log still reads its entries, the checkpoint passed over.
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let args = log_args(&["--log", "x"]);
        let (entries, skipped) = read_matching(&path, &args).unwrap();
        assert_eq!((entries.len(), skipped.len()), (3, 0), "{skipped:?}");
        assert_eq!(run_verify(&[path], None).unwrap(), 0);
    }

    #[test]
    fn the_log_path_comes_from_the_config_file() {
        let scratch = Scratch::new("config");
        let config = scratch.0.join("gateway.toml");
        std::fs::write(
            &config,
            "[admin]\ntoken_env = \"UNSET_VARIABLE_FOR_THE_TEST\"\n[log]\npath = \"audit.jsonl\"\n",
        )
        .unwrap();
        assert_eq!(log_path_of(&config).unwrap(), scratch.0.join("audit.jsonl"));
        std::fs::write(&config, "[log]\nraw_arguments = true\n").unwrap();
        assert!(
            log_path_of(&config)
                .unwrap_err()
                .ends_with("log.path: missing")
        );
    }
}
