//! The config's tests: each reads a config text (or the bytes of a file)
//! and pins the config it gives or every problem's exact line.

use super::validate::predicate;
use super::*;

const LOG: &str = "[log]\npath = \"audit.jsonl\"\n";

fn env(name: &str) -> Option<OsString> {
    match name {
        "ALICE_TOKEN" => Some("alice-secret".into()),
        "BOB_TOKEN" => Some("bob-secret".into()),
        "ADMIN_TOKEN" => Some("admin-secret".into()),
        "PAGE_SECRET" => Some("page client secret".into()),
        "EMPTY" => Some(OsString::new()),
        "PADDED_TOKEN" => Some(" padded-secret-token\n".into()),
        _ => None,
    }
}

fn read(text: &str) -> Result<Config, ConfigError> {
    parse_with_env(text, Path::new("/etc/gw/gateway.toml"), &env)
}

/// The problems of `text`, one string each.
fn problems(text: &str) -> Vec<String> {
    match read(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(ConfigError::Invalid { problems }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        Err(other) => panic!("{other}"),
    }
}

/// The one problem of `text`.
fn problem(text: &str) -> String {
    let mut all = problems(text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

const UPSTREAMS: &str = "[[upstream]]\nname = \"memory\"\ncommand = [\"npx\", \"-y\", \"m\"]\n\n\
                         [[upstream]]\nname = \"web\"\nurl = \"http://127.0.0.1:9000/mcp\"\n";

#[test]
fn the_spec_example_reads_whole() {
    let text = r#"
[listen]
http = "127.0.0.1:8787"
public = false
allow_origins = ["https://app.example.com"]
admin_http = "127.0.0.1:8788"

[admin]
token_env = "ADMIN_TOKEN"

[[client]]
principal = "alice"
token_env = "ALICE_TOKEN"

[[client]]
principal = "bob"
token = "literal-bob"

[log]
path = "gateway-audit.jsonl"
raw_arguments = true
max_bytes = 104857600
checkpoint_every = 500

[lock]
path = "gateway.lock"

[policy]
default = "deny"

[[upstream]]
name = "memory"
command = ["npx", "-y", "@modelcontextprotocol/server-memory"]
env = { MEMORY_FILE_PATH = "/tmp/m.jsonl" }
trusted = true
call_timeout_secs = 10

[[upstream]]
name = "web"
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer x" }

[[assert]]
upstream = "memory"
tool = "*delete*"
destructiveHint = true
readOnlyHint = false

[[rule]]
action = "deny"
tool = "delete_*"
when = ["destructive", "not read_only"]
principal = "bob"

[[rule]]
action = "require_approval"
timeout_secs = 60
on_expiry = "approve"

[[rule]]
action = "rate_limit"
upstream = "w*"
limit = 10
window_secs = 60

[[rule]]
action = "allow"
"#;
    let config = read(text).unwrap();
    assert_eq!(
        config.listen,
        Listen {
            http: Some("127.0.0.1:8787".parse().unwrap()),
            public: false,
            allow_origins: vec!["https://app.example.com".to_owned()],
            admin_http: Some("127.0.0.1:8788".parse().unwrap()),
        }
    );
    assert_eq!(config.admin.unwrap().token.expose(), "admin-secret");
    assert_eq!(config.clients.len(), 2);
    assert_eq!(config.clients[0].principal, "alice");
    assert_eq!(config.clients[0].token.expose(), "alice-secret");
    assert_eq!(config.clients[1].token.expose(), "literal-bob");
    assert_eq!(
        config.log,
        LogConfig {
            path: PathBuf::from("/etc/gw/gateway-audit.jsonl"),
            raw_arguments: true,
            max_bytes: Some(104_857_600),
            checkpoint_every: 500,
            signing_key: None,
        }
    );
    assert_eq!(
        config.lock,
        Some(LockConfig {
            path: PathBuf::from("/etc/gw/gateway.lock"),
            deny_drift: true
        })
    );
    assert_eq!(config.policy.default, DefaultAction::Deny);
    assert_eq!(
        config.upstreams[0],
        UpstreamConfig {
            name: "memory".to_owned(),
            transport: UpstreamTransport::Command {
                program: "npx".to_owned(),
                args: vec![
                    "-y".to_owned(),
                    "@modelcontextprotocol/server-memory".to_owned()
                ],
                env: BTreeMap::from([("MEMORY_FILE_PATH".to_owned(), "/tmp/m.jsonl".to_owned())]),
                resolved_against: None,
            },
            trusted: true,
            call_timeout: Duration::from_secs(10),
            exclude_tools: Vec::new(),
        }
    );
    let UpstreamTransport::Url { url, headers } = &config.upstreams[1].transport else {
        panic!("{:?}", config.upstreams[1]);
    };
    assert_eq!(url, "http://127.0.0.1:9000/mcp");
    assert_eq!(headers["Authorization"].expose(), "Bearer x");
    assert!(!config.upstreams[1].trusted);
    assert_eq!(config.upstreams[1].call_timeout, defaults::CALL_TIMEOUT);
    assert_eq!(config.asserts[0].upstream.as_str(), "memory");
    assert_eq!(config.asserts[0].tool.as_str(), "*delete*");
    assert_eq!(
        config.asserts[0].hints,
        [Some(false), Some(true), None, None]
    );
    let rules = &config.rules;
    assert_eq!(rules[0].action, RuleAction::Deny);
    assert_eq!(rules[0].upstream.as_str(), "*");
    assert_eq!(rules[0].tool.as_str(), "delete_*");
    assert_eq!(rules[0].principal.as_str(), "bob");
    assert_eq!(
        rules[0].when,
        vec![
            Predicate {
                hint: Hint::Destructive,
                holds: true
            },
            Predicate {
                hint: Hint::ReadOnly,
                holds: false
            },
        ]
    );
    assert_eq!(
        rules[1].action,
        RuleAction::RequireApproval {
            timeout: Duration::from_secs(60),
            on_expiry: Expiry::Approve
        }
    );
    assert_eq!(
        rules[2].action,
        RuleAction::RateLimit {
            limit: 10,
            window: Duration::from_secs(60)
        }
    );
    assert_eq!(rules[3].action, RuleAction::Allow);
    assert_eq!(config.path, PathBuf::from("/etc/gw/gateway.toml"));
}

#[test]
fn defaults_when_nothing_else_is_given() {
    let config = read(&format!(
        "{LOG}[[rule]]\naction = \"require_approval\"\n[lock]\npath = \"l\"\ndeny_drift = false\n"
    ))
    .unwrap();
    assert_eq!(config.listen, Listen::default());
    assert_eq!(config.admin, None);
    assert!(config.clients.is_empty() && config.upstreams.is_empty());
    assert!(!config.log.raw_arguments);
    assert!(!config.lock.unwrap().deny_drift);
    assert_eq!(config.policy.default, DefaultAction::Allow);
    assert_eq!(
        config.rules[0].action,
        RuleAction::RequireApproval {
            timeout: defaults::APPROVAL_TIMEOUT,
            on_expiry: Expiry::Deny
        }
    );
}

#[test]
fn relative_paths_resolve_against_the_config_directory() {
    let text = format!(
        "{LOG}[lock]\npath = \"../locks/g.lock\"\n[[upstream]]\nname = \"a\"\n\
         command = [\"./bin/server\", \"./data\"]\n[[upstream]]\nname = \"b\"\n\
         command = [\"/usr/bin/python3\"]\n[[upstream]]\nname = \"c\"\ncommand = [\"python3\"]\n"
    );
    let config = read(&text).unwrap();
    assert_eq!(config.log.path, PathBuf::from("/etc/gw/audit.jsonl"));
    assert_eq!(
        config.lock.unwrap().path,
        PathBuf::from("/etc/gw/../locks/g.lock")
    );
    let programs: Vec<(&str, &[String])> = config
        .upstreams
        .iter()
        .map(|upstream| match &upstream.transport {
            UpstreamTransport::Command { program, args, .. } => (program.as_str(), args.as_slice()),
            other => panic!("{other:?}"),
        })
        .collect();
    // Arguments are the server's business: left as written.
    assert_eq!(
        programs[0],
        ("/etc/gw/./bin/server", &["./data".to_owned()][..])
    );
    assert_eq!(programs[1].0, "/usr/bin/python3");
    assert_eq!(programs[2].0, "python3");
    // A config named without a directory keeps paths relative to the
    // working directory.
    let config = parse_with_env(LOG, Path::new("gateway.toml"), &env).unwrap();
    assert_eq!(config.log.path, PathBuf::from("audit.jsonl"));
}

#[test]
fn toml_syntax_errors_name_line_and_column() {
    assert_eq!(
        problem("[log]\npath = \"x\n"),
        "/etc/gw/gateway.toml:2:10: invalid TOML: invalid basic string, expected `\"`"
    );
}

#[test]
fn unknown_keys_are_named_with_a_suggestion() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"deny\"\n\n[[rule]]\naction = \"deny\"\ntol = \"x\"\n"
        )),
        "/etc/gw/gateway.toml:8:1: rule[1].tol: unknown key `tol` (did you mean `tool`?); \
         this table takes `action`, `upstream`, `tool`, `principal`, `scope`, `when`, `timeout_secs`, \
         `on_expiry`, `limit`, `window_secs`, `after`, `count`"
    );
    assert_eq!(
        problem("[listen]\nhttp = \"127.0.0.1:0\"\nbogus = 1\n\n[log]\npath = \"audit.jsonl\"\n"),
        "/etc/gw/gateway.toml:3:1: listen.bogus: unknown key `bogus`; this table takes \
         `http`, `public`, `allow_origins`, `admin_http`"
    );
    assert_eq!(
        problem(&format!("{LOG}[[rules]]\naction = \"deny\"\n")),
        "/etc/gw/gateway.toml:3:3: rules: unknown table `rules` (did you mean `rule`?)"
    );
}

