//! Results checked on the way back (`[[redact]]`): the built-in
//! [`Detector`]s, an operator's [`RedactPattern`], and the `Redactor`
//! built once from the config, which masks what they match in a completed
//! result, or withholds the result, before it reaches the client.
//!
//! What is scanned: every `text` content block, the `text` of every
//! embedded text resource, and every string value of `structuredContent`,
//! at any depth (its keys are left alone). What is not: images, audio and
//! blob resources (base64 data, which no text pattern reads
//! meaningfully), resource links, and `_meta`. A match is never kept
//! anywhere: the client gets the masked text, and the audit log and the
//! withheld result's error name the rule, the count and the places only.
//!
//! Matching uses the `regex` crate, whose engine runs in time linear in
//! the text, so no pattern can make a scan slow; a pattern whose compiled
//! form exceeds [`PATTERN_SIZE_LIMIT`] is refused when the config is read.

use std::fmt;
use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use crate::config::{Config, RedactAction, RedactConfig, RedactMatcher};
use crate::log::Redacted;
use crate::policy::tool_matches;

/// The largest compiled form of a `pattern` (the `regex` crate's
/// `size_limit`), in bytes: 1 MiB. A pattern past it
/// (`\w{1000}{1000}`) is refused at start rather than built.
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The name of a capture group that, when a pattern has one, is what is
/// masked instead of the whole match (`key = (?P<secret>...)` masks the
/// value and keeps the key).
pub const SECRET_GROUP: &str = "secret";

/// A built-in detector, as `detectors = [...]` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Detector {
    /// `aws_access_key`: an AWS access key id (`AKIA`, `ASIA`, `ABIA` or
    /// `ACCA` and 16 more upper-case letters or digits, 20 in all, not
    /// part of a longer word), and a secret access key written after its
    /// name (`aws_secret_access_key = ...`, `"SecretAccessKey": "..."`:
    /// 40 characters of base64; the value is masked, the name kept).
    AwsAccessKey,
    /// `private_key`: a PEM private key (`-----BEGIN ... PRIVATE
    /// KEY-----`) through its `-----END ... PRIVATE KEY-----` line, or to
    /// the end of the text when it was cut before it.
    PrivateKey,
    /// `bearer_token`: a token after `Bearer ` (16 characters or more, so
    /// that prose about the scheme is not one; the token is masked, the
    /// word kept), and a JWT anywhere (`eyJ...` `.` `eyJ...` `.` signature).
    BearerToken,
    /// `github_token`: a GitHub token (`ghp_`, `gho_`, `ghs_`, `ghu_`,
    /// `ghr_` and 36 or more letters or digits; `github_pat_` and 22 or
    /// more).
    GithubToken,
    /// `gitlab_token`: a GitLab token by the prefixes GitLab documents
    /// (docs.gitlab.com, "GitLab token overview", token prefixes): a
    /// personal, project or group access token (`glpat-`), a deploy
    /// token (`gldt-`), a runner authentication token (`glrt-`), a
    /// pipeline trigger token (`glptt-`), a CI/CD job token (`glcbt-`), a
    /// feed token (`glft-`), an incoming mail token (`glimt-`), a
    /// Kubernetes agent token (`glagent-`), an OAuth application secret
    /// (`gloas-`), a SCIM token (`glsoat-`) or a feature flag client
    /// token (`glffct-`), each followed by 20 or more letters, digits,
    /// `_` or `-`, not part of a longer word. A routable token's suffix
    /// (`.01.`, or `.` alone, then 9 lower-case letters or digits: its
    /// payload's length and checksum) is masked with it.
    GitlabToken,
    /// `openai_api_key`: an OpenAI API key: a legacy user key (`sk-` and
    /// exactly 48 letters or digits), and a project, service account or
    /// admin key (`sk-proj-`, `sk-svcacct-`, `sk-admin-`, then letters,
    /// digits, `_` or `-` around the `T3BlbkFJ` every such key carries,
    /// 20 or more on each side), not part of a longer word. The prefixes
    /// and the marker are those of gitleaks' `openai-api-key` rule, which
    /// also fixes the length on each side of the marker (58 or 74 today);
    /// this one does not, so that a change of length is still masked.
    OpenaiApiKey,
    /// `slack_token`: a Slack token (`xoxb-` bot, `xoxp-` user, `xoxa-`
    /// workspace, `xoxr-` refresh, `xoxs-` legacy, `xoxe-` rotating, and
    /// `xoxe.xoxb-`/`xoxe.xoxp-` configuration tokens: after the prefix a
    /// run of digits, a `-`, and 8 or more letters, digits or `-`), and
    /// an incoming webhook or workflow URL (`https://hooks.slack.com/`
    /// `services/`, `workflows/` or `triggers/`, then the team id `T...`
    /// and 16 or more characters of path), masked whole. Slack's token
    /// types are those api.slack.com/authentication/token-types lists.
    SlackToken,
}

impl Detector {
    /// Every detector, in the order a rule applies them: a private key
    /// first, so that a key block is masked whole, and a bearer token
    /// last, so that a token of a known kind after `Bearer ` is masked
    /// under its own name.
    pub const ALL: [Detector; 7] = [
        Detector::PrivateKey,
        Detector::AwsAccessKey,
        Detector::GithubToken,
        Detector::GitlabToken,
        Detector::OpenaiApiKey,
        Detector::SlackToken,
        Detector::BearerToken,
    ];

