//! A client that adds notes to the `notes` server through a lossy link (the
//! `fault-proxy` of the `mcp-hints-faults` package, which swallows some
//! responses after the server ran the call, and some requests before it
//! could), and still ends with exactly one note per intended note.
//!
//! - `add_note` takes an idempotency key, so the replay-safe client resends
//!   a lost call with the same key, and the server runs it once.
//! - `append_note` does not, so a lost call comes back as delivery unknown:
//!   the client reads the notes back, and sends it again only when the note
//!   is absent.
//!
//! Run: `notes-client [--notes N]` after building `notes` and `fault-proxy`
//! (they are looked for beside this program; `--server` and `--proxy` name
//! them elsewhere). It prints every resend and read-back, then the notes,
//! and exits 1 when any intended note is missing or doubled.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use mcp_hints::client::{Outcome, ReplaySafeClient, ToolCall};
use mcp_hints::policy::Trust;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// Add notes through a lossy link and show that none is lost or doubled.
#[derive(Parser)]
#[command(name = "notes-client")]
struct Args {
    /// Notes to add with each tool.
    #[arg(long, default_value_t = 4, value_name = "N")]
    notes: usize,
    /// The `notes` server (default: beside this program).
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// The `fault-proxy` (default: beside this program).
    #[arg(long, value_name = "PATH")]
    proxy: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("notes-client: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("notes-client: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A program beside this one.
fn beside(name: &str) -> Result<PathBuf, Box<dyn Error>> {
    let me = std::env::current_exe()?;
    let dir = me.parent().ok_or("this program has no directory")?;
    Ok(dir.join(name))
}

async fn run(args: Args) -> Result<bool, Box<dyn Error>> {
    let server = match args.server {
        Some(server) => server,
        None => beside("notes")?,
    };
    let proxy = match args.proxy {
        Some(proxy) => proxy,
        None => beside("fault-proxy")?,
    };
    for program in [&server, &proxy] {
        if !program.exists() {
            return Err(format!(
                "{} is not built: cargo build -p mcp-hints-examples --bins && cargo build -p \
                 mcp-hints-faults --bin fault-proxy",
                program.display()
            )
            .into());
        }
    }
    // Every second and third call of each tool loses its response after
    // the server ran it; the fourth `append_note` never reaches the server.
    let faults = [
        "drop-response:add_note@2",
        "drop-response:add_note@3",
        "drop-response:append_note@2",
        "drop-request:append_note@4",
    ];
    println!("link: fault-proxy {}", faults.join(" "));
    let client = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .call_timeout(Duration::from_secs(2))
        .connect(move || lossy(proxy.clone(), server.clone(), faults))
        .await?;

    println!("\nadd_note (keyed: the client resends with the same request_id):");
    let mut intended = Vec::new();
    for n in 1..=args.notes {
        let text = format!("keyed note {n}");
        let call = ToolCall::new("add_note").argument("text", json!(text));
        match client.call_tool(call).await? {
            Outcome::Completed(done) => {
                let how = match (done.attempts, done.replayed()) {
                    (1, _) => "sent once".to_owned(),
                    (attempts, true) => format!(
                        "response lost; resent {} time(s) with request_id {}; the server \
                         answered with the note it had added",
                        attempts - 1,
                        done.idempotency_key.as_deref().unwrap_or("?")
                    ),
                    (attempts, false) => format!("resent {} time(s)", attempts - 1),
                };
                println!("  {text:?}: {how}");
            }
            Outcome::DeliveryUnknown(lost) => println!("  {text:?}: {lost}"),
        }
        intended.push(text);
    }

    println!("\nappend_note (not keyed: a lost call is read back, and resent only if absent):");
    for n in 1..=args.notes {
        let text = format!("plain note {n}");
        let call = ToolCall::new("append_note").argument("text", json!(text));
        match client.call_tool(call.clone()).await? {
            Outcome::Completed(_) => println!("  {text:?}: sent once"),
            Outcome::DeliveryUnknown(lost) => {
                println!("  {text:?}: {lost}");
                if count(&notes(&client).await?, &text) > 0 {
                    println!("    read back: the note is there, so it is not sent again");
                } else {
                    println!("    read back: the note is absent, so it is sent again");
                    match client.call_tool(call).await? {
                        Outcome::Completed(_) => println!("    sent again: done"),
                        Outcome::DeliveryUnknown(lost) => println!("    sent again: {lost}"),
                    }
                }
            }
        }
        intended.push(text);
    }

    let notes = notes(&client).await?;
    println!("\nnotes on the server:");
    let mut whole = true;
    for text in &intended {
        let copies = count(&notes, text);
        println!("  {text:?}: {copies}");
        whole &= copies == 1;
    }
    println!(
        "\n{} notes intended, {} on the server: {}",
        intended.len(),
        notes.len(),
        if whole && notes.len() == intended.len() {
            "each exactly once"
        } else {
            "NOT each exactly once"
        }
    );
    Ok(whole && notes.len() == intended.len())
}

/// The `notes` server behind the fault proxy, over stdio.
async fn lossy(
    proxy: PathBuf,
    server: PathBuf,
    faults: [&'static str; 4],
) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ()>, Box<dyn Error + Send + Sync>> {
    let mut command = tokio::process::Command::new(&proxy);
    for fault in faults {
        command.arg("--fault").arg(fault);
    }
    command.arg("stdio").arg("--").arg(&server);
    Ok(().serve(TokioChildProcess::new(command)?).await?)
}

/// The texts of every note, read back with `list_notes`.
async fn notes(client: &ReplaySafeClient) -> Result<Vec<String>, Box<dyn Error>> {
    let done = client
        .call_tool(ToolCall::new("list_notes"))
        .await?
        .completed()
        .ok_or("list_notes did not answer")?;
    let listed = done.result.structured_content.unwrap_or(Value::Null);
    let notes: Vec<String> = listed["notes"]
        .as_array()
        .ok_or("list_notes answered without notes")?
        .iter()
        .filter_map(|note| note["text"].as_str().map(str::to_owned))
        .collect();
    Ok(notes)
}

fn count(notes: &[String], text: &str) -> usize {
    notes.iter().filter(|note| *note == text).count()
}