#[test]
fn every_broken_table_is_reported() {
    assert_eq!(
        problems(&format!(
            "{LOG}[[rule]]\naction = \"deny\"\nlimit = 3\n\n[[rule]]\naction = \"dney\"\n\n\
             [[upstream]]\nname = \"a_b\"\ncommand = [\"x\"]\n"
        )),
        [
            "/etc/gw/gateway.toml:5:9: rule[0].limit: only a rate_limit rule takes a limit",
            "/etc/gw/gateway.toml:8:10: rule[1].action: unknown value `dney` (did you mean \
             `deny`?); expected one of `deny`, `require_approval`, `rate_limit`, `allow`",
            "/etc/gw/gateway.toml:11:8: upstream[0].name: `a_b` is not an upstream name: use 1 \
             to 32 of A-Z, a-z, 0-9 and `-` (tools are exposed as NAME__TOOL, so `_` is not \
             allowed)",
        ]
    );
}

#[test]
fn wrong_types_are_named() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"rate_limit\"\nlimit = \"3\"\nwindow_secs = 1\n"
        )),
        "/etc/gw/gateway.toml:5:9: rule[0].limit: invalid type: string \"3\", expected a whole \
         number of calls per window from 1 to 2^32 - 1"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"allow\"\nwhen = [\"destructive\", 3]\n"
        )),
        "/etc/gw/gateway.toml:5:24: rule[0].when[1]: invalid type: integer `3`, expected a string"
    );
    assert_eq!(
        problem(&format!("rule = 3\n{LOG}")),
        "/etc/gw/gateway.toml:1:8: rule: expected an array of tables (`[[rule]]`), found an integer"
    );
    assert_eq!(
        problem("[[log]]\npath = \"x\"\n"),
        "/etc/gw/gateway.toml:1:1: log: expected a table (`[log]`), found an array"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"rate_limit\"\nlimit = -1\nwindow_secs = 1\n"
        )),
        "/etc/gw/gateway.toml:5:9: rule[0].limit: invalid value: integer `-1`, expected a whole \
         number of calls per window from 1 to 2^32 - 1"
    );
}

#[test]
fn a_whole_number_key_says_its_range_in_words_whatever_else_it_is_given() {
    // A `u32` key: a float, and a number too large for it.
    let limit = |value: &str| {
        problem(&format!(
            "{LOG}[[rule]]\naction = \"rate_limit\"\nlimit = {value}\nwindow_secs = 1\n"
        ))
    };
    let calls = "expected a whole number of calls per window from 1 to 2^32 - 1";
    assert_eq!(
        limit("2.5"),
        format!(
            "/etc/gw/gateway.toml:5:9: rule[0].limit: invalid type: floating point `2.5`, {calls}"
        )
    );
    assert_eq!(
        limit("4294967296"),
        format!(
            "/etc/gw/gateway.toml:5:9: rule[0].limit: invalid value: integer `4294967296`, \
             {calls}"
        )
    );
    // A `u64` key: a string, a negative, a float, one past `u64`.
    for (value, found) in [
        ("\"60\"", "invalid type: string \"60\""),
        ("-1", "invalid value: integer `-1`"),
        ("0.5", "invalid type: floating point `0.5`"),
        (
            "18446744073709551616",
            "invalid value: integer `18446744073709551616`",
        ),
        ("true", "invalid type: boolean `true`"),
    ] {
        assert_eq!(
            problem(&format!("{LOG}[session]\nidle_secs = {value}\n")),
            format!(
                "/etc/gw/gateway.toml:4:13: session.idle_secs: {found}, expected a whole number \
                 of seconds from 1 to 31622400 (366 days)"
            ),
            "{value}"
        );
    }
    // An `i64` key (a negative is the check's to refuse): a string, a
    // float, one past `i64`.
    for (value, found) in [
        ("\"1MiB\"", "invalid type: string \"1MiB\""),
        ("1e6", "invalid type: floating point `1000000.0`"),
        (
            "9223372036854775808",
            "invalid value: integer `9223372036854775808`",
        ),
    ] {
        assert_eq!(
            problem(&format!("{LOG}[redaction]\nmax_scan_bytes = {value}\n")),
            format!(
                "/etc/gw/gateway.toml:4:18: redaction.max_scan_bytes: {found}, expected a whole \
                 number of bytes from 1 to 2^63 - 1"
            ),
            "{value}"
        );
    }
    assert_eq!(
        problem(&format!("{LOG}[redaction]\nmax_scan_bytes = -1\n")),
        "/etc/gw/gateway.toml:4:18: redaction.max_scan_bytes: must be at least 1 (bytes)"
    );
    // Each key's own range: the session's calls, the clock skew (from 0),
    // a count's earlier calls inside its inline table.
    assert_eq!(
        problem(&format!("{LOG}[session]\nmax_calls = \"many\"\n")),
        "/etc/gw/gateway.toml:4:13: session.max_calls: invalid type: string \"many\", expected a \
         whole number of calls from 1 to 10000"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[auth]\nissuer = \"https://as.example.com\"\naudience = \
             \"https://gw.example.com/mcp\"\nclock_skew_secs = -5\n"
        )),
        "/etc/gw/gateway.toml:6:19: auth.clock_skew_secs: invalid value: integer `-5`, expected \
         a whole number of seconds from 0 to 600"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"deny\"\ncount = {{ more_than = 1.5, within_secs = 60 }}\n"
        )),
        "/etc/gw/gateway.toml:5:23: rule[0].count.more_than: invalid type: floating point \
         `1.5`, expected a whole number of earlier calls from 1 to 9999"
    );
}

#[test]
fn log_rotation_and_checkpoint_keys_are_positive_counts_and_the_key_is_read() {
    let config = read(LOG).unwrap();
    assert_eq!(
        (config.log.max_bytes, config.log.checkpoint_every),
        (None, crate::log::CHECKPOINT_EVERY)
    );
    assert!(config.log.signing_key.is_none());
    assert_eq!(
        problems(&format!(
            "{LOG}max_bytes = 0
checkpoint_every = -3
"
        )),
        [
            "/etc/gw/gateway.toml:3:13: log.max_bytes: must be at least 1 (bytes)",
            "/etc/gw/gateway.toml:4:20: log.checkpoint_every: must be at least 1 (entries)",
        ]
    );
    assert!(
        problem(&format!("{LOG}max_bytes = \"10MB\"\n"))
            .starts_with("/etc/gw/gateway.toml:3:13: log.max_bytes: "),
        "{}",
        problem(&format!("{LOG}max_bytes = \"10MB\"\n"))
    );
    assert_eq!(
        problem(&format!("{LOG}signing_key = \"no-such-key.pem\"\n")),
        "/etc/gw/gateway.toml:3:15: log.signing_key: `no-such-key.pem`: cannot read it: No such \
         file or directory (os error 2)"
    );
    // A key file, relative to the config's directory.
    let scratch = crate::scratch::Scratch::new("config-signing-key");
    let key = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
    let pem =
        ed25519_dalek::pkcs8::EncodePrivateKey::to_pkcs8_pem(&key, Default::default()).unwrap();
    std::fs::write(scratch.0.join("key.pem"), pem.as_bytes()).unwrap();
    std::fs::write(scratch.0.join("not-a-key.pem"), "hello\n").unwrap();
    let at = scratch.0.join("gateway.toml");
    let config = parse_with_env(&format!("{LOG}signing_key = \"key.pem\"\n"), &at, &env).unwrap();
    let signing = config.log.signing_key.unwrap();
    assert_eq!(
        format!("{signing:?}"),
        format!("SigningKey(public {})", signing.public_hex())
    );
    let Err(ConfigError::Invalid { problems }) = parse_with_env(
        &format!("{LOG}signing_key = \"not-a-key.pem\"\n"),
        &at,
        &env,
    ) else {
        panic!("a file that is no key was accepted");
    };
    let problem = problems[0].to_string();
    assert!(
        problem.contains(":3:15: log.signing_key: `not-a-key.pem`: not an Ed25519 private key"),
        "{problem}"
    );
}