    /// The name `detectors = [...]` takes for all of them.
    pub const ALL_NAME: &str = "secrets";

    /// Its name in the config and in `[redacted:NAME]`.
    pub fn name(self) -> &'static str {
        match self {
            Detector::AwsAccessKey => "aws_access_key",
            Detector::PrivateKey => "private_key",
            Detector::BearerToken => "bearer_token",
            Detector::GithubToken => "github_token",
            Detector::GitlabToken => "gitlab_token",
            Detector::OpenaiApiKey => "openai_api_key",
            Detector::SlackToken => "slack_token",
        }
    }

    /// The detectors `name` stands for: one, or all of them for
    /// [`ALL_NAME`](Self::ALL_NAME); `None` for any other name.
    pub fn named(name: &str) -> Option<Vec<Detector>> {
        if name == Detector::ALL_NAME {
            return Some(Detector::ALL.to_vec());
        }
        Detector::ALL
            .into_iter()
            .find(|detector| detector.name() == name)
            .map(|detector| vec![detector])
    }

    /// Its expressions, compiled once.
    fn regexes(self) -> &'static [Regex] {
        static COMPILED: LazyLock<Vec<Vec<Regex>>> = LazyLock::new(|| {
            Detector::ALL
                .iter()
                .map(|detector| {
                    detector
                        .sources()
                        .iter()
                        .map(|source| compile(source).expect("a built-in detector compiles"))
                        .collect()
                })
                .collect()
        });
        let index = Detector::ALL
            .iter()
            .position(|detector| *detector == self)
            .unwrap_or_default();
        &COMPILED[index]
    }

    /// Its expressions' text.
    fn sources(self) -> &'static [&'static str] {
        match self {
            Detector::AwsAccessKey => &[
                r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
                r#"(?i:aws[_-]?)?(?i:secret[_-]?access[_-]?key)["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)"#,
            ],
            Detector::PrivateKey => &[
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\z)",
            ],
            Detector::BearerToken => &[
                r"\b(?i:bearer)\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
                r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
            ],
            Detector::GithubToken => {
                &[r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"]
            }
            Detector::GitlabToken => &[
                r"\bgl(?:pat|dt|rt|ptt|cbt|ft|imt|agent|oas|soat|ffct)-[0-9A-Za-z_-]{20,}(?:(?:\.[0-9a-z]{2})?\.[0-9a-z]{9}\b)?",
            ],
            Detector::OpenaiApiKey => &[
                r"\bsk-[A-Za-z0-9]{48}\b",
                r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}",
            ],
            Detector::SlackToken => &[
                r"\b(?:xoxe\.)?xox[abeprs]-[0-9]+-[0-9A-Za-z-]{8,}",
                r"\b(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]+/[A-Za-z0-9+/]{16,}",
            ],
        }
    }
}

impl fmt::Display for Detector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An operator's `pattern`, compiled: compared by its text.
#[derive(Clone, Debug)]
pub struct RedactPattern(Regex);

