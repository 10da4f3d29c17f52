//! The approvals page's HTML, made here so that everything from a peer
//! (tool and upstream names, principals, arguments, reasons) is escaped in
//! one place before any browser sees it: the page's script only moves
//! these fragments into place, and never reads peer text itself.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use mcp_hints::Hint;
use serde_json::Value;

use super::sessions::Approver;
use crate::approval::{DriftDiff, Parked};
use crate::log::rfc3339;

/// The page around `body`: `page/layout.html` with `csrf` (in a `<meta>`
/// for the script), `title` and `body` in place, its markers in that
/// order.
pub(super) fn document(title: &str, csrf: &str, body: &str) -> String {
    let layout = include_str!("layout.html");
    let mut page = String::with_capacity(layout.len() + body.len() + 128);
    // Split at each marker rather than `replace`: text put in place is
    // never searched for a marker again.
    let mut rest = layout;
    for (marker, value) in [
        ("{{csrf}}", escape(csrf)),
        ("{{title}}", escape(title)),
        ("{{body}}", body.to_owned()),
    ] {
        if let Some((before, after)) = rest.split_once(marker) {
            page.push_str(before);
            page.push_str(&value);
            rest = after;
        }
    }
    page.push_str(rest);
    page
}

/// `text` with `&`, `<`, `>`, `"` and `'` as character references, safe
/// as element text and as a quoted attribute's value; and every character
/// a page would not show as itself (controls but newline and tab,
/// bidirectional overrides, invisible characters:
/// `mcp_hints_core::escape::escaped`) written as `\u{HEX}`, as the
/// gateway's terminal output writes them, so that the text an approver
/// reads is the text the call carries (a right-to-left override cannot
/// show `evil` as `live`), and a server-sent event's data holds no
/// carriage return.
pub(super) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            // The pretty-printed arguments' own lines and indents.
            '\n' | '\t' => escaped.push(c),
            c if mcp_hints_core::escape::escaped(c) => {
                let _ = write!(escaped, "\\u{{{:x}}}", u32::from(c));
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// The most bytes of a parked call's pretty-printed arguments the page
/// shows: 64 KiB. Past it the rest is left out and its length said, so
/// that one call with megabytes of arguments does not make every update
/// of the page (each sends the whole list) megabytes long.
const MAX_SHOWN_ARGUMENTS: usize = 64 * 1024;

/// `arguments` cut to [`MAX_SHOWN_ARGUMENTS`] bytes at a character's
/// boundary, saying how many bytes were left out.
fn shown_arguments(arguments: &str) -> std::borrow::Cow<'_, str> {
    if arguments.len() <= MAX_SHOWN_ARGUMENTS {
        return std::borrow::Cow::Borrowed(arguments);
    }
    let mut end = MAX_SHOWN_ARGUMENTS;
    while !arguments.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!(
        "{}\n… {} more bytes not shown",
        &arguments[..end],
        arguments.len() - end
    ))
}

/// `text` as one URL path segment: every byte outside the unreserved set
/// (RFC 3986 §2.3) percent-encoded.
fn path_segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

/// The sign-in form, with `error` said above it when there is one, and,
/// when `issuer` (`[approval]` configures the sign-in through the
/// issuer), the button that signs in there instead.
pub(super) fn sign_in(csrf: &str, error: Option<&str>, issuer: bool) -> String {
    let error = error
        .map(|error| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(error)))
        .unwrap_or_default();
    let csrf_field = format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(csrf)
    );
    let issuer = if issuer {
        format!(
            "<form method=\"post\" action=\"/sign-in/issuer\" class=\"issuer\">\n{csrf_field}\n\
             <button type=\"submit\">Sign in with your identity provider</button>\n</form>\n\
             <p class=\"or\">or with the admin token:</p>\n"
        )
    } else {
        String::new()
    };
    let body = format!(
        "<main class=\"sign-in\">\n<h1>Approvals</h1>\n{error}{issuer}\
         <form method=\"post\" action=\"/sign-in\">\n{csrf_field}\n\
         <label>Admin token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" required autofocus></label>\n\
         <label>Your name, for the audit log <input type=\"text\" name=\"name\" autocomplete=\"username\" placeholder=\"admin\" maxlength=\"64\"></label>\n\
         <button type=\"submit\">Sign in</button>\n</form>\n</main>"
    );
    document("Sign in: approvals", csrf, &body)
}

/// A page that only says `message` (an error when `error`), with a link
/// back to the approvals page.
pub(super) fn notice(message: &str, error: bool) -> String {
    let class = if error {
        " class=\"error\" role=\"alert\""
    } else {
        ""
    };
    let body = format!(
        "<main class=\"sign-in\">\n<h1>Approvals</h1>\n<p{class}>{}</p>\n\
         <p><a href=\"/approvals\">Go to the approvals page</a>.</p>\n</main>",
        escape(message)
    );
    document("Approvals", "", &body)
}