#[test]
fn missing_required_keys_are_named() {
    assert_eq!(
        problem("[listen]\n"),
        "/etc/gw/gateway.toml:1:1: log: required, but missing: add a `[log]` table with the \
         audit log's `path`"
    );
    assert_eq!(
        problem("[log]\nraw_arguments = true\n"),
        "/etc/gw/gateway.toml:1:1: log.path: required, but missing"
    );
    assert_eq!(
        problem(&format!("{LOG}\n[[rule]]\ntool = \"x\"\n")),
        "/etc/gw/gateway.toml:4:1: rule[0].action: required, but missing"
    );
    assert_eq!(
        problems(&format!("{LOG}[[rule]]\naction = \"rate_limit\"\n")),
        [
            "/etc/gw/gateway.toml:4:10: rule[0].limit: a rate_limit rule needs a limit (calls \
             per window)",
            "/etc/gw/gateway.toml:4:10: rule[0].window_secs: a rate_limit rule needs a window \
             (`window_secs`)",
        ]
    );
    assert_eq!(
        problem(&format!("{LOG}[[upstream]]\ncommand = [\"x\"]\n")),
        "/etc/gw/gateway.toml:3:1: upstream[0].name: required, but missing"
    );
    assert_eq!(
        problem(&format!("{LOG}[[client]]\ntoken = \"t\"\n")),
        "/etc/gw/gateway.toml:3:1: client[0].principal: required, but missing"
    );
}

#[test]
fn tokens_need_exactly_one_of_token_and_token_env() {
    assert_eq!(
        problem(&format!(
            "{LOG}[admin]\ntoken = \"t\"\ntoken_env = \"ADMIN_TOKEN\"\n"
        )),
        "/etc/gw/gateway.toml:5:13: admin.token_env: give either `token` or `token_env`, not both"
    );
    assert_eq!(
        problem(&format!("{LOG}[[client]]\nprincipal = \"alice\"\n")),
        "/etc/gw/gateway.toml:3:1: client[0]: needs a token: give `token_env` (the \
         environment variable that holds it) or `token`"
    );
    assert_eq!(
        problem(&format!("{LOG}[admin]\ntoken = \"\"\n")),
        "/etc/gw/gateway.toml:4:9: admin.token: the token is empty"
    );
}

#[test]
fn a_token_no_request_can_carry_is_refused_without_quoting_it() {
    let rule = "a bearer token is A-Z, a-z, 0-9 and `- . _ ~ + /`, then `=` only at its \
                end (RFC 6750 §2.1), or no request can carry it";
    let client = |token: &str| {
        problem(&format!(
            "{LOG}[[client]]\nprincipal = \"alice\"\ntoken = \"{token}\"\n"
        ))
    };
    for (token, what) in [
        (" alice-secret-token", "a space at character 1"),
        ("alice-secret-token ", "a space at character 19"),
        ("alice\\tsecret", "a space at character 6"),
        (
            "naïve-secret-token",
            "a character that is not ASCII at character 3",
        ),
        ("alice\\u0001secret", "a control character at character 6"),
        ("alice=secret", "`=` before its end at character 6"),
        (
            "alice:secret",
            "a punctuation character outside `- . _ ~ + /` at character 6",
        ),
        (
            "\\\"alice\\\"",
            "a punctuation character outside `- . _ ~ + /` at character 1",
        ),
    ] {
        let shown = client(token);
        assert_eq!(
            shown,
            format!("/etc/gw/gateway.toml:5:9: client[0].token: the token has {what}: {rule}"),
            "{token}"
        );
        assert!(!shown.contains("secret"), "{shown}");
    }
    assert_eq!(
        client("=="),
        "/etc/gw/gateway.toml:5:9: client[0].token: the token is only `=`: a bearer token \
         needs a character before its padding"
    );
    // The admin's, and one from the environment, alike.
    assert_eq!(
        problem(&format!("{LOG}[admin]\ntoken_env = \"PADDED_TOKEN\"\n")),
        format!(
            "/etc/gw/gateway.toml:4:13: admin.token_env: the token in the environment \
             variable `PADDED_TOKEN` has a space at character 1: {rule}"
        )
    );
    // Every character RFC 6750 allows, and padding.
    let config = read(&format!(
        "{LOG}[[client]]\nprincipal = \"alice\"\ntoken = \"Az09-._~+/alice-secret==\"\n"
    ))
    .unwrap();
    assert_eq!(config.clients[0].token.expose(), "Az09-._~+/alice-secret==");
}

#[test]
fn a_config_that_is_not_utf8_names_the_first_bad_byte() {
    let path = Path::new("/etc/gw/gateway.toml");
    let shown =
        |bytes: &[u8]| not_utf8(path, &String::from_utf8(bytes.to_vec()).unwrap_err()).to_string();
    assert_eq!(
        shown(b"[log]\npath = \"audit.jsonl\"\n# caf\xe9 \xff\n"),
        "/etc/gw/gateway.toml:3:6: not UTF-8 (byte 0xE9 at byte offset 32): a TOML config \
         must be UTF-8 text"
    );
    // Columns count characters: `é` before the bad byte is one.
    assert_eq!(
        shown(
            "# é"
                .as_bytes()
                .iter()
                .chain(b"\x80")
                .copied()
                .collect::<Vec<_>>()
                .as_slice()
        ),
        "/etc/gw/gateway.toml:1:4: not UTF-8 (byte 0x80 at byte offset 4): a TOML config \
         must be UTF-8 text"
    );
    assert_eq!(
        shown(b"[log]\n\xe2\x82"),
        "/etc/gw/gateway.toml:2:1: not UTF-8 (the file ends inside a character, at byte \
         offset 6): a TOML config must be UTF-8 text"
    );
}

#[test]
fn an_unset_token_env_names_the_variable_never_a_token() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[client]]\nprincipal = \"alice\"\ntoken_env = \"CAROL_TOKEN\"\n"
        )),
        "/etc/gw/gateway.toml:5:13: client[0].token_env: the environment variable \
         `CAROL_TOKEN` is not set: export it with the token"
    );
    assert_eq!(
        problem(&format!("{LOG}[admin]\ntoken_env = \"EMPTY\"\n")),
        "/etc/gw/gateway.toml:4:13: admin.token_env: the environment variable `EMPTY` is empty"
    );
    // A client whose token is the admin's, or another client's: the
    // message names the tables, not the secret.
    let shared = problems(&format!(
        "{LOG}[admin]\ntoken_env = \"ADMIN_TOKEN\"\n[[client]]\nprincipal = \"a\"\n\
         token = \"admin-secret\"\n[[client]]\nprincipal = \"b\"\ntoken_env = \"ADMIN_TOKEN\"\n"
    ));
    assert_eq!(
        shared,
        [
            "/etc/gw/gateway.toml:5:1: client[0]: the same token as `[admin]`: clients and the \
             admin need separate tokens",
            "/etc/gw/gateway.toml:8:1: client[1]: the same token as client[0]: each client \
             needs a token of its own",
            "/etc/gw/gateway.toml:8:1: client[1]: the same token as `[admin]`: clients and the \
             admin need separate tokens",
        ]
    );
    assert!(shared.iter().all(|line| !line.contains("admin-secret")));
}

#[test]
fn principals_are_named_and_not_local() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[client]]\nprincipal = \"local\"\ntoken = \"t\"\n"
        )),
        "/etc/gw/gateway.toml:4:13: client[0].principal: `local` is the stdio client's \
         principal: give HTTP clients another name"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[client]]\nprincipal = \"\"\ntoken = \"t\"\n"
        )),
        "/etc/gw/gateway.toml:4:13: client[0].principal: the principal is empty"
    );
}

#[test]
fn secrets_print_as_stars_and_compare_in_full() {
    let secret = Secret::new("hunter2");
    assert_eq!(format!("{secret} {secret:?}"), "*** ***");
    assert!(secret.matches("hunter2"));
    assert!(!secret.matches("hunter3"));
    assert!(!secret.matches("hunter"));
    assert!(!secret.matches("hunter22"));
    assert!(!secret.matches(""));
    // A whole config's Debug holds no token or header value.
    let config = read(&format!(
        "{LOG}[admin]\ntoken = \"adm1n\"\n[[upstream]]\nname = \"w\"\nurl = \"https://x/mcp\"\n\
         headers = {{ Authorization = \"Bearer s3cr3t\" }}\n"
    ))
    .unwrap();
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("adm1n") && !debug.contains("s3cr3t"),
        "{debug}"
    );
}

#[test]
fn upstreams_need_exactly_one_of_command_and_url() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\nurl = \"http://h/mcp\"\n"
        )),
        "/etc/gw/gateway.toml:6:7: upstream[0].url: give either `command` (a stdio server) or \
         `url` (an HTTP server), not both"
    );
    assert_eq!(
        problem(&format!("{LOG}[[upstream]]\nname = \"a\"\n")),
        "/etc/gw/gateway.toml:3:1: upstream[0]: needs `command` (a stdio server, \
         `[\"program\", \"arg\"]`) or `url` (a streamable HTTP server)"
    );
    assert_eq!(
        problem(&format!("{LOG}[[upstream]]\nname = \"a\"\ncommand = []\n")),
        "/etc/gw/gateway.toml:5:11: upstream[0].command: the command is empty: give the program \
         and its arguments, `[\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]`"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"a\"\nurl = \"ftp://h/mcp\"\n"
        )),
        "/etc/gw/gateway.toml:5:7: upstream[0].url: `ftp://h/mcp` is not an http or https URL: \
         write it like `http://127.0.0.1:9000/mcp`"
    );
}