impl RedactPattern {
    /// Compiles `text` with [`PATTERN_SIZE_LIMIT`].
    ///
    /// # Errors
    ///
    /// The `regex` crate's message, on one line (escaped), for a pattern
    /// that does not compile or is too big; and a pattern that matches
    /// the empty string (it would match everywhere and mask nothing).
    pub fn new(text: &str) -> Result<RedactPattern, String> {
        let regex = compile(text).map_err(|error| said(&error))?;
        if regex.is_match("") {
            return Err("matches the empty string: a pattern must match some text".to_owned());
        }
        if secret_is_always_empty(text) {
            return Err(format!(
                "its `{SECRET_GROUP}` group matches only the empty string, so it would mask \
                 nothing: make the group match the secret's text"
            ));
        }
        Ok(RedactPattern(regex))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl PartialEq for RedactPattern {
    fn eq(&self, other: &RedactPattern) -> bool {
        self.as_str() == other.as_str()
    }
}

/// Whether `text` (a pattern that compiles) has a `secret` group that
/// can match only the empty string. One that may match it sometimes is
/// fine (`pw=(?P<secret>[^ ]*)`: an empty value is no secret, and an
/// empty match is not counted).
fn secret_is_always_empty(text: &str) -> bool {
    use regex_syntax::hir::{Hir, HirKind};
    fn walk(hir: &Hir) -> bool {
        match hir.kind() {
            HirKind::Capture(capture) if capture.name.as_deref() == Some(SECRET_GROUP) => {
                capture.sub.properties().maximum_len() == Some(0)
            }
            HirKind::Capture(capture) => walk(&capture.sub),
            HirKind::Repetition(repetition) => walk(&repetition.sub),
            HirKind::Concat(parts) | HirKind::Alternation(parts) => parts.iter().any(walk),
            _ => false,
        }
    }
    // Parsed as `compile` parses it; a pattern that compiled parses.
    regex_syntax::ParserBuilder::new()
        .build()
        .parse(text)
        .is_ok_and(|hir| walk(&hir))
}

/// The `regex` crate's `error` on one line: a syntax error's last line
/// (`unclosed group`) and where its caret points (`at character 1`),
/// else its whole text, escaped.
fn said(error: &regex::Error) -> String {
    let text = error.to_string();
    if let regex::Error::Syntax(_) = error {
        let lines: Vec<&str> = text.lines().collect();
        let what = lines.last().and_then(|line| line.strip_prefix("error: "));
        let caret = lines
            .iter()
            .find(|line| line.trim() == "^" || line.trim_start().starts_with('^'))
            .and_then(|line| line.find('^'));
        if let (Some(what), Some(caret), 4..) = (what, caret, lines.len()) {
            // The pattern's line is indented by 4 spaces.
            let at = caret.saturating_sub(4) + 1;
            // The gateway's regex is built without Unicode's property
            // tables (see Cargo.toml), so that even `\p{L}` is "not
            // found": say why, and what to write instead.
            let why = if what == "Unicode property not found" {
                "; the gateway has no `\\p{...}` classes (it is built without Unicode's \
                 property tables): write the class out, as `[A-Za-z]`, or use `\\w`, `\\d` \
                 or `\\s`"
            } else {
                ""
            };
            return mcp_hints_core::escape::one_line(&format!("{what} (at character {at}){why}"))
                .into_owned();
        }
    }
    mcp_hints_core::escape::one_line(&text).into_owned()
}

/// One expression, as every pattern is built.
fn compile(source: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(source)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
}

/// One `[[redact]]`, ready to scan.
#[derive(Debug)]
struct Rule {
    config: RedactConfig,
    /// Each expression and what replaces its matches, in order.
    masks: Vec<(Regex, String)>,
    /// `redact[N] (detectors A, B)` or `redact[N] (pattern)`.
    description: String,
}

/// The `[[redact]]` rules of a config, built once.
#[derive(Debug)]
pub(crate) struct Redactor {
    rules: Vec<Rule>,
    max_scan_bytes: u64,
}

/// What [`Redactor::check`] found in one result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Checked {
    /// Per rule that matched, in file order: its description, the count
    /// and the places; the `finished` entry's `redacted`.
    pub(crate) redacted: Vec<Redacted>,
    /// Why the result is withheld; `None`: it goes back (masked).
    pub(crate) withheld: Option<Withheld>,
}

impl Checked {
    /// Whether anything matched (the result was masked or withheld), or
    /// it was too big to scan: the result is tainted.
    pub(crate) fn matched(&self) -> bool {
        !self.redacted.is_empty() || self.withheld.is_some()
    }
}

/// Why a result is withheld.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Withheld {
    /// A `deny_result` rule, as described, matched.
    Rule(String),
    /// Its scanned text, `bytes` long, is over `[redaction]
    /// max_scan_bytes`, `limit`.
    Oversize {
        /// The bytes of text it would have scanned.
        bytes: u64,
        /// `max_scan_bytes`.
        limit: u64,
    },
}

impl Withheld {
    /// Why, as the `finished` entry's `withheld` says it: the rule's
    /// description, or the size against the limit.
    pub(crate) fn reason(&self) -> String {
        match self {
            Withheld::Rule(rule) => rule.clone(),
            Withheld::Oversize { bytes, limit } => {
                format!("over [redaction] max_scan_bytes: {bytes} bytes of text, the limit {limit}")
            }
        }
    }
}

impl Redactor {
    /// The redactor of `config`'s `[[redact]]` and `[redaction]`.
    pub(crate) fn new(config: &Config) -> Redactor {
        let rules = config
            .redacts
            .iter()
            .enumerate()
            .map(|(index, redact)| rule(index, redact))
            .collect();
        Redactor {
            rules,
            max_scan_bytes: config.redaction.max_scan_bytes,
        }
    }

    /// The rules that apply to `upstream`'s `tool` (the upstream's own
    /// name of it), in file order.
    fn applies(&self, upstream: &str, tool: &str) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(move |rule| {
            rule.config.upstream.matches(upstream)
                && tool_matches(&rule.config.tool, upstream, tool)
        })
    }

    /// Checks `result` of `upstream`'s `tool` against every rule that
    /// applies, in file order: masks what a `mask` rule matches in place,
    /// and says what matched where, and whether the result is withheld
    /// (a `deny_result` rule matched, or its text is over
    /// `max_scan_bytes`: then nothing is scanned).
    pub(crate) fn check(&self, upstream: &str, tool: &str, result: &mut CallToolResult) -> Checked {
        let rules: Vec<&Rule> = self.applies(upstream, tool).collect();
        let mut checked = Checked::default();
        if rules.is_empty() {
            return checked;
        }
        let bytes = scanned_bytes(result);
        if bytes > self.max_scan_bytes {
            checked.withheld = Some(Withheld::Oversize {
                bytes,
                limit: self.max_scan_bytes,
            });
            return checked;
        }
        for rule in rules {
            let mut found = Redacted {
                rule: rule.description.clone(),
                matches: 0,
                places: Vec::new(),
            };
            each_text(result, &mut |place, text| {
                let count = mask(&rule.masks, text);
                if count > 0 {
                    found.matches += count;
                    found.places.push(place.to_owned());
                }
            });
            if found.matches > 0 {
                if rule.config.action == RedactAction::DenyResult && checked.withheld.is_none() {
                    checked.withheld = Some(Withheld::Rule(rule.description.clone()));
                }
                checked.redacted.push(found);
            }
        }
        checked
    }
}

