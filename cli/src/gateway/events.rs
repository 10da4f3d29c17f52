//! The gateway library's events as the stderr lines of `gateway serve` and
//! `gateway check`: `gateway: MESSAGE`, and `UPSTREAM: LINE` for a line of
//! an upstream's own stderr, each written whole the moment it happens.

use std::fmt::{self, Write as _};

use mcp_hints_gateway::STDERR_TARGET;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

/// From now on, prints on stderr every event of the gateway library
/// (targets under `mcp_hints_gateway`) at info and above, one line each.
/// Other crates' events (rmcp's, the replay-safe client's) are not printed:
/// the gateway's stderr is its own lines and its upstreams'. In a process
/// that already has a subscriber, that one stays.
pub fn print_events() {
    let lines = tracing_subscriber::fmt::layer()
        .event_format(Lines)
        // Unbuffered: each line is out before the next thing happens (an
        // operator, or a test, waits for it).
        .with_writer(std::io::stderr);
    let subscriber = tracing_subscriber::registry()
        .with(Targets::new().with_target("mcp_hints_gateway", LevelFilter::INFO))
        .with(lines);
    // Refused only when one is set already, which then prints.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// The gateway's line for an event: its message after `gateway: `, or after
/// the upstream's name for a line of the upstream's stderr. The library
/// escaped the peer text in it already; the other fields are for log
/// pipelines and are not printed.
struct Lines;

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Printed::default();
        event.record(&mut fields);
        if event.metadata().target() == STDERR_TARGET {
            writeln!(writer, "{}: {}", fields.upstream, fields.message)
        } else {
            writeln!(writer, "gateway: {}", fields.message)
        }
    }
}

/// The fields of an event that its line shows.
#[derive(Default)]
struct Printed {
    message: String,
    upstream: String,
}

impl Printed {
    fn field(&mut self, field: &Field) -> Option<&mut String> {
        match field.name() {
            "message" => Some(&mut self.message),
            "upstream" => Some(&mut self.upstream),
            _ => None,
        }
    }
}

impl Visit for Printed {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(text) = self.field(field) {
            text.push_str(value);
        }
    }

    // The message (`format_args!`) and `%`-fields arrive here; their
    // `Debug` is their `Display`.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(text) = self.field(field) {
            // Writing to a String cannot fail.
            let _ = write!(text, "{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines a subscriber like [`print_events`]'s writes for the
    /// events `emit` sends, on this thread.
    fn printed(emit: impl FnOnce()) -> String {
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = out.clone();
        let lines = tracing_subscriber::fmt::layer()
            .event_format(Lines)
            .with_writer(move || Sink(sink.clone()));
        let subscriber = tracing_subscriber::registry()
            .with(Targets::new().with_target("mcp_hints_gateway", LevelFilter::INFO))
            .with(lines);
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = out.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn gateway_events_are_its_lines_and_upstream_lines_carry_the_name() {
        let out = printed(|| {
            tracing::info!(
                target: "mcp_hints_gateway::front::serve",
                address = "127.0.0.1:1",
                "serving MCP over streamable HTTP at http://127.0.0.1:1/mcp"
            );
            tracing::warn!(
                target: "mcp_hints_gateway::upstream",
                upstream = "notes",
                reason = "gone",
                "upstream `{}` is unavailable: gone",
                "notes"
            );
            tracing::info!(target: STDERR_TARGET, upstream = %"notes", cut = false, "ready");
        });
        assert_eq!(
            out,
            "gateway: serving MCP over streamable HTTP at http://127.0.0.1:1/mcp\n\
             gateway: upstream `notes` is unavailable: gone\n\
             notes: ready\n"
        );
    }

    #[test]
    fn other_crates_and_debug_events_are_not_printed() {
        let out = printed(|| {
            tracing::info!(target: "mcp_hints::client", "resent");
            tracing::warn!(target: "rmcp::service", "closed");
            tracing::debug!(target: "mcp_hints_gateway::upstream", "detail");
        });
        assert_eq!(out, "");
    }
}
