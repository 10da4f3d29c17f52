//! Real MCP peers from npm and PyPI, at pinned versions, for the test files
//! that talk to them (tests/live_servers.rs, tests/protocol_revisions.rs,
//! tests/gateway.rs), and a loopback web page for `mcp-server-fetch` to
//! fetch ([`ServedPage`], [`fetch_server`]).
//!
//! They are installed once, under Cargo's `CARGO_TARGET_TMPDIR` (kept
//! between runs and shared by the test files, so an install with the exact
//! pinned versions is reused): the npm packages with `npm install --prefix`
//! (run with `node`, which must be 20 or newer), the PyPI packages into a
//! virtual environment made with `python3 -m venv`. Nothing skips: without
//! node, npm, python3 with venv, or the registries, the install fails and
//! says which step broke, with the installer's output. Only the listed
//! packages are pinned; their own dependencies resolve when they are
//! installed.
//!
//! Cargo runs test binaries one after another, so two never install at
//! once; within one, the first test to get here installs and the others
//! wait.

// Each test file uses some of these.
#![allow(dead_code)]

use std::fs;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// (package, exact version, bin) of the npm servers.
pub const NPM_SERVERS: [(&str, &str, &str); 3] = [
    (
        "@modelcontextprotocol/server-everything",
        "2026.8.31",
        "mcp-server-everything",
    ),
    (
        "@modelcontextprotocol/server-memory",
        "2026.8.31",
        "mcp-server-memory",
    ),
    (
        "@modelcontextprotocol/server-filesystem",
        "2026.8.31",
        "mcp-server-filesystem",
    ),
];

/// (package, exact version) of the npm libraries the fixtures are written
/// with: the TypeScript SDK v2 (spec revision 2026-07-28), its server and
/// its client.
pub const NPM_LIBRARIES: [(&str, &str); 2] = [
    ("@modelcontextprotocol/server", "2.4.0"),
    ("@modelcontextprotocol/client", "2.4.0"),
];

/// (package, exact version, console script) of the PyPI servers.
pub const PYPI_SERVERS: [(&str, &str, &str); 3] = [
    ("mcp-server-time", "2026.10.19", "mcp-server-time"),
    ("mcp-server-git", "2026.10.19", "mcp-server-git"),
    ("mcp-server-fetch", "2026.10.24", "mcp-server-fetch"),
];

/// (package, exact version) of the PyPI libraries: the MCP Python SDK,
/// which the servers above run on too, and which serves 2026-07-28; PyJWT
/// and `cryptography`, which the fixture OAuth issuer
/// (tests/fixtures/oauth_issuer.py) signs its tokens with (the SDK
/// depends on both already: pinned here, the issuer's are known).
pub const PYPI_LIBRARIES: [(&str, &str); 3] = [
    ("mcp", "2.3.0"),
    ("PyJWT", "2.15.1"),
    ("cryptography", "50.0.2"),
];

/// Where the peers are installed, and fixtures and scratch files kept.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-servers")
}

/// The installed peers.
pub struct Installed {
    /// The `node_modules` directory of the npm packages.
    pub node_modules: PathBuf,
    /// The venv's directory of scripts (`bin`, or `Scripts` on Windows).
    pub venv_scripts: PathBuf,
}

impl Installed {
    /// The venv's python.
    pub fn python(&self) -> PathBuf {
        self.venv_scripts.join(if cfg!(windows) {
            "python.exe"
        } else {
            "python"
        })
    }
}

/// The peers, installed by the first test to get here; the others wait.
/// An install failure fails every test with the same message.
pub fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Result<Installed, String>> = OnceLock::new();
    match INSTALLED.get_or_init(install) {
        Ok(installed) => installed,
        Err(message) => panic!("{message}"),
    }
}