#[test]
fn transport_keys_fit_their_transport() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\nheaders = {{ A = \"b\" }}\n"
        )),
        "/etc/gw/gateway.toml:6:11: upstream[0].headers: only a `url` upstream takes headers; \
         give a stdio server `env`"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\nenv = {{ A = \"b\" }}\n"
        )),
        "/etc/gw/gateway.toml:6:7: upstream[0].env: only a `command` upstream takes env; give \
         an HTTP server `headers`"
    );
    // A header value is a secret: a bad one is not quoted.
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\nheaders = {{ X = \"s3cr3t\\n\" }}\n"
        )),
        "/etc/gw/gateway.toml:6:17: upstream[0].headers.X: the header's value holds a control \
         character (a line break?)"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\nheaders = {{ \"A B\" = \"v\" }}\n"
        )),
        "/etc/gw/gateway.toml:6:21: upstream[0].headers.A B: `A B` is not a header name: use \
         letters, digits and `-`"
    );
}

#[test]
fn upstream_names_are_checked_and_unique() {
    let long = "a".repeat(33);
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"{long}\"\ncommand = [\"x\"]\n"
        )),
        format!(
            "/etc/gw/gateway.toml:4:8: upstream[0].name: `{long}` is not an upstream name: use 1 \
             to 32 of A-Z, a-z, 0-9 and `-` (tools are exposed as NAME__TOOL, so `_` is not \
             allowed)"
        )
    );
    assert!(
        read(&format!(
            "{LOG}[[upstream]]\nname = \"{}\"\ncommand = [\"x\"]\n",
            "a-Z9".repeat(8)
        ))
        .is_ok()
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}\n[[upstream]]\nname = \"memory\"\ncommand = [\"y\"]\n"
        )),
        "/etc/gw/gateway.toml:12:8: upstream[2].name: `memory` is upstream[0]'s name too: each \
         upstream needs a name of its own"
    );
}

#[test]
fn an_upstream_excludes_tools_by_glob() {
    let config = read(&format!(
        "{LOG}[[upstream]]\nname = \"m\"\ncommand = [\"x\"]\nexclude_tools = [\"delete_*\", \"a.b\"]\n"
    ))
    .unwrap();
    let globs: Vec<&str> = config.upstreams[0]
        .exclude_tools
        .iter()
        .map(glob::Pattern::as_str)
        .collect();
    assert_eq!(globs, ["delete_*", "a.b"]);
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"m\"\ncommand = [\"x\"]\nexclude_tools = [\"ok\", \"[x\"]\n"
        )),
        "/etc/gw/gateway.toml:6:24: upstream[0].exclude_tools[1]: `[x` is not a glob: invalid \
         range pattern (at character 0)"
    );
}

#[test]
fn bad_globs_are_named() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"deny\"\ntool = \"[delete\"\n"
        )),
        "/etc/gw/gateway.toml:5:8: rule[0].tool: `[delete` is not a glob: invalid range \
         pattern (at character 0)"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[assert]]\ntool = \"***\"\nreadOnlyHint = true\n"
        )),
        "/etc/gw/gateway.toml:4:8: assert[0].tool: `***` is not a glob: wildcards are either \
         regular `*` or recursive `**` (at character 2)"
    );
}

#[test]
fn likely_mistakes_are_warned_of() {
    let text = format!(
        "{LOG}{UPSTREAMS}[listen]\nhttp = \"127.0.0.1:0\"\n\
         [[rule]]\naction = \"require_approval\"\ntool = \"x\"\n"
    );
    assert_eq!(
        read(&text).unwrap().warnings(),
        [
            "rule[0] requires approval, but `listen.admin_http` is not set: nobody can \
             approve, so its calls wait until they expire, then are denied",
            "`listen.http` is set but there is neither a `[[client]]` nor `[auth]`: every HTTP \
             request gets 401",
        ]
    );
    assert!(
        read(&format!("{LOG}{UPSTREAMS}"))
            .unwrap()
            .warnings()
            .is_empty()
    );
    let short = format!("{LOG}{UPSTREAMS}[[client]]\nprincipal = \"bob\"\ntoken = \"x\"\n");
    assert_eq!(
        read(&short).unwrap().warnings(),
        [
            "client `bob`'s token is shorter than 16 characters (1): use at least 16 random \
             ones (`openssl rand -hex 16`)"
        ]
    );
    let raw = format!(
        "[log]\npath = \"audit.jsonl\"\nraw_arguments = true\n{UPSTREAMS}\
         [[redact]]\ndetectors = [\"secrets\"]\n"
    );
    assert_eq!(
        read(&raw).unwrap().warnings(),
        [
            "`[log] raw_arguments` writes every call's arguments to the audit log as sent, and \
             `[[redact]]` checks results only: a secret a client sends reaches the log"
        ]
    );
    let window = |idle: &str, within: u32| {
        format!(
            "{LOG}{UPSTREAMS}{idle}[[rule]]\naction = \"deny\"\n\
             count = {{ more_than = 2, within_secs = {within} }}\n"
        )
    };
    assert_eq!(
        read(&window("[session]\nidle_secs = 60\n", 61))
            .unwrap()
            .warnings(),
        [
            "rule[0].count.within_secs (61) is longer than `[session] idle_secs` (60): a \
             history ends after 60 s without a call, so calls before such a pause are not \
             counted"
        ]
    );
    assert!(
        read(&window("[session]\nidle_secs = 60\n", 60))
            .unwrap()
            .warnings()
            .is_empty()
    );
    // The default `idle_secs` (30 minutes) holds a window of an hour no
    // more than an explicit one would.
    assert_eq!(read(&window("", 3600)).unwrap().warnings().len(), 1);
}

#[test]
fn principal_globs_must_match_a_principal() {
    let clients = "[[client]]\nprincipal = \"alice\"\ntoken = \"alice-token-0123456789\"\n";
    let text =
        format!("{LOG}{UPSTREAMS}{clients}[[rule]]\naction = \"deny\"\nprincipal = \"mallory\"\n");
    let problem = problem(&text);
    assert!(
        problem.ends_with(
            "rule[0].principal: `mallory` matches no principal; the principals are `alice`, \
             `local`"
        ),
        "{problem}"
    );
    for principal in ["alice", "local", "*"] {
        let text = format!(
            "{LOG}{UPSTREAMS}{clients}[[rule]]\naction = \"deny\"\nprincipal = \"{principal}\"\n"
        );
        assert!(read(&text).is_ok(), "{principal}");
    }
}

#[test]
fn upstream_globs_must_match_an_upstream() {
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nupstream = \"memroy\"\n"
        )),
        "/etc/gw/gateway.toml:12:12: rule[0].upstream: `memroy` matches no upstream (did you \
         mean `memory`?); the upstreams are `memory`, `web`"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[assert]]\nupstream = \"x*\"\nreadOnlyHint = true\n"
        )),
        "/etc/gw/gateway.toml:11:12: assert[0].upstream: `x*` matches no upstream; the \
         upstreams are `memory`, `web`"
    );
    assert!(
        read(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nupstream = \"*e*\"\n"
        ))
        .is_ok()
    );
    // An upstream whose own table is broken is still a name rules may
    // use: one problem, not two.
    assert_eq!(
        problem(&format!(
            "{LOG}[[upstream]]\nname = \"memory\"\n[[rule]]\naction = \"deny\"\n\
             upstream = \"memory\"\n"
        )),
        "/etc/gw/gateway.toml:3:1: upstream[0]: needs `command` (a stdio server, \
         `[\"program\", \"arg\"]`) or `url` (a streamable HTTP server)"
    );
}

#[test]
fn asserts_assert_something() {
    assert_eq!(
        problem(&format!("{LOG}[[assert]]\ntool = \"x\"\n")),
        "/etc/gw/gateway.toml:3:1: assert[0]: asserts no hint: give at least one of \
         `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`"
    );
    assert_eq!(
        problem(&format!("{LOG}[[assert]]\nread_only = true\n")),
        "/etc/gw/gateway.toml:4:1: assert[0].read_only: unknown key `read_only` (did you mean `readOnlyHint`?); this table \
         takes `upstream`, `tool`, `readOnlyHint`, `destructiveHint`, `idempotentHint`, \
         `openWorldHint`"
    );
}

#[test]
fn unknown_predicates_are_named() {
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"deny\"\nwhen = [\"destructive\", \"not readonly\"]\n"
        )),
        "/etc/gw/gateway.toml:5:24: rule[0].when[1]: unknown predicate `not readonly` (did you \
         mean `read_only`?); the predicates are `read_only`, `destructive`, `idempotent` and \
         `open_world`, each may follow `not `"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"deny\"\nwhen = [\"!destructive\"]\n"
        )),
        "/etc/gw/gateway.toml:5:9: rule[0].when[0]: unknown predicate `!destructive` (did you \
         mean `destructive`?); the predicates are `read_only`, `destructive`, `idempotent` and \
         `open_world`, each may follow `not `"
    );
}

