//! `mcp-hints audit --url` against hostile HTTP peers, written here and
//! served on 127.0.0.1: a 1.5 GB body, an endless body, an endless SSE
//! event, a slow drip. Each must end in exit 2, promptly, with a clear
//! message, and with the command's memory bounded by `--max-response-bytes`
//! (its peak resident set is read back by a python3 wrapper through
//! `getrusage`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How the peer answers every request.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// `Content-Length: 1610612736` and that many bytes, as fast as taken.
    BigBody,
    /// A chunked body that never ends.
    EndlessBody,
    /// An event stream whose first event's data never ends.
    EndlessEvent,
    /// A 1 MB body, one byte every 100 ms.
    Drip,
}

/// Serves `how` on 127.0.0.1 until the test process ends; returns the URL.
/// Each connection is written to for 20 s at most.
fn serve(how: Hostile) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let _ = misbehave(stream, how);
            });
        }
    });
    url
}

fn misbehave(mut stream: TcpStream, how: Hostile) -> std::io::Result<()> {
    // The request's head and body: enough to answer it.
    let mut request = Vec::new();
    let mut buffer = [0u8; 8192];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buffer)?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&buffer[..n]);
    }
    let chunk = vec![b'a'; 1 << 16];
    let deadline = Instant::now() + Duration::from_secs(20);
    match how {
        Hostile::BigBody => {
            let length: u64 = 1_610_612_736;
            stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \
                     {length}\r\n\r\n"
                )
                .as_bytes(),
            )?;
            let mut sent = 0;
            while sent < length && Instant::now() < deadline {
                stream.write_all(&chunk)?;
                sent += chunk.len() as u64;
            }
        }
        Hostile::EndlessBody => {
            stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            )?;
            while Instant::now() < deadline {
                stream.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())?;
                stream.write_all(&chunk)?;
                stream.write_all(b"\r\n")?;
            }
        }
        Hostile::EndlessEvent => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ")?;
            while Instant::now() < deadline {
                stream.write_all(&chunk)?;
            }
        }
        Hostile::Drip => {
            stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
            )?;
            while Instant::now() < deadline {
                stream.write_all(b" ")?;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Ok(())
}

/// What one audit did: exit status, wall time, peak resident set, stderr.
#[derive(Debug)]
struct Run {
    code: i32,
    seconds: f64,
    peak_kib: u64,
    stderr: String,
}

/// `mcp-hints audit ARGS`, run by a python3 wrapper that reports the
/// child's peak resident set (`ru_maxrss`, KiB on Linux) and wall time.
fn audit(args: &[&str]) -> Run {
    const WRAPPER: &str = r#"
import json, resource, subprocess, sys, time
start = time.monotonic()
done = subprocess.run(sys.argv[1:], capture_output=True, env={"NO_COLOR": "1"}, timeout=120)
print(json.dumps({
    "code": done.returncode,
    "seconds": time.monotonic() - start,
    "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    "stderr": done.stderr.decode("utf-8", "replace"),
}))
"#;
    let output = Command::new("python3")
        .args(["-c", WRAPPER, env!("CARGO_BIN_EXE_mcp-hints"), "audit"])
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    Run {
        code: report["code"].as_i64().unwrap() as i32,
        seconds: report["seconds"].as_f64().unwrap(),
        peak_kib: report["peak_kib"].as_u64().unwrap(),
        stderr: report["stderr"].as_str().unwrap().to_owned(),
    }
}

const TOO_LARGE: &str = ", the --max-response-bytes bound, while answering `server/discover`: \
                         raise it if the server is right to send that much";

#[test]
fn a_1_5_gb_body_is_refused_by_its_length_before_it_is_read() {
    let url = serve(Hostile::BigBody);
    let run = audit(&["--url", &url]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.seconds < 5.0, "{run:?}");
    assert!(run.peak_kib < 64 * 1024, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "sent an HTTP response body of more than 67108864 bytes (64 MiB){TOO_LARGE}"
        )),
        "{run:?}"
    );
}

#[test]
fn an_endless_body_stops_at_the_bound() {
    let url = serve(Hostile::EndlessBody);
    // The default bound, 64 MiB: read up to it, then refused, holding
    // little more than what it read (89 MiB measured; a buffer grown by
    // doubling held 200 MiB under mimalloc).
    let run = audit(&["--url", &url]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.seconds < 10.0, "{run:?}");
    assert!(run.peak_kib < 128 * 1024, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "sent an HTTP response body of more than 67108864 bytes (64 MiB){TOO_LARGE}"
        )),
        "{run:?}"
    );
    // A smaller bound holds less.
    let run = audit(&["--max-response-bytes", "1MiB", "--url", &url]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.peak_kib < 48 * 1024, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "sent an HTTP response body of more than 1048576 bytes (1 MiB){TOO_LARGE}"
        )),
        "{run:?}"
    );
}

#[test]
fn an_endless_sse_event_stops_at_the_bound() {
    let url = serve(Hostile::EndlessEvent);
    let run = audit(&["--max-response-bytes", "4MiB", "--url", &url]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.seconds < 10.0, "{run:?}");
    assert!(run.peak_kib < 48 * 1024, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "sent SSE event 1 of more than 4194304 bytes (4 MiB){TOO_LARGE}"
        )),
        "{run:?}"
    );
}

#[test]
fn a_slow_drip_is_stopped_by_the_timeout() {
    let url = serve(Hostile::Drip);
    let run = audit(&["--timeout", "2", "--url", &url]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.seconds >= 2.0 && run.seconds < 6.0, "{run:?}");
    assert!(
        run.stderr
            .contains("did not answer `server/discover` within 2s"),
        "{run:?}"
    );
}