/// The page of a signed-in `approver`: who they are, a sign-out form, and
/// the parked calls as [`calls`] renders them.
pub(super) fn approvals(
    approver: &Approver,
    csrf: &str,
    pending: &Result<Vec<Parked>, String>,
    now: SystemTime,
) -> String {
    let body = format!(
        "<header class=\"bar\">\n<h1>Approvals</h1>\n\
         <p class=\"who\">Signed in as <strong>{name}</strong> ({via})</p>\n\
         <form method=\"post\" action=\"/sign-out\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button type=\"submit\" class=\"quiet\">Sign out</button></form>\n\
         <p id=\"live\" class=\"live\" aria-live=\"polite\">not live: reload to see new calls</p>\n\
         </header>\n<main id=\"pending\">\n{calls}\n</main>",
        name = escape(&approver.name),
        via = approver.via.words(),
        csrf = escape(csrf),
        calls = calls(pending, csrf, now),
    );
    document("Approvals", csrf, &body)
}

/// The parked calls, oldest first, each with its Approve and Deny forms
/// (which carry `csrf`); or why they cannot be read. One element,
/// `#calls`, whose `data-count` is how many.
pub(super) fn calls(pending: &Result<Vec<Parked>, String>, csrf: &str, now: SystemTime) -> String {
    let calls = match pending {
        Ok(calls) => calls,
        Err(error) => {
            return format!(
                "<div id=\"calls\" data-count=\"0\">\n<p class=\"error\" role=\"alert\">The parked \
                 calls cannot be read: {}</p>\n</div>",
                escape(error)
            );
        }
    };
    let mut html = format!("<div id=\"calls\" data-count=\"{}\">\n", calls.len());
    if calls.is_empty() {
        html.push_str("<p class=\"empty\">No call is waiting for an approver.</p>\n");
    }
    for call in calls {
        html.push_str(&card(call, csrf, now));
    }
    html.push_str("</div>");
    html
}

/// How long is left until `expires_at`, at `now`: zero once past.
fn left(expires_at: SystemTime, now: SystemTime) -> Duration {
    expires_at.duration_since(now).unwrap_or_default()
}

/// `M:SS left`, as the script counts it down too.
fn left_words(left: Duration) -> String {
    let secs = left.as_secs();
    if secs == 0 {
        return "expiring".to_owned();
    }
    format!("{}:{:02} left", secs / 60, secs % 60)
}

/// One parked call.
fn card(call: &Parked, csrf: &str, now: SystemTime) -> String {
    let id = escape(&call.id);
    let left = left(call.expires_at, now);
    let name = escape(&crate::namespaced(&call.upstream, &call.tool));
    let arguments = serde_json::to_string_pretty(&Value::Object(call.arguments.clone()))
        .unwrap_or_else(|_| "{}".to_owned());
    let action = |verb: &str, label: &str| {
        format!(
            "<form method=\"post\" action=\"/{verb}/{path}\" data-decide=\"{verb}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button type=\"submit\" class=\"{verb}\">{label}</button></form>",
            path = escape(&path_segment(&call.id)),
            csrf = escape(csrf),
        )
    };
    let mut html = String::new();
    let _ = write!(
        html,
        "<article class=\"call\" id=\"call-{id}\" data-id=\"{id}\">\n\
         <header><h2><code>{name}</code></h2>\
         <span class=\"left\" data-left-ms=\"{ms}\">{words}</span></header>\n\
         <dl class=\"facts\">\
         <dt>Upstream</dt><dd><code>{upstream}</code></dd>\
         <dt>Tool</dt><dd><code>{tool}</code></dd>\
         <dt>Principal</dt><dd><code>{principal}</code></dd>\
         <dt>Why</dt><dd>{reason}</dd>\
         <dt>Parked</dt><dd><time datetime=\"{parked}\">{parked}</time></dd>\
         <dt>Call id</dt><dd><code>{id}</code></dd>\
         </dl>\n{hints}{drift}\
         <h3>Arguments</h3>\n<pre class=\"arguments\">{arguments}</pre>\n\
         <div class=\"decide\">{approve}{deny}<span class=\"outcome\" role=\"status\"></span></div>\n\
         </article>\n",
        ms = left.as_millis(),
        words = left_words(left),
        upstream = escape(&call.upstream),
        tool = escape(&call.tool),
        principal = escape(&call.principal),
        reason = escape(&call.reason),
        parked = escape(&rfc3339::format(call.parked_at)),
        hints = hints(&call.hints),
        drift = call.drift.as_ref().map(drift).unwrap_or_default(),
        arguments = escape(&shown_arguments(&arguments)),
        approve = action("approve", "Approve"),
        deny = action("deny", "Deny"),
    );
    html
}