#[test]
fn keys_must_fit_the_rule_action() {
    assert_eq!(
        problems(&format!(
            "{LOG}[[rule]]\naction = \"deny\"\nlimit = 1\nwindow_secs = 1\n\
             [[rule]]\naction = \"rate_limit\"\nlimit = 1\nwindow_secs = 1\ntimeout_secs = 5\n\
             on_expiry = \"deny\"\n"
        )),
        [
            "/etc/gw/gateway.toml:5:9: rule[0].limit: only a rate_limit rule takes a limit",
            "/etc/gw/gateway.toml:6:15: rule[0].window_secs: only a rate_limit rule takes a window",
            "/etc/gw/gateway.toml:11:16: rule[1].timeout_secs: only a require_approval rule takes \
             a timeout",
            "/etc/gw/gateway.toml:12:13: rule[1].on_expiry: only a require_approval rule takes an \
             expiry decision",
        ]
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"require_approval\"\non_expiry = \"allow\"\n"
        )),
        "/etc/gw/gateway.toml:5:13: rule[0].on_expiry: unknown value `allow`; expected one of `deny`, `approve`"
    );
}

#[test]
fn zero_limits_windows_and_timeouts_are_refused() {
    assert_eq!(
        problems(&format!(
            "{LOG}[[rule]]\naction = \"rate_limit\"\nlimit = 0\nwindow_secs = 0\n\
             [[rule]]\naction = \"require_approval\"\ntimeout_secs = 0\n\
             [[upstream]]\nname = \"a\"\ncommand = [\"x\"]\ncall_timeout_secs = 0\n"
        )),
        [
            "/etc/gw/gateway.toml:5:9: rule[0].limit: must be at least 1 (calls per window); to \
             refuse every call, use `action = \"deny\"`",
            "/etc/gw/gateway.toml:6:15: rule[0].window_secs: must be at least 1 (seconds)",
            "/etc/gw/gateway.toml:9:16: rule[1].timeout_secs: must be at least 1 (seconds)",
            "/etc/gw/gateway.toml:13:21: upstream[0].call_timeout_secs: must be at least 1 (seconds)",
        ]
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[[rule]]\naction = \"require_approval\"\ntimeout_secs = 31622401\n"
        )),
        "/etc/gw/gateway.toml:5:16: rule[0].timeout_secs: must be at most 31622400 (366 days)"
    );
}

#[test]
fn listen_addresses_are_loopback_unless_public() {
    assert_eq!(
        problem(&format!("[listen]\nhttp = \"0.0.0.0:8787\"\n{LOG}")),
        "/etc/gw/gateway.toml:2:8: listen.http: `0.0.0.0:8787` is not a loopback address: set \
         `listen.public = true` to serve other hosts, or listen on 127.0.0.1"
    );
    let public = read(&format!(
        "[listen]\nhttp = \"0.0.0.0:8787\"\npublic = true\n{LOG}"
    ))
    .unwrap();
    assert_eq!(public.listen.http, Some("0.0.0.0:8787".parse().unwrap()));
    assert!(read(&format!("[listen]\nhttp = \"[::1]:0\"\n{LOG}")).is_ok());
    assert_eq!(
        problem(&format!("[listen]\nhttp = \"localhost:8787\"\n{LOG}")),
        "/etc/gw/gateway.toml:2:8: listen.http: `localhost:8787` is not an IP address and port: \
         write it like `127.0.0.1:8787` or `[::1]:8787`"
    );
    assert_eq!(
        problem(&format!(
            "[listen]\nadmin_http = \"10.0.0.1:8788\"\n[admin]\ntoken = \"t\"\n{LOG}"
        )),
        "/etc/gw/gateway.toml:2:14: listen.admin_http: `10.0.0.1:8788` is not a loopback \
         address: set `listen.public = true` to serve other hosts, or listen on 127.0.0.1"
    );
}

#[test]
fn the_admin_endpoint_needs_an_admin_token_and_its_own_port() {
    assert_eq!(
        problem(&format!("[listen]\nadmin_http = \"127.0.0.1:8788\"\n{LOG}")),
        "/etc/gw/gateway.toml:2:14: listen.admin_http: the admin endpoint needs an `[admin]` \
         table with its token (`token_env` or `token`)"
    );
    assert_eq!(
        problem(&format!(
            "[listen]\nhttp = \"127.0.0.1:8788\"\nadmin_http = \"127.0.0.1:8788\"\n\
             [admin]\ntoken = \"t\"\n{LOG}"
        )),
        "/etc/gw/gateway.toml:3:14: listen.admin_http: `127.0.0.1:8788` is `listen.http` too: \
         the admin endpoint needs a port of its own"
    );
}

#[test]
fn allowed_origins_are_origins() {
    assert_eq!(
        problem(&format!(
            "[listen]\nallow_origins = [\"https://ok.example\", \"https://x/path\"]\n{LOG}"
        )),
        "/etc/gw/gateway.toml:2:40: listen.allow_origins[1]: `https://x/path` is not an origin: \
         write `scheme://host` or `scheme://host:port`, without a path"
    );
}

#[test]
fn an_unreadable_file_is_named() {
    let error = load(Path::new("/nonexistent/gateway.toml")).unwrap_err();
    assert!(matches!(error, ConfigError::Read { .. }));
    assert!(
        error
            .to_string()
            .starts_with("/nonexistent/gateway.toml: cannot read the config: "),
        "{error}"
    );
}

#[test]
fn predicates_print_as_written() {
    assert_eq!(
        predicate("not open_world").unwrap().to_string(),
        "not open_world"
    );
    assert_eq!(predicate("idempotent").unwrap().to_string(), "idempotent");
}

#[test]
fn state_names_a_redis_and_its_prefix_and_refuses_what_is_not_one() {
    let config = read(LOG).unwrap();
    assert_eq!(config.state, StateConfig::default());
    assert_eq!(config.state.redis, None);

    let text = format!(
        "{LOG}[state]\nredis = \"redis://:pw@127.0.0.1:6379/2\"\nprefix = \"team-a\"\n\
         rate_limit_fallback = \"local\"\n"
    );
    let state = read(&text).unwrap().state;
    assert_eq!(state.redis.as_deref(), Some("redis://:pw@127.0.0.1:6379/2"));
    assert_eq!(state.prefix, "team-a");
    assert_eq!(state.rate_limit_fallback, RateLimitFallback::Local);
    let defaulted = read(&format!("{LOG}[state]\nredis = \"redis://localhost\"\n"))
        .unwrap()
        .state;
    assert_eq!(defaulted.prefix, defaults::STATE_PREFIX);
    assert_eq!(defaulted.rate_limit_fallback, RateLimitFallback::Deny);

    // The URL may hold a password: the problem does not quote it.
    let said = problem(&format!("{LOG}[state]\nredis = \"http://:secret@host\"\n"));
    assert_eq!(
        said,
        "/etc/gw/gateway.toml:4:9: state.redis: not a Redis URL (the scheme must be \
         `redis://` or `rediss://`): write it like `redis://127.0.0.1:6379`"
    );
    assert!(!said.contains("secret"));
    assert_eq!(
        problem(&format!("{LOG}[state]\nprefix = \"a b\"\n")),
        "/etc/gw/gateway.toml:4:10: state.prefix: must be non-empty, without whitespace, \
         control characters, `{` or `}`"
    );
    assert!(
        problem(&format!("{LOG}[state]\nrate_limit_fallback = \"maybe\"\n"))
            .contains("state.rate_limit_fallback")
    );
    assert!(problem(&format!("{LOG}[state]\nredis_url = \"redis://x\"\n")).contains("redis_url"));
}

#[test]
fn the_replica_is_named_by_the_config_or_the_host() {
    let config = read(&format!("[gateway]\nreplica = \"eu-west-2\"\n{LOG}")).unwrap();
    assert_eq!(config.gateway.replica, "eu-west-2");
    assert_eq!(
        read(&format!(
            "[gateway]\nreplica = \"{}\"\n{LOG}",
            "a-Z9".repeat(8)
        ))
        .unwrap()
        .gateway
        .replica,
        "a-Z9".repeat(8)
    );
    // Absent, in either way: the host's name.
    let host = GatewayConfig::for_this_host();
    assert!(
        is_name(&host.replica, defaults::MAX_REPLICA_NAME),
        "{host:?}"
    );
    assert_eq!(read(LOG).unwrap().gateway, host);
    assert_eq!(read(&format!("[gateway]\n{LOG}")).unwrap().gateway, host);

    let long = "r".repeat(33);
    for (bad, shown) in [
        ("a_b", "a_b".to_owned()),
        ("", String::new()),
        (long.as_str(), long.clone()),
        ("web\\u001b[2J", "web\\u{1b}[2J".to_owned()),
    ] {
        assert_eq!(
            problem(&format!("{LOG}\n[gateway]\nreplica = \"{bad}\"\n")),
            format!(
                "/etc/gw/gateway.toml:5:11: gateway.replica: `{shown}` is not a replica name: use \
                 1 to 32 of A-Z, a-z, 0-9 and `-`"
            )
        );
    }
    assert_eq!(
        problem(&format!("{LOG}[gateway]\nreplicas = \"a\"\n")),
        "/etc/gw/gateway.toml:4:1: gateway.replicas: unknown key `replicas` (did you mean \
         `replica`?); this table takes `replica`"
    );
    assert_eq!(
        problem(&format!("{LOG}[gateway]\nreplica = 3\n")),
        "/etc/gw/gateway.toml:4:11: gateway.replica: invalid type: integer `3`, expected a string"
    );
}

