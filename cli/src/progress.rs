//! Progress of long work on stderr: one line that says what the command is
//! waiting for (a server's answer to `initialize`, a run, a call, the tool
//! being checked), redrawn in place by `indicatif`. Shown only when stderr
//! is a terminal and `--quiet` is not given; stdout, where reports and
//! `--json` go, is never touched, and the line is cleared before a report
//! or an error is written.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::text::one_line;

/// How often the spinner turns while nothing else changes, so that a
/// server that never answers is seen to be waited on.
const TICK: Duration = Duration::from_millis(120);

/// A progress line on stderr, or nothing (hidden).
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A line on stderr when it is a terminal and not `quiet`; else one
    /// that draws nothing.
    pub fn new(quiet: bool) -> Progress {
        Progress::on(!quiet && std::io::stderr().is_terminal())
    }

    fn on(shown: bool) -> Progress {
        if !shown {
            return Progress {
                bar: ProgressBar::hidden(),
            };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed:>3} {wide_msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(TICK);
        Progress { bar }
    }

    /// Says `message`, a line put together from our text and server text
    /// already [`shown`](crate::text::shown); it is escaped once more as a
    /// whole, so nothing in it can drive the terminal.
    pub fn say(&self, message: &str) {
        if !self.bar.is_hidden() {
            self.bar.set_message(one_line(message).into_owned());
        }
    }

    /// Clears the line (before a question, a report or an error).
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// What verify says while it works, from the engine's [`Progress`](mcp_hints::verify::Progress).
pub fn verify_message(event: mcp_hints::verify::Progress<'_>, runs: u32, run: u32) -> String {
    use crate::text::shown;
    use mcp_hints::verify::Progress as Event;
    match event {
        Event::Run { run, runs } => {
            format!("run {run}/{runs}: starting the server and reading its tool list")
        }
        Event::Call { tool, calls } => {
            format!(
                "run {run}/{runs}: {calls} calls sent; checking `{}`",
                shown(tool)
            )
        }
        Event::Shrink { tool, hint } => format!(
            "run {run}/{runs}: shrinking the finding of {} on `{}` (replays on fresh servers)",
            hint.wire_name(),
            shown(tool)
        ),
        _ => format!("run {run}/{runs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_hints::Hint;
    use mcp_hints::verify::Progress as Event;

    #[test]
    fn peer_text_in_progress_is_escaped() {
        let message = verify_message(
            Event::Call {
                tool: "evil\u{1b}[2J\nname",
                calls: 7,
            },
            10,
            3,
        );
        assert_eq!(
            message,
            "run 3/10: 7 calls sent; checking `evil\\u{1b}[2J\\nname`"
        );
        let shrink = verify_message(
            Event::Shrink {
                tool: "a\u{202e}b",
                hint: Hint::ReadOnly,
            },
            2,
            1,
        );
        assert!(shrink.contains("`a\\u{202e}b`"), "{shrink}");
    }
}