/// Says what is being installed on stderr, past the test harness's capture,
/// so a slow first run explains itself.
pub fn say(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn install() -> Result<Installed, String> {
    let start = Instant::now();
    let root = root();
    fs::create_dir_all(&root).map_err(|error| format!("{}: {error}", root.display()))?;
    let (npm, pypi) = std::thread::scope(|scope| {
        let npm = scope.spawn(|| timed(|| install_npm(&root.join("npm"))));
        let pypi = scope.spawn(|| timed(|| install_pypi(&root.join("venv"))));
        (npm.join().unwrap(), pypi.join().unwrap())
    });
    let ((node_modules, npm_time), (venv_scripts, pypi_time)) = (npm?, pypi?);
    say(&format!(
        "live servers ready in {:.1} s (npm {:.1} s, PyPI {:.1} s)",
        start.elapsed().as_secs_f64(),
        npm_time.as_secs_f64(),
        pypi_time.as_secs_f64()
    ));
    Ok(Installed {
        node_modules,
        venv_scripts,
    })
}

fn timed<T>(f: impl FnOnce() -> Result<T, String>) -> Result<(T, Duration), String> {
    let start = Instant::now();
    f().map(|value| (value, start.elapsed()))
}

/// Runs `command` to completion: its output, or `what` with the command line
/// and its output when it cannot start or fails.
pub fn run(what: &str, command: &mut Command) -> Result<Output, String> {
    let line = format!("{command:?}");
    let output = command
        .output()
        .map_err(|error| format!("{what}: cannot run {line}: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "{what}: {line} failed with {status}\n--- stdout ---\n{stdout}\n--- stderr \
             ---\n{stderr}",
            status = output.status,
            stdout = String::from_utf8_lossy(&output.stdout),
            stderr = String::from_utf8_lossy(&output.stderr),
        ));
    }
    Ok(output)
}

pub fn remove(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|error| format!("removing {}: {error}", dir.display()))?;
    }
    Ok(())
}

/// The version in `node_modules/PACKAGE/package.json`, if any.
fn npm_installed_version(node_modules: &Path, package: &str) -> Option<String> {
    let text = fs::read_to_string(node_modules.join(package).join("package.json")).ok()?;
    let manifest: Value = serde_json::from_str(&text).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

fn npm_pins() -> Vec<(&'static str, &'static str)> {
    NPM_SERVERS
        .iter()
        .map(|(package, version, _)| (*package, *version))
        .chain(NPM_LIBRARIES)
        .collect()
}

fn install_npm(prefix: &Path) -> Result<PathBuf, String> {
    let node_modules = prefix.join("node_modules");
    let pins = npm_pins();
    let specs: Vec<String> = pins
        .iter()
        .map(|(package, version)| format!("{package}@{version}"))
        .collect();
    let node = run(
        "checking node (Node.js 20 or newer is needed)",
        Command::new("node").arg("--version"),
    )?;
    let node = String::from_utf8_lossy(&node.stdout).trim().to_owned();
    // Written only after a successful install, so a half-made one is redone.
    let stamp = prefix.join("installed-packages.txt");
    let wanted = specs.join("\n") + "\n";
    let present = pins.iter().all(|(package, version)| {
        npm_installed_version(&node_modules, package).as_deref() == Some(*version)
    });
    if present && fs::read_to_string(&stamp).ok().as_deref() == Some(&wanted) {
        say(&format!(
            "npm: {} already in {}",
            specs.join(" "),
            prefix.display()
        ));
        return Ok(node_modules);
    }
    remove(prefix)?;
    fs::create_dir_all(prefix).map_err(|error| format!("{}: {error}", prefix.display()))?;
    say(&format!(
        "npm: installing {} into {} (node {node})",
        specs.join(" "),
        prefix.display()
    ));
    let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
    run(
        "installing the npm servers (npm needs the npm registry)",
        Command::new(npm)
            .arg("install")
            .arg("--prefix")
            .arg(prefix)
            .args(["--no-audit", "--no-fund", "--save-exact"])
            .args(&specs),
    )?;
    for (package, version) in pins {
        let found = npm_installed_version(&node_modules, package);
        if found.as_deref() != Some(version) {
            return Err(format!("npm installed {package} {found:?}, not {version}"));
        }
    }
    fs::write(&stamp, &wanted).map_err(|error| format!("{}: {error}", stamp.display()))?;
    Ok(node_modules)
}

fn pypi_pins() -> Vec<(&'static str, &'static str)> {
    PYPI_SERVERS
        .iter()
        .map(|(package, version, _)| (*package, *version))
        .chain(PYPI_LIBRARIES)
        .collect()
}

fn install_pypi(venv: &Path) -> Result<PathBuf, String> {
    let scripts = venv.join(if cfg!(windows) { "Scripts" } else { "bin" });
    let python = scripts.join(if cfg!(windows) {
        "python.exe"
    } else {
        "python"
    });
    let pins = pypi_pins();
    let specs: Vec<String> = pins
        .iter()
        .map(|(package, version)| format!("{package}=={version}"))
        .collect();
    let stamp = venv.join("installed-requirements.txt");
    let wanted = specs.join("\n") + "\n";
    if python.exists() && fs::read_to_string(&stamp).ok().as_deref() == Some(&wanted) {
        say(&format!(
            "PyPI: {} already in {}",
            specs.join(" "),
            venv.display()
        ));
    } else {
        remove(venv)?;
        say(&format!(
            "PyPI: installing {} into {}",
            specs.join(" "),
            venv.display()
        ));
        let base = if cfg!(windows) { "python" } else { "python3" };
        run(
            "making the Python virtual environment (is python3 with venv installed?)",
            Command::new(base).arg("-m").arg("venv").arg(venv),
        )?;
        run(
            "installing the PyPI servers (pip needs PyPI)",
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-input",
                ])
                .args(&specs),
        )?;
        fs::write(&stamp, &wanted).map_err(|error| format!("{}: {error}", stamp.display()))?;
    }
    let names: Vec<&str> = pins.iter().map(|(package, _)| *package).collect();
    let versions = run(
        "reading the installed PyPI versions",
        Command::new(&python).args([
            "-c",
            "import importlib.metadata as m, sys; print(' '.join(m.version(p) for p in sys.argv[1:]))",
        ]).args(&names),
    )?;
    let versions = String::from_utf8_lossy(&versions.stdout);
    let versions: Vec<&str> = versions.split_whitespace().collect();
    for ((package, version), found) in pins.iter().zip(&versions) {
        if found != version {
            return Err(format!("{package} {found} is installed, not {version}"));
        }
    }
    Ok(scripts)
}