#[test]
fn a_host_name_is_cut_and_sanitised_to_a_replica_name() {
    assert_eq!(replica_of_host("web-1").as_deref(), Some("web-1"));
    // A fully qualified name: its first label.
    assert_eq!(
        replica_of_host("gw-3.eu.example.com").as_deref(),
        Some("gw-3")
    );
    // Characters outside the rule become `-`, none left at either end.
    assert_eq!(replica_of_host("_build_box_").as_deref(), Some("build-box"));
    assert_eq!(replica_of_host("höst").as_deref(), Some("h-st"));
    // Cut to 32 characters, without a `-` left at the cut.
    let long = format!("{}-{}", "a".repeat(31), "b".repeat(10));
    assert_eq!(replica_of_host(&long), Some("a".repeat(31)));
    assert_eq!(
        replica_of_host(&"x".repeat(40)).as_deref(),
        Some("x".repeat(32).as_str())
    );
    // Nothing of a name: none (the default is then `gateway`).
    for nothing in ["", ".", "___", ".example.com", "ü"] {
        assert_eq!(replica_of_host(nothing), None, "{nothing:?}");
    }
    assert!(is_name(defaults::REPLICA, defaults::MAX_REPLICA_NAME));
}

#[test]
fn auth_reads_with_its_defaults() {
    let config = read(&format!(
        "{LOG}[auth]\nissuer = \"https://issuer.example.com\"\naudience = \
         \"https://gw.example.com/mcp\"\n"
    ))
    .unwrap();
    assert_eq!(
        config.auth,
        Some(AuthConfig {
            issuer: "https://issuer.example.com".to_owned(),
            audience: "https://gw.example.com/mcp".to_owned(),
            principal_claim: "sub".to_owned(),
            clock_skew: Duration::from_secs(60),
            scopes: Vec::new(),
            jwks_max_age: Duration::from_secs(300),
            jwks_min_refresh: Duration::from_secs(30),
        })
    );
    // A loopback issuer may be plain http, for tests.
    let config = read(&format!(
        "{LOG}[auth]\nissuer = \"http://127.0.0.1:9400\"\naudience = \
         \"http://localhost:8787/mcp\"\nprincipal_claim = \"email\"\nclock_skew_secs = 0\n\
         scopes = [\"mcp:tools\"]\njwks_max_age_secs = 2\njwks_min_refresh_secs = 1\n"
    ))
    .unwrap();
    let auth = config.auth.unwrap();
    assert_eq!(auth.principal_claim, "email");
    assert_eq!(auth.clock_skew, Duration::ZERO);
    assert_eq!(auth.scopes, ["mcp:tools"]);
    assert_eq!(auth.jwks_min_refresh, Duration::from_secs(1));
}

#[test]
fn auth_urls_are_https_unless_loopback_and_each_problem_is_named() {
    assert_eq!(
        problems(&format!(
            "{LOG}[auth]\nissuer = \"http://issuer.example.com\"\naudience = \"ftp://gw/mcp\"\n\
             clock_skew_secs = 601\nscopes = [\"a b\"]\nprincipal_claim = \"\"\n"
        )),
        [
            "/etc/gw/gateway.toml:4:10: auth.issuer: `http://issuer.example.com` is not usable: \
             `http` is only for a loopback host (127.0.0.1, [::1], localhost): use `https`; \
             write it like `https://issuer.example.com`",
            "/etc/gw/gateway.toml:5:12: auth.audience: `ftp://gw/mcp` is not usable: the scheme \
             must be `https`; write it like `https://gateway.example.com/mcp`",
            "/etc/gw/gateway.toml:6:19: auth.clock_skew_secs: must be at most 600 (seconds): a \
             larger skew keeps expired tokens alive",
            "/etc/gw/gateway.toml:7:11: auth.scopes[0]: `a b` is not a scope: one or more \
             visible ASCII characters, without spaces, `\"` or `\\` (RFC 6749 §3.3)",
            "/etc/gw/gateway.toml:8:19: auth.principal_claim: the claim's name is empty: give \
             the claim that names the caller, like `sub`",
        ]
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[auth]\nissuer = \"https://as.example.com/?tenant=1\"\naudience = \"https://gw/mcp\"\n"
        )),
        "/etc/gw/gateway.toml:4:10: auth.issuer: `https://as.example.com/?tenant=1` is not \
         usable: it has a query (`?...`), which this URL may not; write it like \
         `https://issuer.example.com`"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}[auth]\nissuer = \"https://as.example.com\"\n"
        )),
        "/etc/gw/gateway.toml:3:1: auth.audience: required, but missing"
    );
}

#[test]
fn a_rule_scope_needs_auth_and_auth_opens_the_principal_globs() {
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"allow\"\nscope = \"notes:write\"\n"
        )),
        "/etc/gw/gateway.toml:12:9: rule[0].scope: only OAuth tokens carry scopes: add an \
         `[auth]` table, or the rule never matches"
    );
    let auth = "[auth]\nissuer = \"https://as.example.com\"\naudience = \"https://gw/mcp\"\n";
    let config = read(&format!(
        "{LOG}{auth}{UPSTREAMS}[[rule]]\naction = \"allow\"\nscope = \"notes:write\"\n\
         principal = \"carol@*\"\n"
    ))
    .unwrap();
    assert_eq!(config.rules[0].scope.as_deref(), Some("notes:write"));
    assert_eq!(config.rules[0].principal.as_str(), "carol@*");
    assert!(
        config.warnings().is_empty(),
        "`[auth]` lets HTTP clients in without a [[client]]: {:?}",
        config.warnings()
    );
}

#[test]
fn approval_names_the_page_as_approvers_reach_it() {
    let text = format!("{LOG}[approval]\npage_url = \"https://gw.example.com/approvals\"\n");
    assert_eq!(
        read(&text).unwrap().approval.page_url.as_deref(),
        Some("https://gw.example.com/approvals")
    );
    assert_eq!(read(LOG).unwrap().approval.page_url, None);
    assert_eq!(
        problem(&format!(
            "{LOG}[approval]\npage_url = \"https://gw/approvals#top\"\n"
        )),
        "/etc/gw/gateway.toml:4:12: approval.page_url: `https://gw/approvals#top` is not the \
         page's URL (the webhook adds the call's own `#call-ID`: leave the fragment out): \
         write it like `https://gateway.example.com/approvals`"
    );
    assert!(
        problem(&format!(
            "{LOG}[approval]\npage_url = \"ftp://gw/approvals\"\n"
        ))
        .contains("the scheme must be `http://` or `https://`")
    );
}

#[test]
fn approval_names_a_webhook_and_refuses_what_is_not_one() {
    assert_eq!(read(LOG).unwrap().approval, ApprovalConfig::default());
    let text = format!("{LOG}[approval]\nwebhook = \"http://127.0.0.1:9000/parked?key=k\"\n");
    assert_eq!(
        read(&text).unwrap().approval.webhook.as_deref(),
        Some("http://127.0.0.1:9000/parked?key=k")
    );
    // The URL may hold a secret: the problem does not quote it.
    let said = problem(&format!(
        "{LOG}[approval]\nwebhook = \"ftp://host/secret\"\n"
    ));
    assert_eq!(
        said,
        "/etc/gw/gateway.toml:4:11: approval.webhook: not a webhook URL (the scheme must be \
         `http://` or `https://`): write it like `http://127.0.0.1:9000/parked`"
    );
    assert!(!said.contains("secret"));
    assert_eq!(
        problem(&format!("{LOG}[approval]\nwebhook = \"http://h/p#top\"\n")),
        "/etc/gw/gateway.toml:4:11: approval.webhook: not a webhook URL (a fragment is never \
         sent: leave it out): write it like `http://127.0.0.1:9000/parked`"
    );
    assert!(
        problem(&format!("{LOG}[approval]\nwebhook = \"not a url\"\n")).starts_with(
            "/etc/gw/gateway.toml:4:11: approval.webhook: not a webhook URL (not a URL: "
        )
    );
    assert_eq!(
        problem(&format!("{LOG}[approval]\nhook = \"http://h\"\n")),
        "/etc/gw/gateway.toml:4:1: approval.hook: unknown key `hook`; this table takes \
         `webhook`, `approver_scope`, `client_id`, `client_secret_env`, `redirect_uri`, \
         `page_url`"
    );
}

const AUTH: &str = "[auth]\nissuer = \"https://as.example.com\"\n\
                    audience = \"https://gw.example.com/mcp\"\n";