/// The ready form of `redact[index]`.
fn rule(index: usize, config: &RedactConfig) -> Rule {
    let replacement = |name: &str| match &config.action {
        RedactAction::Mask {
            replacement: Some(replacement),
        } => replacement.clone(),
        _ => format!("[redacted:{name}]"),
    };
    let (masks, description) = match &config.matcher {
        RedactMatcher::Pattern(pattern) => (
            vec![(pattern.0.clone(), replacement("pattern"))],
            format!("redact[{index}] (pattern)"),
        ),
        RedactMatcher::Detectors(detectors) => {
            let masks = Detector::ALL
                .into_iter()
                .filter(|detector| detectors.contains(detector))
                .flat_map(|detector| {
                    let replacement = replacement(detector.name());
                    detector
                        .regexes()
                        .iter()
                        .map(move |regex| (regex.clone(), replacement.clone()))
                })
                .collect();
            let names: Vec<&str> = detectors.iter().map(|detector| detector.name()).collect();
            (
                masks,
                format!("redact[{index}] (detectors {})", names.join(", ")),
            )
        }
    };
    Rule {
        config: config.clone(),
        masks,
        description,
    }
}

/// Replaces, in `text`, every non-empty match of each expression of
/// `masks` (its [`SECRET_GROUP`] when it has one) by its replacement,
/// one expression after another; the number of matches.
fn mask(masks: &[(Regex, String)], text: &mut String) -> u64 {
    let mut count = 0;
    for (regex, replacement) in masks {
        let mut masked = String::new();
        let mut last = 0;
        for captures in regex.captures_iter(text) {
            let Some(found) = captures.name(SECRET_GROUP).or_else(|| captures.get(0)) else {
                continue;
            };
            if found.is_empty() {
                continue;
            }
            masked.push_str(&text[last..found.start()]);
            masked.push_str(replacement);
            last = found.end();
            count += 1;
        }
        if last > 0 {
            masked.push_str(&text[last..]);
            *text = masked;
        }
    }
    count
}

/// The bytes of text [`each_text`] visits in `result`.
fn scanned_bytes(result: &mut CallToolResult) -> u64 {
    let mut bytes: u64 = 0;
    each_text(result, &mut |_, text| {
        bytes = bytes.saturating_add(u64::try_from(text.len()).unwrap_or(u64::MAX));
    });
    bytes
}

/// Calls `visit` with each scanned text of `result` and its place
/// (`content[0].text`, `content[1].resource.text`,
/// `structuredContent.notes[2].body`), in order.
fn each_text(result: &mut CallToolResult, visit: &mut dyn FnMut(&str, &mut String)) {
    for (index, block) in result.content.iter_mut().enumerate() {
        match block {
            ContentBlock::Text(text) => visit(&format!("content[{index}].text"), &mut text.text),
            ContentBlock::Resource(embedded) => {
                if let ResourceContents::TextResourceContents { text, .. } = &mut embedded.resource
                {
                    visit(&format!("content[{index}].resource.text"), text);
                }
            }
            _ => {}
        }
    }
    if let Some(structured) = &mut result.structured_content {
        each_string(&mut "structuredContent".to_owned(), structured, visit);
    }
}

/// Calls `visit` with every string in `value`, at `place` and below.
fn each_string(place: &mut String, value: &mut Value, visit: &mut dyn FnMut(&str, &mut String)) {
    let length = place.len();
    match value {
        Value::String(text) => visit(place, text),
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                place.push_str(&format!("[{index}]"));
                each_string(place, item, visit);
                place.truncate(length);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                place.push_str(&key_step(key));
                each_string(place, item, visit);
                place.truncate(length);
            }
        }
        _ => {}
    }
}

/// `.key` for a key of letters, digits and `_` (not starting with a
/// digit), else `["key"]`, the key as a JSON string.
fn key_step(key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!(".{key}")
    } else {
        format!("[{}]", Value::String(key.to_owned()))
    }
}