/// `CARGO_TARGET_TMPDIR/live-servers/npm/fixtures/NAME`, a copy of
/// tests/fixtures/NAME beside the installed node_modules, so that an ES
/// module's imports resolve there.
pub fn npm_fixture(name: &str) -> PathBuf {
    let installed = installed();
    let dir = installed
        .node_modules
        .parent()
        .expect("node_modules has a parent")
        .join("fixtures");
    fs::create_dir_all(&dir).unwrap();
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let copy = dir.join(name);
    let text = fs::read(&source).unwrap_or_else(|error| panic!("{}: {error}", source.display()));
    if fs::read(&copy).is_ok_and(|old| old == text) {
        return copy;
    }
    // Tests running at once copy the same fixture while others' servers
    // load it: a copy in place would let node read a half-written (or empty)
    // module and exit 0 without a word. A rename swaps in the whole file.
    static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nth = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let partial = dir.join(format!("{name}.{}-{nth}.partial", std::process::id()));
    fs::write(&partial, &text).unwrap_or_else(|error| panic!("{}: {error}", partial.display()));
    fs::rename(&partial, &copy).unwrap_or_else(|error| panic!("{}: {error}", copy.display()));
    copy
}

/// tests/fixtures/NAME.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A free port on 127.0.0.1 (bound, then released for the server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An HTTP server started for a test, killed when dropped.
pub struct HttpPeer {
    pub child: Child,
    pub url: String,
}