#[test]
fn approvers_sign_in_through_the_issuer_with_a_scope_and_a_client() {
    let text =
        format!("{LOG}{AUTH}[approval]\napprover_scope = \"mcp:approve\"\nclient_id = \"page\"\n");
    assert_eq!(
        read(&text).unwrap().approval.sign_in,
        Some(ApproverSignIn {
            scope: "mcp:approve".to_owned(),
            client_id: "page".to_owned(),
            client_secret: None,
            redirect_uri: None,
        })
    );
    let text = format!(
        "{LOG}{AUTH}[approval]\napprover_scope = \"mcp:approve\"\nclient_id = \"page\"\n\
         client_secret_env = \"PAGE_SECRET\"\n\
         redirect_uri = \"https://approvals.example.com/sign-in/callback\"\n"
    );
    let sign_in = read(&text).unwrap().approval.sign_in.unwrap();
    assert_eq!(
        sign_in.client_secret.as_ref().map(Secret::expose),
        Some("page client secret")
    );
    assert_eq!(
        sign_in.redirect_uri.as_deref(),
        Some("https://approvals.example.com/sign-in/callback")
    );
    // The secret never shows in the config's Debug.
    assert!(!format!("{sign_in:?}").contains("page client secret"));
    // An empty secret, or one with a character outside visible ASCII and
    // space (the newline here), is refused naming the variable only.
    for name in ["EMPTY", "PADDED_TOKEN"] {
        assert_eq!(
            problem(&format!(
                "{LOG}{AUTH}[approval]\napprover_scope = \"s\"\nclient_id = \"p\"\n\
                 client_secret_env = \"{name}\"\n"
            )),
            format!(
                "/etc/gw/gateway.toml:9:21: approval.client_secret_env: the client's secret in \
                 the environment variable `{name}` is empty or holds a character outside \
                 visible ASCII and space (RFC 6749 Appendix A.2)"
            )
        );
    }
}

#[test]
fn the_sign_in_through_the_issuer_refuses_what_it_cannot_use() {
    assert_eq!(
        problem(&format!(
            "{LOG}[approval]\napprover_scope = \"mcp:approve\"\nclient_id = \"page\"\n"
        )),
        "/etc/gw/gateway.toml:4:18: approval.approver_scope: the sign-in through the issuer \
         needs `[auth]`: approvers sign in at its `issuer`, and their tokens are verified as \
         its access tokens are"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{AUTH}[approval]\napprover_scope = \"mcp:approve\"\n"
        )),
        "/etc/gw/gateway.toml:7:18: approval.approver_scope: the sign-in through the issuer \
         needs `client_id` too: the page's client id, registered with the `[auth]` issuer"
    );
    assert_eq!(
        problem(&format!("{LOG}{AUTH}[approval]\nclient_id = \"page\"\n")),
        "/etc/gw/gateway.toml:7:13: approval.client_id: the sign-in through the issuer needs \
         `approver_scope` too: the scope an approver's token carries, like `mcp:approve`"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{AUTH}[approval]\nredirect_uri = \"https://h/cb\"\n"
        )),
        "/etc/gw/gateway.toml:7:16: approval.redirect_uri: only the sign-in through the \
         issuer takes this: give `approver_scope` and `client_id` too"
    );
    let all = problems(&format!(
        "{LOG}{AUTH}[approval]\napprover_scope = \"mcp approve\"\nclient_id = \"a b\"\n\
         client_secret_env = \"NO_SUCH_SECRET\"\nredirect_uri = \"http://gw.example.com/cb\"\n"
    ));
    assert_eq!(
        all,
        [
            "/etc/gw/gateway.toml:7:18: approval.approver_scope: `mcp approve` is not a scope: \
             one or more visible ASCII characters, without spaces, `\"` or `\\` (RFC 6749 §3.3)",
            "/etc/gw/gateway.toml:8:13: approval.client_id: `a b` is not a client id: one or \
             more visible ASCII characters, without spaces (RFC 6749 §2.2)",
            "/etc/gw/gateway.toml:9:21: approval.client_secret_env: the environment variable \
             `NO_SUCH_SECRET` is not set: export it with the client's secret",
            "/etc/gw/gateway.toml:10:16: approval.redirect_uri: `http://gw.example.com/cb` is \
             not usable: `http` is only for a loopback host (OAuth 2.1 §2.3.1): use `https`; \
             write it like `https://approvals.example.com/sign-in/callback`",
        ]
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{AUTH}[approval]\napprover_scope = \"s\"\nclient_id = \"p\"\n\
             redirect_uri = \"https://h/cb#frag\"\n"
        )),
        "/etc/gw/gateway.toml:9:16: approval.redirect_uri: `https://h/cb#frag` is not usable: \
         it has a fragment (`#...`), which a redirect URI may not; write it like \
         `https://approvals.example.com/sign-in/callback`"
    );
}

#[test]
fn the_session_cookie_is_secure_unless_the_admin_endpoint_is_loopback() {
    let loopback: SocketAddr = "127.0.0.1:8788".parse().unwrap();
    let public: SocketAddr = "192.0.2.7:8788".parse().unwrap();
    let admin = read(&format!("{LOG}[admin]\ntoken_env = \"ADMIN_TOKEN\"\n"))
        .unwrap()
        .admin
        .unwrap();
    assert_eq!(admin.secure_cookie, None);
    assert!(!admin.cookie_is_secure(loopback));
    assert!(admin.cookie_is_secure(public));
    let forced = read(&format!(
        "{LOG}[admin]\ntoken_env = \"ADMIN_TOKEN\"\nsecure_cookie = true\n"
    ))
    .unwrap()
    .admin
    .unwrap();
    assert!(forced.cookie_is_secure(loopback));
    assert!(
        problem(&format!(
            "{LOG}[admin]\ntoken_env = \"ADMIN_TOKEN\"\nsecure_cookie = \"yes\"\n"
        ))
        .starts_with("/etc/gw/gateway.toml:5:17: admin.secure_cookie: ")
    );
}

#[test]
fn rules_that_look_back_read_their_after_count_and_session() {
    let config = read(&format!(
        "{LOG}{UPSTREAMS}[session]\nidle_secs = 600\nmax_calls = 50\nper = \"principal\"\n\
         [[rule]]\naction = \"require_approval\"\nwhen = [\"open_world\", \"not read_only\"]\n\
         after = [\"open_world\", \"upstream:web and tainted\", \"tool:fetch*\"]\n\
         [[rule]]\naction = \"deny\"\ncount = {{ of = \"destructive\", more_than = 3, within_secs = 60 }}\n"
    ))
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(config.session.idle, Duration::from_secs(600));
    assert_eq!(config.session.max_calls, 50);
    assert_eq!(config.session.per, SessionPer::Principal);
    let after: Vec<String> = config.rules[0]
        .after
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        after,
        ["open_world", "upstream:web and tainted", "tool:fetch*"]
    );
    let count = config.rules[1].count.as_ref().unwrap();
    assert_eq!(count.more_than, 3);
    assert_eq!(count.within, Duration::from_secs(60));
    assert_eq!(count.to_string(), "3 destructive calls within 60 s");
    assert!(config.rules[0].looks_back() && config.rules[1].looks_back());
    // Without `[session]`, its defaults.
    let plain = read(&format!("{LOG}{UPSTREAMS}")).unwrap();
    assert_eq!(plain.session, SessionConfig::default());
    assert_eq!(plain.session.idle, defaults::SESSION_IDLE);
    assert_eq!(plain.session.per, SessionPer::Session);
}

#[test]
fn bad_look_backs_are_named_where_they_are() {
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nafter = [\"open_word\"]\n"
        )),
        "/etc/gw/gateway.toml:12:10: rule[0].after[0]: unknown term `open_word` (did you mean \
         `open_world`?); a term is a hint predicate (`open_world`, `not read_only`, ...), \
         `tool:GLOB`, `upstream:GLOB`, `tainted` or `*`, and terms are joined by ` and `"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nafter = [\"open_world\", \"upstream:wbe\"]\n"
        )),
        "/etc/gw/gateway.toml:12:24: rule[0].after[1]: `upstream:wbe` matches no upstream; the \
         upstreams are `memory`, `web`"
    );
    assert!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nafter = [\"tool:[x\"]\n"
        ))
        .starts_with("/etc/gw/gateway.toml:12:10: rule[0].after[0]: `tool:[x` is not a glob")
    );
    assert!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nafter = [\" \"]\n"
        ))
        .contains("rule[0].after[0]: is empty")
    );
    assert!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nafter = [\"open_world and tool:\"]\n"
        ))
        .contains("rule[0].after[0]: `tool:` names no glob")
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\n\
             count = {{ more_than = 0, within_secs = 60 }}\n"
        )),
        "/etc/gw/gateway.toml:12:23: rule[0].count.more_than: must be at least 1 (earlier \
         calls); a rule without `count` matches from the first call"
    );
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[session]\nmax_calls = 10\n[[rule]]\naction = \"deny\"\n\
             count = {{ more_than = 10, within_secs = 60 }}\n"
        )),
        "/etc/gw/gateway.toml:14:23: rule[0].count.more_than: must be less than `[session] \
         max_calls` (10): a session's history keeps no more calls, so the count would never be \
         reached"
    );
    assert!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\n\
             count = {{ of = \"destructiv\", more_than = 2, within_secs = 60 }}\n"
        ))
        .contains("rule[0].count.of: unknown term `destructiv` (did you mean `destructive`?)")
    );
    assert!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\ncount = {{ more_than = 2 }}\n"
        ))
        .contains("within_secs")
    );
    // A count that is not a table says what one is, not a type's name.
    assert_eq!(
        problem(&format!(
            "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\ncount = 5\n"
        )),
        "/etc/gw/gateway.toml:12:9: rule[0].count: invalid type: integer `5`, expected an \
         inline table `{ of = \"CONDITION\", more_than = N, within_secs = N }`"
    );
    assert_eq!(
        problem(&format!("{LOG}[session]\nmax_calls = 0\n")),
        "/etc/gw/gateway.toml:4:13: session.max_calls: must be from 1 to 10000 (calls kept per \
         session)"
    );
    assert_eq!(
        problem(&format!("{LOG}[session]\nidle_secs = 0\n")),
        "/etc/gw/gateway.toml:4:13: session.idle_secs: must be at least 1 (seconds)"
    );
}