/// The text of a withheld result's tool error, for `name` (as the client
/// called it): which rule, how often and where it matched, or how big it
/// was; and that the call ran.
pub(crate) fn withheld_text(name: &str, checked: &Checked) -> String {
    let name = mcp_hints_core::escape::shown(name);
    let why = match &checked.withheld {
        Some(Withheld::Oversize { bytes, limit }) => format!(
            "its text is {bytes} bytes, over the {limit} bytes `[redaction] max_scan_bytes` \
             lets the gateway scan"
        ),
        Some(Withheld::Rule(rule)) => {
            let found = checked.redacted.iter().find(|found| found.rule == *rule);
            let (matches, places) = found.map_or((0, String::new()), |found| {
                (found.matches, found.places.join(", "))
            });
            let times = if matches == 1 { "time" } else { "times" };
            format!(
                "{rule}: it matched {matches} {times} in {}",
                mcp_hints_core::escape::one_line(&places)
            )
        }
        None => "it was not withheld".to_owned(),
    };
    let by = match &checked.withheld {
        Some(Withheld::Rule(_)) => "by the gateway's ",
        _ => "by the gateway: ",
    };
    format!("the result of `{name}` was withheld {by}{why}; the call ran, its result is not shown")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rmcp::model::ContentBlock;
    use serde_json::json;

    use super::*;

    /// The redactor of a config with the upstream `notes` and `extra`.
    fn redactor(extra: &str) -> Redactor {
        let text = format!(
            "[log]\npath = \"audit.jsonl\"\n\n[[upstream]]\nname = \"notes\"\n\
             url = \"http://127.0.0.1:1/mcp\"\n\n{extra}"
        );
        let config = crate::config::parse(&text, Path::new("gateway.toml")).unwrap();
        Redactor::new(&config)
    }

    /// What `detectors` masks in `text`: the masked text and the count.
    fn masked(detectors: &str, text: &str) -> (String, u64) {
        let redactor = redactor(&format!("[[redact]]\ndetectors = [\"{detectors}\"]\n"));
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        let checked = redactor.check("notes", "read", &mut result);
        let count = checked.redacted.first().map_or(0, |found| found.matches);
        let text = result.content[0].as_text().unwrap().text.clone();
        (text, count)
    }

    /// Asserts `detector` masks nothing of `text`.
    fn untouched(detector: &str, text: &str) {
        assert_eq!(masked(detector, text), (text.to_owned(), 0), "{text}");
    }

    #[test]
    fn aws_access_key_ids_and_secrets_are_masked() {
        assert_eq!(
            masked(
                "aws_access_key",
                "id AKIAIOSFODNN7EXAMPLE, temp ASIAY34FZKBOKMUTVV7A."
            ),
            (
                "id [redacted:aws_access_key], temp [redacted:aws_access_key].".to_owned(),
                2
            )
        );
        assert_eq!(
            masked(
                "aws_access_key",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
            ),
            (
                "aws_secret_access_key = [redacted:aws_access_key]\n".to_owned(),
                1
            )
        );
        assert_eq!(
            masked(
                "aws_access_key",
                r#"{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}"#
            ),
            (
                r#"{"SecretAccessKey": "[redacted:aws_access_key]"}"#.to_owned(),
                1
            )
        );
    }

    #[test]
    fn near_misses_of_aws_keys_are_left_alone() {
        // 15 characters after the prefix, 17, lower case, another prefix.
        untouched("aws_access_key", "AKIAIOSFODNN7EXAMPL");
        untouched("aws_access_key", "AKIAIOSFODNN7EXAMPLEX");
        untouched("aws_access_key", "akiaiosfodnn7example");
        untouched("aws_access_key", "AKIBIOSFODNN7EXAMPLE");
        untouched("aws_access_key", "xAKIAIOSFODNN7EXAMPLE");
        // A 39-character and a 41-character secret.
        untouched(
            "aws_access_key",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE",
        );
        untouched(
            "aws_access_key",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYS",
        );
    }

    #[test]
    fn private_keys_are_masked_whole_or_to_the_end_when_cut() {
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq9c=\n\
                   -----END RSA PRIVATE KEY-----";
        assert_eq!(
            masked("private_key", &format!("before\n{key}\nafter")),
            ("before\n[redacted:private_key]\nafter".to_owned(), 1)
        );
        assert_eq!(
            masked(
                "private_key",
                "x -----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI"
            ),
            ("x [redacted:private_key]".to_owned(), 1)
        );
        assert_eq!(
            masked(
                "private_key",
                "-----BEGIN OPENSSH PRIVATE KEY-----\na\n-----END OPENSSH PRIVATE KEY-----\n\
                 -----BEGIN EC PRIVATE KEY-----\nb\n-----END EC PRIVATE KEY-----"
            ),
            (
                "[redacted:private_key]\n[redacted:private_key]".to_owned(),
                2
            )
        );
        untouched(
            "private_key",
            "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----",
        );
        untouched("private_key", "-----BEGIN CERTIFICATE-----\nMIIB");
        untouched("private_key", "a PRIVATE KEY in prose");
    }

    #[test]
    fn bearer_tokens_and_jwts_are_masked() {
        assert_eq!(
            masked(
                "bearer_token",
                "Authorization: Bearer abcdef0123456789ABCDEF.xyz"
            ),
            (
                "Authorization: Bearer [redacted:bearer_token]".to_owned(),
                1
            )
        );
        assert_eq!(
            masked(
                "bearer_token",
                "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r"
            ),
            ("token [redacted:bearer_token]".to_owned(), 1)
        );
        untouched("bearer_token", "the Bearer scheme is in RFC 6750");
        untouched("bearer_token", "Bearer short");
        untouched("bearer_token", "eyJhbGciOiJIUzI1NiJ9 alone");
        untouched("bearer_token", "eyJhbGciOiJIUzI1NiJ9.notjson.sig");
    }

    #[test]
    fn github_tokens_are_masked() {
        let classic = format!("ghp_{}", "a1B2c3D4e5".repeat(4).get(..36).unwrap());
        for prefix in ["ghp_", "gho_", "ghs_", "ghu_", "ghr_"] {
            let token = classic.replacen("ghp_", prefix, 1);
            assert_eq!(
                masked("github_token", &format!("t={token};")),
                ("t=[redacted:github_token];".to_owned(), 1),
                "{token}"
            );
        }
        let fine = format!("github_pat_{}", "11ABCDEFG0_".repeat(3));
        assert_eq!(
            masked("github_token", &fine),
            ("[redacted:github_token]".to_owned(), 1)
        );
        untouched("github_token", "ghp_tooShort123");
        untouched("github_token", &classic.replacen("ghp_", "ghx_", 1));
        untouched("github_token", "github_pat_short");
    }

    #[test]
    fn gitlab_tokens_are_masked() {
        let body = "aB3_dE6-gH9jK2mN5pQ8";
        for prefix in [
            "glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "glagent-",
            "gloas-", "glsoat-", "glffct-",
        ] {
            let token = format!("{prefix}{body}");
            assert_eq!(
                masked("gitlab_token", &format!("token: \"{token}\"")),
                ("token: \"[redacted:gitlab_token]\"".to_owned(), 1),
                "{token}"
            );
        }
        // Longer bodies: a pipeline trigger token's 40 hex digits, a CI/CD
        // job token's `64_` before its 20, a token behind an instance prefix
        // (the prefix is kept).
        for (token, kept) in [
            (
                format!("glptt-{}", "0123456789abcdef".repeat(3).get(..40).unwrap()),
                "",
            ),
            (format!("glcbt-64_{body}"), ""),
            (format!("SIE-glpat-{body}"), "SIE-"),
        ] {
            assert_eq!(
                masked("gitlab_token", &format!("t={token};")),
                (format!("t={kept}[redacted:gitlab_token];"), 1),
                "{token}"
            );
        }
        // A routable token, versioned and not: its suffix goes with it.
        let payload = "aB3_dE6-gH9jK2mN5pQ8rS1tU4v";
        for token in [
            format!("glpat-{payload}.01.0r1a2b3c4"),
            format!("glpat-{payload}.0r1a2b3c4"),
            format!("glrt-t1_{payload}.01.0r1a2b3c4"),
        ] {
            assert_eq!(
                masked("gitlab_token", &format!("{token} end")),
                ("[redacted:gitlab_token] end".to_owned(), 1),
                "{token}"
            );
        }
        // 19 characters, another prefix, part of a longer word, prose.
        untouched("gitlab_token", &format!("glpat-{}", &body[..19]));
        untouched("gitlab_token", &format!("glxyz-{body}"));
        untouched("gitlab_token", &format!("xglpat-{body}"));
        untouched("gitlab_token", &format!("GLPAT-{body}"));
        untouched(
            "gitlab_token",
            "GitLab's personal access tokens start with glpat- and its deploy tokens with gldt-.",
        );
    }

    #[test]
    fn openai_api_keys_are_masked() {
        let legacy = format!("sk-{}", "a1B2c3D4e5".repeat(5).get(..48).unwrap());
        assert_eq!(
            masked("openai_api_key", &format!("OPENAI_API_KEY={legacy}\n")),
            ("OPENAI_API_KEY=[redacted:openai_api_key]\n".to_owned(), 1)
        );
        let side = "Ab1_Cd2-Ef".repeat(6);
        for kind in ["proj", "svcacct", "admin"] {
            let key = format!("sk-{kind}-{side}T3BlbkFJ{side}");
            assert_eq!(
                masked("openai_api_key", &format!(r#"{{"key": "{key}"}}"#)),
                (r#"{"key": "[redacted:openai_api_key]"}"#.to_owned(), 1),
                "{key}"
            );
        }
        // 47 and 49 characters, part of a longer word.
        untouched("openai_api_key", &legacy[..legacy.len() - 1]);
        untouched("openai_api_key", &format!("{legacy}x"));
        untouched("openai_api_key", &format!("a{legacy}"));
        // A project key without its marker, with too little on one side,
        // and of a kind OpenAI does not issue.
        untouched("openai_api_key", &format!("sk-proj-{side}{side}"));
        untouched(
            "openai_api_key",
            &format!("sk-proj-{side}T3BlbkFJ{}", &side[..19]),
        );
        untouched("openai_api_key", &format!("sk-other-{side}T3BlbkFJ{side}"));
        untouched(
            "openai_api_key",
            "sk-learn, the task-list, an ask-me-anything and a desk-123 are not keys",
        );
    }

    #[test]
    fn slack_tokens_and_webhooks_are_masked() {
        for token in [
            "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "xoxp-1234567890-1234567890-1234567890-0123456789abcdef0123456789abcdef",
            "xoxa-2-1234567890-1234567890123-0123456789abcdef",
            "xoxr-1-0123456789abcdef",
            "xoxs-1234567890-1234567890-1234567890-0123456789",
            "xoxe-1-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "xoxe.xoxp-1-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        ] {
            assert_eq!(
                masked("slack_token", &format!("SLACK_TOKEN={token} ")),
                ("SLACK_TOKEN=[redacted:slack_token] ".to_owned(), 1),
                "{token}"
            );
        }
        for url in [
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "hooks.slack.com/workflows/T0123ABCD/A0456EFGH/123456789012345678/AbCdEf12",
        ] {
            assert_eq!(
                masked("slack_token", &format!("post to {url}.")),
                ("post to [redacted:slack_token].".to_owned(), 1),
                "{url}"
            );
        }
        // Another letter, no digits after the prefix, 7 characters after
        // them, part of a longer word, prose.
        untouched("slack_token", "xoxz-1234567890-AbCdEfGhIjKl");
        untouched("slack_token", "xoxb-your-bot-token-here");
        untouched("slack_token", "xoxb-1234567890-AbCdEfG");
        untouched("slack_token", "axoxb-1234567890-AbCdEfGhIjKl");
        untouched(
            "slack_token",
            "xoxo, Slack: bot tokens start with xoxb- and user ones xoxp-",
        );
        untouched(
            "slack_token",
            "a webhook is https://hooks.slack.com/services/ and then its path",
        );
        untouched(
            "slack_token",
            "https://hooks.slack.com/services/T00000000/B0",
        );
    }

    #[test]
    fn a_known_token_after_bearer_is_masked_under_its_own_name() {
        assert_eq!(
            masked(
                "secrets",
                "Authorization: Bearer glpat-aB3_dE6-gH9jK2mN5pQ8"
            ),
            (
                "Authorization: Bearer [redacted:gitlab_token]".to_owned(),
                1
            )
        );
    }

    #[test]
    fn prose_is_left_alone_by_every_detector() {
        untouched(
            "secrets",
            "The task-list says: ask-me-anything at 10, then rotate the GitLab glpat- and \
             gldt- tokens, the OpenAI sk- keys and the Slack xoxb- ones (xoxo, the team). \
             Webhooks live under https://hooks.slack.com/services/; a bearer token is sent \
             after the word Bearer.",
        );
    }

    #[test]
    fn secrets_is_every_detector() {
        let text = "AKIAIOSFODNN7EXAMPLE and Bearer abcdef0123456789ABCDEF";
        assert_eq!(
            masked("secrets", text),
            (
                "[redacted:aws_access_key] and Bearer [redacted:bearer_token]".to_owned(),
                2
            )
        );
    }

    #[test]
    fn text_resources_and_structured_strings_are_masked_in_place() {
        let redactor = redactor(
            "[[redact]]\ntool = \"read*\"\ndetectors = [\"aws_access_key\"]\n\n\
             [[redact]]\npattern = \"hunter[0-9]+\"\nreplacement = \"***\"\n",
        );
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("key AKIAIOSFODNN7EXAMPLE"),
            ContentBlock::image("QUtJQUlPU0ZPRE5ON0VYQU1QTEU=", "image/png"),
            ContentBlock::embedded_text("file:///k", "AKIAIOSFODNN7EXAMPLE hunter2"),
        ]);
        result.structured_content = Some(json!({
            "notes": [
                {"id": 1, "body": "nothing"},
                {"id": 2, "body": "AKIAIOSFODNN7EXAMPLE"},
                {"id": 3, "body": "AKIAIOSFODNN7EXAMPLE twice AKIAIOSFODNN7EXAMPLE"},
            ],
            "AKIAIOSFODNN7EXAMPLE": "hunter22",
            "odd key": ["hunter3"],
        }));
        let checked = redactor.check("notes", "read_note", &mut result);
        assert_eq!(checked.withheld, None);
        assert!(checked.matched());
        assert_eq!(
            checked.redacted,
            [
                Redacted {
                    rule: "redact[0] (detectors aws_access_key)".to_owned(),
                    matches: 5,
                    places: vec![
                        "content[0].text".to_owned(),
                        "content[2].resource.text".to_owned(),
                        "structuredContent.notes[1].body".to_owned(),
                        "structuredContent.notes[2].body".to_owned(),
                    ],
                },
                Redacted {
                    rule: "redact[1] (pattern)".to_owned(),
                    matches: 3,
                    places: vec![
                        "content[2].resource.text".to_owned(),
                        "structuredContent.AKIAIOSFODNN7EXAMPLE".to_owned(),
                        r#"structuredContent["odd key"][0]"#.to_owned(),
                    ],
                },
            ]
        );
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "key [redacted:aws_access_key]"
        );
        // The image's base64 is not scanned.
        assert_eq!(
            result.content[1].as_image().unwrap().data,
            "QUtJQUlPU0ZPRE5ON0VYQU1QTEU="
        );
        assert_eq!(
            result.content[2].as_resource().unwrap().get_text(),
            "[redacted:aws_access_key] ***"
        );
        let structured = result.structured_content.unwrap();
        assert_eq!(
            structured["notes"][2]["body"],
            "[redacted:aws_access_key] twice [redacted:aws_access_key]"
        );
        assert_eq!(structured["notes"][0]["body"], "nothing");
        // Keys are left alone.
        assert_eq!(structured["AKIAIOSFODNN7EXAMPLE"], "***");
        assert_eq!(structured["odd key"][0], "***");
    }

    #[test]
    fn rules_apply_only_to_their_tools() {
        let redactor = redactor(
            "[[redact]]\ntool = \"notes__read*\"\ndetectors = [\"secrets\"]\n\n\
             [[redact]]\nupstream = \"notes\"\ntool = \"list\"\npattern = \"x+\"\n",
        );
        let mut result = CallToolResult::success(vec![ContentBlock::text("AKIAIOSFODNN7EXAMPLE")]);
        assert_eq!(
            redactor.check("notes", "write", &mut result),
            Checked::default()
        );
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "AKIAIOSFODNN7EXAMPLE"
        );
        let checked = redactor.check("notes", "read_all", &mut result);
        assert_eq!(checked.redacted.len(), 1);
        assert_eq!(
            checked.redacted[0].rule,
            "redact[0] (detectors private_key, aws_access_key, github_token, gitlab_token, \
             openai_api_key, slack_token, bearer_token)"
        );
    }

    #[test]
    fn a_deny_result_rule_withholds_a_result_it_matches() {
        let redactor = redactor(
            "[[redact]]\ndetectors = [\"aws_access_key\"]\n\n\
             [[redact]]\ndetectors = [\"private_key\"]\naction = \"deny_result\"\n",
        );
        let mut clean = CallToolResult::success(vec![ContentBlock::text("AKIAIOSFODNN7EXAMPLE")]);
        let checked = redactor.check("notes", "read", &mut clean);
        assert_eq!(checked.withheld, None);
        let mut result = CallToolResult::error(vec![ContentBlock::text(
            "failed: -----BEGIN PRIVATE KEY-----\nabc",
        )]);
        let checked = redactor.check("notes", "read", &mut result);
        assert_eq!(
            checked.withheld,
            Some(Withheld::Rule(
                "redact[1] (detectors private_key)".to_owned()
            ))
        );
        let text = withheld_text("notes__read", &checked);
        assert_eq!(
            text,
            "the result of `notes__read` was withheld by the gateway's redact[1] (detectors \
             private_key): it matched 1 time in content[0].text; the call ran, its result is \
             not shown"
        );
        assert!(!text.contains("BEGIN"));
    }

    #[test]
    fn a_result_over_max_scan_bytes_is_withheld_unscanned() {
        let redactor = redactor(
            "[redaction]\nmax_scan_bytes = 10\n\n[[redact]]\ntool = \"read\"\n\
             detectors = [\"secrets\"]\n",
        );
        let mut result = CallToolResult::success(vec![ContentBlock::text("12345")]);
        result.structured_content = Some(json!({"a": "123456"}));
        let checked = redactor.check("notes", "read", &mut result);
        assert_eq!(
            checked.withheld,
            Some(Withheld::Oversize {
                bytes: 11,
                limit: 10
            })
        );
        assert!(checked.matched());
        assert!(
            withheld_text("notes__read", &checked)
                .contains("its text is 11 bytes, over the 10 bytes `[redaction] max_scan_bytes`"),
            "{}",
            withheld_text("notes__read", &checked)
        );
        // A tool no rule applies to is not held to the limit.
        let mut other = result.clone();
        assert_eq!(
            redactor.check("notes", "write", &mut other),
            Checked::default()
        );
        // Exactly at the limit it is scanned.
        let mut at = CallToolResult::success(vec![ContentBlock::text("1234567890")]);
        assert_eq!(redactor.check("notes", "read", &mut at), Checked::default());
    }

    #[test]
    fn a_secret_group_masks_only_itself_and_empty_matches_do_not_count() {
        let redactor = redactor("[[redact]]\npattern = \"pw=(?P<secret>[^ ]*)\"\n");
        let mut result = CallToolResult::success(vec![ContentBlock::text("pw=x1 pw= ccc")]);
        let checked = redactor.check("notes", "read", &mut result);
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "pw=[redacted:pattern] pw= ccc"
        );
        assert_eq!(checked.redacted[0].matches, 1);
    }

    /// A pattern that backtracks exponentially in a backtracking engine
    /// (`(a+)+$` against `aaa...!`) scans a large result in one linear
    /// pass: the regex crate has no backtracking on such input, so this
    /// finishes (a backtracking engine would not within the test's life).
    #[test]
    fn a_pathological_pattern_scans_a_large_result_in_linear_time() {
        let redactor = redactor("[[redact]]\npattern = \"(a+)+$\"\n");
        let hostile = format!("{}!", "a".repeat(200_000));
        let mut result = CallToolResult::success(vec![ContentBlock::text(hostile.clone())]);
        let checked = redactor.check("notes", "read", &mut result);
        // `$` is never reached by a run of `a`s: nothing matches.
        assert!(checked.redacted.is_empty(), "{checked:?}");
        assert_eq!(result.content[0].as_text().unwrap().text, hostile);
        let mut ending = CallToolResult::success(vec![ContentBlock::text(
            "b".to_owned() + &"a".repeat(200_000),
        )]);
        let checked = redactor.check("notes", "read", &mut ending);
        assert_eq!(checked.redacted[0].matches, 1);
        assert_eq!(
            ending.content[0].as_text().unwrap().text,
            "b[redacted:pattern]"
        );
    }

    #[test]
    fn patterns_too_big_or_matching_nothing_are_refused() {
        assert!(RedactPattern::new(r"\w{1000}{1000}").is_err());
        for never in [
            "(?P<secret>)abc",
            "k=(?P<secret>\\b)v",
            "x(?:(?P<secret>)|y)z",
        ] {
            assert!(
                RedactPattern::new(never)
                    .unwrap_err()
                    .contains("group matches only the empty string"),
                "{never}"
            );
        }
        assert!(RedactPattern::new("pw=(?P<secret>[^ ]*)").is_ok());
        assert!(RedactPattern::new("(?P<secret>q)?zz").is_ok());
        assert!(
            RedactPattern::new("x*")
                .unwrap_err()
                .contains("empty string")
        );
        assert_eq!(
            RedactPattern::new("(unclosed").unwrap_err(),
            "unclosed group (at character 1)"
        );
        assert_eq!(
            RedactPattern::new("ab[z-a]").unwrap_err(),
            "invalid character class range, the start must be <= the end (at character 4)"
        );
        assert_eq!(
            RedactPattern::new("id=\\p{L}+").unwrap_err(),
            "Unicode property not found (at character 4); the gateway has no `\\p{...}` \
             classes (it is built without Unicode's property tables): write the class out, as \
             `[A-Za-z]`, or use `\\w`, `\\d` or `\\s`"
        );
        assert_eq!(RedactPattern::new("a+").unwrap().as_str(), "a+");
    }
}