impl HttpPeer {
    /// Starts `command`, which serves streamable HTTP at
    /// `http://127.0.0.1:PORT/mcp`, and waits (30 s at most) until the port
    /// takes connections.
    pub fn start(command: &mut Command, port: u16) -> HttpPeer {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{command:?}: {error}"));
        let mut peer = HttpPeer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = peer.child.try_wait() {
                panic!("{command:?} exited ({status}) before it listened");
            }
            assert!(
                Instant::now() < deadline,
                "{command:?} did not listen on {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        peer
    }

    /// Starts `command`, which picks its own port and writes
    /// `listening on URL` to stderr; waits 30 s at most.
    pub fn start_announced(command: &mut Command) -> HttpPeer {
        use std::io::{BufRead, BufReader};
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("{command:?}: {error}"));
        let stderr = child.stderr.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = sender.send(url.to_owned());
                }
            }
        });
        let mut peer = HttpPeer {
            child,
            url: String::new(),
        };
        peer.url = receiver
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{command:?} said no address within 30 s"));
        peer
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How to start the installed `mcp-server-fetch` as a stdio upstream that
/// fetches loopback pages only, and deterministically.
///
/// - `--allow-private-ips`: the server refuses loopback, private and
///   link-local destinations without it ("... is not a public address").
/// - `--ignore-robots-txt`: without it every call first asks the page's
///   host for `/robots.txt` (a 4xx other than 401/403 lets the call go on;
///   401, 403 or no answer refuses it); with it a call makes one request.
/// - `--user-agent`: [`FETCH_USER_AGENT`], so a served page can tell its
///   requests from anyone else's.
/// - `PATH` is the venv's scripts alone: with `node` on `PATH`, readabilipy
///   (its HTML extractor) runs `npm install` of unpinned packages into the
///   venv on the first call, then extracts with Readability.js, whose text
///   differs from the pure-Python extractor's (no page title, other heading
///   levels).
/// - `NO_PROXY=*`: httpx honours `HTTP_PROXY` and the like, loopback
///   included, so a proxy set in the tests' environment would take the
///   request off the machine.
pub struct FetchServer {
    /// `command = [...]`: the venv's console script and its flags.
    pub command: Vec<String>,
    /// `env = {...}`: set for the server on top of the gateway's own.
    pub env: Vec<(&'static str, String)>,
}

/// The `User-Agent` [`fetch_server`] sends.
pub const FETCH_USER_AGENT: &str = "mcp-hints-tests/fetch";

/// The installed `mcp-server-fetch`, set up for loopback use ([`FetchServer`]).
pub fn fetch_server() -> FetchServer {
    let scripts = &installed().venv_scripts;
    let script = scripts.join(if cfg!(windows) {
        "mcp-server-fetch.exe"
    } else {
        "mcp-server-fetch"
    });
    FetchServer {
        command: vec![
            script.to_string_lossy().into_owned(),
            "--allow-private-ips".to_owned(),
            "--ignore-robots-txt".to_owned(),
            "--user-agent".to_owned(),
            FETCH_USER_AGENT.to_owned(),
        ],
        env: vec![
            ("PATH", scripts.to_string_lossy().into_owned()),
            ("NO_PROXY", "*".to_owned()),
        ],
    }
}

impl FetchServer {
    /// Its `command = [...]` and `env = {...}` lines for an `[[upstream]]`
    /// table (TOML basic strings written as JSON strings, which they
    /// accept).
    pub fn toml(&self) -> String {
        let env: Vec<String> = self
            .env
            .iter()
            .map(|(name, value)| format!("{name} = {}", serde_json::to_string(value).unwrap()))
            .collect();
        format!(
            "command = {}\nenv = {{ {} }}\n",
            serde_json::to_string(&self.command).unwrap(),
            env.join(", ")
        )
    }
}

/// One HTML page served over HTTP/1.1 on a free 127.0.0.1 port, at
/// [`ServedPage::url`], for as long as the value lives; every other path is
/// a 404. Each request's target and `User-Agent` are recorded.
pub struct ServedPage {
    /// `http://127.0.0.1:PORT/page`.
    pub url: String,
    address: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServedPage {
    /// Serves `html` (as `text/html; charset=utf-8`) until dropped.
    pub fn serve(html: &str) -> ServedPage {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let body = html.as_bytes().to_vec();
        let thread = {
            let (requests, stop) = (requests.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    if let Some(request) = answer(stream, &body) {
                        requests.lock().unwrap().push(request);
                    }
                }
            })
        };
        ServedPage {
            url: format!("http://{address}/page"),
            address,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// (request target, `User-Agent`) of every request answered so far.
    pub fn requests(&self) -> Vec<(String, String)> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one request's head (5 s at most) and answers it: `body` for
/// `GET /page`, 404 otherwise, then closes. The target and `User-Agent`,
/// or `None` when no whole head came.
fn answer(mut stream: TcpStream, body: &[u8]) -> Option<(String, String)> {
    use std::io::{Read as _, Write as _};
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut head = Vec::new();
    let mut buffer = [0; 4096];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).ok()?;
        if read == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, target) = (request_line.next()?, request_line.next()?.to_owned());
    let user_agent = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("user-agent"))
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default();
    let (status, content_type, body) = if method == "GET" && target == "/page" {
        ("200 OK", "text/html; charset=utf-8", body)
    } else {
        ("404 Not Found", "text/plain", &b"not found\n"[..])
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: \
         close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(body);
    Some((target, user_agent))
}

impl Drop for ServedPage {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accept loop, which then sees `stop`.
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