#[test]
fn redact_tables_read_with_their_defaults() {
    let config = read(&format!(
        "{LOG}{UPSTREAMS}[redaction]\nmax_scan_bytes = 4096\n\n[[redact]]\n\
         detectors = [\"aws_access_key\", \"secrets\"]\n\n[[redact]]\nupstream = \"web\"\n\
         tool = \"web__read*\"\npattern = \"hunter[0-9]+\"\nreplacement = \"***\"\n\n\
         [[redact]]\ndetectors = [\"private_key\"]\naction = \"deny_result\"\n"
    ))
    .unwrap();
    assert_eq!(config.redaction.max_scan_bytes, 4096);
    assert_eq!(config.redacts.len(), 3);
    let first = &config.redacts[0];
    assert_eq!(first.upstream.as_str(), "*");
    assert_eq!(first.tool.as_str(), "*");
    assert_eq!(first.action, RedactAction::Mask { replacement: None });
    // `secrets` after a named one adds the others, each once.
    let RedactMatcher::Detectors(detectors) = &first.matcher else {
        panic!("{first:?}")
    };
    assert_eq!(detectors.len(), crate::redact::Detector::ALL.len());
    assert_eq!(detectors[0], crate::redact::Detector::AwsAccessKey);
    let second = &config.redacts[1];
    assert_eq!(second.tool.as_str(), "web__read*");
    assert!(
        matches!(&second.matcher, RedactMatcher::Pattern(pattern) if pattern.as_str() == "hunter[0-9]+")
    );
    assert_eq!(
        second.action,
        RedactAction::Mask {
            replacement: Some("***".to_owned())
        }
    );
    assert_eq!(config.redacts[2].action, RedactAction::DenyResult);
    let plain = read(&format!("{LOG}{UPSTREAMS}")).unwrap();
    assert_eq!(plain.redaction.max_scan_bytes, 1_048_576);
    assert!(plain.redacts.is_empty());
}

#[test]
fn bad_redact_tables_are_named_at_their_key() {
    let at = |extra: &str| problem(&format!("{LOG}{UPSTREAMS}{extra}"));
    let error = at("[[redact]]\npattern = \"(unclosed\"\n");
    assert!(
        error.starts_with(
            "/etc/gw/gateway.toml:11:11: redact[0].pattern: not a usable regular expression: "
        ),
        "{error}"
    );
    assert!(
        error.ends_with("unclosed group (at character 1)"),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
    let error = at("[[redact]]\npattern = '\\w{1000}{1000}'\n");
    assert!(
        error.starts_with("/etc/gw/gateway.toml:11:11: redact[0].pattern: ")
            && error.contains("size limit"),
        "{error}"
    );
    assert_eq!(
        at("[[redact]]\npattern = \"\"\n"),
        "/etc/gw/gateway.toml:11:11: redact[0].pattern: is empty: give a regular expression"
    );
    assert_eq!(
        at("[[redact]]\npattern = \"a*\"\n"),
        "/etc/gw/gateway.toml:11:11: redact[0].pattern: not a usable regular expression: \
         matches the empty string: a pattern must match some text"
    );
    assert_eq!(
        at("[[redact]]\ndetectors = [\"secrets\", \"aws_key\"]\n"),
        "/etc/gw/gateway.toml:11:25: redact[0].detectors[1]: unknown detector `aws_key`; the \
         detectors are `private_key`, `aws_access_key`, `github_token`, `gitlab_token`, \
         `openai_api_key`, `slack_token`, `bearer_token`, `secrets`"
    );
    assert!(
        at("[[redact]]\ndetectors = [\"all\"]\n").contains(
            "redact[0].detectors[0]: unknown detector `all` (did you mean `secrets`, all of them?); "
        ),
        "{}",
        at("[[redact]]\ndetectors = [\"all\"]\n")
    );
    assert_eq!(
        at("[[redact]]\ndetectors = [\"\"]\n"),
        "/etc/gw/gateway.toml:11:14: redact[0].detectors[0]: unknown detector ``; the \
         detectors are `private_key`, `aws_access_key`, `github_token`, `gitlab_token`, \
         `openai_api_key`, `slack_token`, `bearer_token`, `secrets`"
    );
    assert!(
        at("[[redact]]\ndetectors = []\n")
            .starts_with("/etc/gw/gateway.toml:11:13: redact[0].detectors: is empty: "),
    );
    assert_eq!(
        at("[[redact]]\npattern = \"x\"\ndetectors = [\"secrets\"]\n"),
        "/etc/gw/gateway.toml:11:11: redact[0]: give `pattern` or `detectors`, not both: use \
         two `[[redact]]` tables"
    );
    assert_eq!(
        at("[[redact]]\ntool = \"read\"\n"),
        "/etc/gw/gateway.toml:10:1: redact[0]: says nothing to look for: give `pattern = \
         \"REGEX\"` or `detectors = [\"secrets\"]`"
    );
    assert_eq!(
        at(
            "[[redact]]\ndetectors = [\"secrets\"]\naction = \"deny_result\"\nreplacement = \"x\"\n"
        ),
        "/etc/gw/gateway.toml:13:15: redact[0].replacement: only a mask rule takes a \
         replacement: a deny_result rule shows nothing"
    );
    assert!(
        at("[[redact]]\ndetectors = [\"secrets\"]\nreplacement = \"\"\n")
            .starts_with("/etc/gw/gateway.toml:12:15: redact[0].replacement: is empty"),
    );
    assert!(
        at("[[redact]]\ndetectors = [\"secrets\"]\naction = \"drop\"\n")
            .starts_with("/etc/gw/gateway.toml:12:10: redact[0].action: unknown value `drop`"),
    );
    assert_eq!(
        at("[[redact]]\nupstream = \"nope\"\ndetectors = [\"secrets\"]\n"),
        "/etc/gw/gateway.toml:11:12: redact[0].upstream: `nope` matches no upstream; the \
         upstreams are `memory`, `web`"
    );
    assert_eq!(
        at("[redaction]\nmax_scan_bytes = 0\n"),
        "/etc/gw/gateway.toml:11:18: redaction.max_scan_bytes: must be at least 1 (bytes)"
    );
}

#[test]
fn redact_tool_globs_that_match_no_tool_are_warned_of() {
    let config = read(&format!(
        "{LOG}{UPSTREAMS}[[redact]]\ntool = \"raed*\"\ndetectors = [\"secrets\"]\n\n\
         [[redact]]\ntool = \"memory__read*\"\ndetectors = [\"secrets\"]\n"
    ))
    .unwrap();
    let tools = [("memory", "read_graph"), ("web", "fetch")];
    assert_eq!(
        crate::policy::unmatched_tool_globs(&config, tools.iter().copied()),
        ["redact[0].tool `raed*` matches no tool of the upstreams `*` names"]
    );
}

#[test]
fn a_table_key_given_anything_else_says_it_takes_a_table() {
    let table = r#"expected a table of names to values, as { NAME = "value" }"#;
    for (text, key) in [
        (
            format!("{LOG}[[upstream]]\nname = \"n\"\ncommand = [\"notes\"]\nenv = [\"A=1\"]\n"),
            "upstream[0].env: invalid type: sequence",
        ),
        (
            format!(
                "{LOG}[[upstream]]\nname = \"n\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = \"x\"\n"
            ),
            "upstream[0].headers: invalid type: string \"x\"",
        ),
    ] {
        let problem = problem(&text);
        assert!(problem.contains(&format!("{key}, {table}")), "{problem}");
    }
}

#[test]
fn a_list_key_given_one_value_says_it_takes_a_list_in_brackets() {
    let list = r#"expected a list in brackets, as ["a", "b"]"#;
    for (text, key) in [
        (
            format!("{LOG}[[upstream]]\nname = \"n\"\ncommand = \"notes\"\n"),
            "upstream[0].command: invalid type: string \"notes\"",
        ),
        (
            format!("{LOG}[[redact]]\ndetectors = \"slack_token\"\n"),
            "redact[0].detectors: invalid type: string \"slack_token\"",
        ),
        (
            format!("{LOG}[[rule]]\naction = \"deny\"\nwhen = \"open_world\"\n"),
            "rule[0].when: invalid type: string \"open_world\"",
        ),
    ] {
        let problem = problem(&text);
        assert!(problem.contains(&format!("{key}, {list}")), "{problem}");
    }
}