/// The four hints the gateway acted on, each with its source, from the
/// parked record's `hints` (`{"readOnlyHint": {"value", "source"}}`); a
/// note when the record has none.
fn hints(hints: &Value) -> String {
    let Some(hints) = hints.as_object() else {
        return "<p class=\"note\">The hints were not recorded with this call.</p>\n".to_owned();
    };
    let mut rows = String::new();
    for hint in Hint::ALL {
        let entry = hints.get(hint.wire_name());
        let value = entry
            .and_then(|entry| entry.get("value"))
            .map_or_else(|| "?".to_owned(), Value::to_string);
        let source = entry
            .and_then(|entry| entry.get("source"))
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let _ = write!(
            rows,
            "<tr><td><code>{name}</code></td><td>{value}</td>\
             <td class=\"source source-{source}\">{source}</td></tr>",
            name = hint.wire_name(),
            value = escape(&value),
            source = escape(source),
        );
    }
    format!(
        "<table class=\"hints\"><caption>Hints the gateway acted on</caption>\
         <thead><tr><th>hint</th><th>value</th><th>source</th></tr></thead>\
         <tbody>{rows}</tbody></table>\n"
    )
}

/// A drifted tool's difference from its approved fingerprint: each
/// changed part with its value now, each changed annotation before and
/// after.
fn drift(diff: &DriftDiff) -> String {
    let pretty = |value: &Value| {
        escape(&serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()))
    };
    let mut html = String::from("<section class=\"drift\">\n<h3>Drift</h3>\n");
    if diff.new {
        html.push_str("<p>Nothing was approved for this tool: it is new since the lock.</p>\n");
    } else {
        let _ = writeln!(
            html,
            "<p>Changed since approval: {}</p>",
            escape(&diff.what.join(", "))
        );
    }
    if !diff.annotations.is_empty() {
        html.push_str(
            "<table class=\"annotations\"><caption>Annotations</caption><thead><tr>\
             <th>annotation</th><th>approved</th><th>now</th></tr></thead><tbody>",
        );
        let shown = |value: &Option<Value>| match value {
            Some(value) => format!("<code>{}</code>", escape(&value.to_string())),
            None => "<em>absent</em>".to_owned(),
        };
        for change in &diff.annotations {
            let _ = write!(
                html,
                "<tr><td><code>{}</code></td><td class=\"was\">{}</td><td class=\"now\">{}</td></tr>",
                escape(&change.name),
                shown(&change.approved),
                shown(&change.now),
            );
        }
        html.push_str("</tbody></table>\n");
    }
    for part in &diff.parts {
        let how = match (&part.approved, &part.now) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "changed",
        };
        let _ = write!(
            html,
            "<details class=\"part\"><summary><code>{name}</code> {how}</summary>",
            name = escape(&part.part)
        );
        if let Some(approved) = &part.approved {
            let _ = write!(
                html,
                "<p class=\"digest\">approved digest <code>{}</code></p>",
                escape(approved)
            );
        }
        match &part.value {
            Some(value) => {
                let _ = write!(html, "<pre class=\"now\">{}</pre>", pretty(value));
            }
            None => html.push_str("<p><em>absent now</em></p>"),
        }
        html.push_str("</details>\n");
    }
    html.push_str("</section>\n");
    html
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use serde_json::json;

    use super::*;
    use crate::approval::{AnnotationChange, PartChange};

    fn parked(arguments: Value) -> Parked {
        Parked {
            id: "c-1".to_owned(),
            principal: "<b>mallory</b>".to_owned(),
            upstream: "up".to_owned(),
            tool: "note\"><script>x()</script>".to_owned(),
            arguments: arguments.as_object().unwrap().clone(),
            parked_at: UNIX_EPOCH + Duration::from_secs(100),
            expires_at: UNIX_EPOCH + Duration::from_secs(400),
            reason: "rule[0] (require_approval note) requires an approver".to_owned(),
            hints: json!({
                "readOnlyHint": {"value": false, "source": "asserted"},
                "destructiveHint": {"value": false, "source": "declared"},
                "idempotentHint": {"value": false, "source": "declared"},
                "openWorldHint": {"value": true, "source": "defaulted"},
            }),
            drift: None,
        }
    }

    #[test]
    fn peer_text_is_escaped_everywhere_it_is_shown() {
        let call = parked(json!({"text": "<script>alert('x')</script>", "n": 1}));
        let html = calls(
            &Ok(vec![call]),
            "tok",
            UNIX_EPOCH + Duration::from_secs(277),
        );
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(
            html.contains(
                "&quot;text&quot;: &quot;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot;"
            ),
            "{html}"
        );
        assert!(
            html.contains("<code>&lt;b&gt;mallory&lt;/b&gt;</code>"),
            "{html}"
        );
        assert!(
            html.contains("<code>up__note&quot;&gt;&lt;script&gt;x()&lt;/script&gt;</code>"),
            "{html}"
        );
        // Pretty-printed: one member a line.
        assert!(html.contains("{\n  &quot;n&quot;: 1,\n"), "{html}");
        // The time left, counted down by the script from here.
        assert!(
            html.contains("data-left-ms=\"123000\">2:03 left</span>"),
            "{html}"
        );
        // Each hint with its source.
        assert!(
            html.contains(
                "<tr><td><code>readOnlyHint</code></td><td>false</td>\
                 <td class=\"source source-asserted\">asserted</td></tr>"
            ),
            "{html}"
        );
        assert!(html.contains("source-defaulted\">defaulted"), "{html}");
        // Both forms carry the session's token.
        assert_eq!(html.matches("name=\"csrf\" value=\"tok\"").count(), 2);
        assert!(html.contains("action=\"/approve/c-1\""), "{html}");
        assert!(html.contains("data-count=\"1\""), "{html}");
    }

    #[test]
    fn text_a_page_would_not_show_as_itself_is_written_out_and_long_arguments_are_cut() {
        // A right-to-left override would show `evil` as `live`; a C1
        // control and a carriage return show as nothing.
        let call = parked(json!({"text": "via \u{202e}evil", "c1": "a\u{9b}b", "cr": "x\ry"}));
        let html = calls(&Ok(vec![call]), "tok", UNIX_EPOCH);
        assert!(html.contains("via \\u{202e}evil"), "{html}");
        assert!(html.contains("a\\u{9b}b"), "{html}");
        assert!(
            !html.contains('\u{202e}') && !html.contains('\u{9b}'),
            "{html}"
        );
        // serde_json writes a carriage return in a string as `\r` itself.
        assert!(!html.contains('\r'), "{html}");
        assert_eq!(escape("a\rb\tc\nd"), "a\\u{d}b\tc\nd");

        let long = "é".repeat(40_000);
        let call = parked(json!({ "text": long }));
        let html = calls(&Ok(vec![call]), "tok", UNIX_EPOCH);
        assert!(html.len() < MAX_SHOWN_ARGUMENTS + 8_192, "{}", html.len());
        assert!(html.contains(" more bytes not shown"), "a cut says so");
        let short = shown_arguments("{}");
        assert_eq!(short, "{}");
    }

    #[test]
    fn an_id_is_one_path_segment_and_an_error_is_escaped() {
        let mut call = parked(json!({}));
        call.id = "a/b c\"".to_owned();
        let html = calls(&Ok(vec![call]), "t", UNIX_EPOCH + Duration::from_secs(400));
        assert!(html.contains("action=\"/deny/a%2Fb%20c%22\""), "{html}");
        assert!(html.contains("expiring"), "{html}");
        let error = calls(&Err("redis <down>".to_owned()), "t", UNIX_EPOCH);
        assert!(
            error.contains("cannot be read: redis &lt;down&gt;"),
            "{error}"
        );
        let empty = calls(&Ok(Vec::new()), "t", UNIX_EPOCH);
        assert!(empty.contains("No call is waiting"), "{empty}");
    }

    #[test]
    fn a_drifted_tool_shows_each_changed_part_and_annotation() {
        let mut call = parked(json!({}));
        call.drift = Some(DriftDiff {
            new: false,
            what: vec!["description".into(), "readOnlyHint true -> false".into()],
            parts: vec![PartChange {
                part: "description".into(),
                approved: Some("ab12".into()),
                now: Some("cd34".into()),
                value: Some(json!("Deletes <everything>")),
            }],
            annotations: vec![AnnotationChange {
                name: "readOnlyHint".into(),
                approved: Some(json!(true)),
                now: Some(json!(false)),
            }],
        });
        let html = calls(&Ok(vec![call]), "t", UNIX_EPOCH);
        assert!(
            html.contains("Changed since approval: description, readOnlyHint true -&gt; false"),
            "{html}"
        );
        assert!(
            html.contains(
                "<tr><td><code>readOnlyHint</code></td><td class=\"was\"><code>true</code></td>\
                 <td class=\"now\"><code>false</code></td></tr>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<summary><code>description</code> changed</summary>"),
            "{html}"
        );
        assert!(
            html.contains("&quot;Deletes &lt;everything&gt;&quot;"),
            "{html}"
        );
    }

    #[test]
    fn the_layout_takes_title_token_and_body_once_each() {
        let page = document("A <title>", "c\"t", "<p>{{title}}</p>");
        assert!(page.contains("<title>A &lt;title&gt;</title>"), "{page}");
        assert!(page.contains("content=\"c&quot;t\""), "{page}");
        // The body is not searched for markers.
        assert!(page.contains("<p>{{title}}</p>"), "{page}");
    }
}
