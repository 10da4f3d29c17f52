//! Build time of a generated 200-tool server: `mcp-hints`' macros against
//! rmcp's own, as a ratio.
//!
//! Generates two crates under `$CARGO_TARGET_DIR/build-bench/` (or
//! `<workspace>/target/build-bench/`): `mcp_hints/`, depending on this
//! workspace's `mcp-hints` by path, and `rmcp/`, depending on rmcp with its
//! `macros` feature. Each has one impl block of N tools (default 200), every
//! tool with its own `Parameters<ParamsNNN>` argument and all four hints
//! declared (`#[tool(read_only, closed_world)]` resp.
//! `#[tool(annotations(read_only_hint = true, ...))]`, same values), and
//! serves them through a generated `ServerHandler`. Both crates share one
//! target dir, so their dependencies are built once.
//!
//! Steps: build each crate once (warm-up: dependencies), check that both
//! define the same tools (an example of each prints its tool list, compared
//! without the `_meta` only `mcp-hints` adds), then rebuild each crate
//! alternately `--rounds` times after touching its `src/lib.rs`, so that
//! only the generated crate recompiles, timing the wall clock of each
//! `cargo build` (dev profile). Prints every round, the medians and
//! `build time ratio mcp-hints/rmcp = X.XXx`. A warning in a measured build
//! (e.g. `undeclared_hints`) makes the run fail.
//!
//! Run: `cargo run --release -p mcp-hints-bench --bin build_time -- [--rounds N]
//! [--tools N] [--no-incremental]`. `--no-incremental` sets
//! `CARGO_INCREMENTAL=0`, so every round compiles the crate from scratch
//! instead of reusing the incremental cache of the previous round.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::Parser as _;
use mcp_hints_bench::{median, peers};
use serde_json::Value;

/// Which macros a generated crate uses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    McpHints,
    Rmcp,
}

impl Flavor {
    fn label(self) -> &'static str {
        match self {
            Flavor::McpHints => "mcp-hints",
            Flavor::Rmcp => "rmcp",
        }
    }

    fn dir_name(self) -> &'static str {
        match self {
            Flavor::McpHints => "mcp_hints",
            Flavor::Rmcp => "rmcp",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Flavor::McpHints => "build-bench-mcp-hints",
            Flavor::Rmcp => "build-bench-rmcp",
        }
    }

    fn lib_name(self) -> String {
        self.package().replace('-', "_")
    }
}

/// The options, as the README's command gives them.
#[derive(clap::Parser)]
#[command(about = "build time of a generated 200-tool server: mcp-hints' macros against rmcp's")]
struct Options {
    /// Measured rebuilds of each crate, after the warm-up build.
    #[arg(long, default_value_t = 3, value_parser = peers::at_least_one)]
    rounds: usize,
    /// Tools in each generated server.
    #[arg(long, default_value_t = 200, value_parser = peers::at_least_one)]
    tools: usize,
    /// Set `CARGO_INCREMENTAL=0`: every round compiles the crate from
    /// scratch [default: incremental].
    #[arg(long = "no-incremental", action = clap::ArgAction::SetFalse)]
    incremental: bool,
}

/// The hints of tool `i`: `(mcp-hints flags, [readOnly, destructive,
/// idempotent, openWorld])`, the values being what the flags mean.
fn hints(i: usize) -> (&'static str, [bool; 4]) {
    let (flags, [read_only, destructive, idempotent]) = match i % 4 {
        0 => ("read_only", [true, false, true]),
        1 => ("additive, non_idempotent", [false, false, false]),
        2 => ("destructive, idempotent", [false, true, true]),
        _ => ("idempotent, additive", [false, false, true]),
    };
    let open_world = i.is_multiple_of(5);
    let flags = match (flags, open_world) {
        ("read_only", true) => "read_only, open_world",
        ("read_only", false) => "read_only, closed_world",
        ("additive, non_idempotent", true) => "additive, non_idempotent, open_world",
        ("additive, non_idempotent", false) => "additive, non_idempotent, closed_world",
        ("destructive, idempotent", true) => "destructive, idempotent, open_world",
        ("destructive, idempotent", false) => "destructive, idempotent, closed_world",
        (_, true) => "idempotent, additive, open_world",
        (_, false) => "idempotent, additive, closed_world",
    };
    (flags, [read_only, destructive, idempotent, open_world])
}

/// The parameter struct of tool `i` and the expression its body returns.
fn parameters(i: usize) -> (String, String) {
    let (fields, body) = match i % 4 {
        0 => (
            "    /// The record to fetch.\n    pub id: u64,\n    pub name: String,\n",
            format!("format!(\"tool_{i:03} {{}} {{}}\", p.id, p.name)"),
        ),
        1 => (
            "    /// What to search for.\n    pub query: String,\n    pub limit: Option<u32>,\n",
            format!("format!(\"tool_{i:03} {{}} {{:?}}\", p.query, p.limit)"),
        ),
        2 => (
            "    pub a: i64,\n    pub b: i64,\n    /// Say more.\n    pub verbose: bool,\n",
            format!("format!(\"tool_{i:03} {{}} {{}}\", p.a.wrapping_add(p.b), p.verbose)"),
        ),
        _ => (
            "    pub items: Vec<String>,\n    /// An optional label.\n    pub tag: Option<String>,\n",
            format!("format!(\"tool_{i:03} {{}} {{:?}}\", p.items.len(), p.tag)"),
        ),
    };
    let item =
        format!("#[derive(Deserialize, JsonSchema)]\npub struct Params{i:03} {{\n{fields}}}\n\n");
    (item, body)
}

fn lib_rs(flavor: Flavor, tools: usize) -> String {
    let mut src = String::new();
    src.push_str("//! Generated by mcp-hints-bench's `build_time`; do not edit.\n\n");
    match flavor {
        Flavor::McpHints => src.push_str(
            "use mcp_hints::rmcp::handler::server::wrapper::Parameters;\n\
             use mcp_hints::{tool, tool_router};\n",
        ),
        Flavor::Rmcp => src.push_str(
            "use rmcp::handler::server::wrapper::Parameters;\n\
             use rmcp::{tool, tool_router};\n",
        ),
    }
    src.push_str("use schemars::JsonSchema;\nuse serde::Deserialize;\n\n");
    let mut methods = String::new();
    for i in 0..tools {
        let (item, body) = parameters(i);
        src.push_str(&item);
        let (flags, [read_only, destructive, idempotent, open_world]) = hints(i);
        let attribute = match flavor {
            Flavor::McpHints => format!("#[tool({flags})]"),
            Flavor::Rmcp => format!(
                "#[tool(annotations(read_only_hint = {read_only}, destructive_hint = \
                 {destructive}, idempotent_hint = {idempotent}, open_world_hint = {open_world}))]"
            ),
        };
        let _ = write!(
            methods,
            "    /// Tool number {i}, generated for the build-time benchmark.\n    {attribute}\n    \
             async fn tool_{i:03}(&self, Parameters(p): Parameters<Params{i:03}>) -> String {{\n        \
             {body}\n    }}\n\n"
        );
    }
    src.push_str("/// The generated server.\npub struct Server;\n\n");
    src.push_str("#[tool_router(server_handler, vis = \"pub\")]\nimpl Server {\n");
    src.push_str(methods.trim_end());
    src.push_str("\n}\n");
    src
}

const DUMP_RS: &str = "//! Prints the tool list of the generated server as JSON.\n\nfn main() {\n    \
    let tools = LIB::Server::tool_router().list_all();\n    \
    println!(\"{}\", serde_json::to_string(&tools).unwrap());\n}\n";

fn cargo_toml(flavor: Flavor, runtime: &Path) -> String {
    let dependency = match flavor {
        Flavor::McpHints => format!("mcp-hints = {{ path = {:?} }}", runtime.display().to_string()),
        Flavor::Rmcp => {
            "rmcp = { version = \"3.11\", default-features = false, features = [\"server\", \"macros\"] }"
                .to_owned()
        }
    };
    format!(
        "# Generated by mcp-hints-bench's `build_time`; do not edit.\n\
         [package]\nname = \"{}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         # Not a member of any workspace around the target dir.\n[workspace]\n\n\
         [dependencies]\n{dependency}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\
         schemars = \"1\"\n\n[dev-dependencies]\nserde_json = \"1\"\n",
        flavor.package()
    )
}

/// Writes `contents` to `path` unless it is already there, so a rerun of the
/// benchmark does not needlessly rebuild (`touch` rewrites it anyway).
fn write_if_changed(path: &Path, contents: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, contents)
}

struct Bench {
    workspace: PathBuf,
    root: PathBuf,
    target: PathBuf,
    incremental: bool,
}

impl Bench {
    fn crate_dir(&self, flavor: Flavor) -> PathBuf {
        self.root.join(flavor.dir_name())
    }

    fn generate(&self, flavor: Flavor, tools: usize) -> std::io::Result<()> {
        let dir = self.crate_dir(flavor);
        let runtime = std::fs::canonicalize(self.workspace.join("runtime"))?;
        write_if_changed(&dir.join("Cargo.toml"), &cargo_toml(flavor, &runtime))?;
        write_if_changed(&dir.join("src/lib.rs"), &lib_rs(flavor, tools))?;
        write_if_changed(
            &dir.join("examples/dump.rs"),
            &DUMP_RS.replace("LIB", &flavor.lib_name()),
        )?;
        // Resolve dependencies to the versions this workspace uses.
        let lock = dir.join("Cargo.lock");
        if !lock.exists() {
            std::fs::copy(self.workspace.join("Cargo.lock"), lock)?;
        }
        Ok(())
    }

    fn cargo(&self, flavor: Flavor, args: &[&str]) -> Command {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command
            .args(args)
            .arg("--color=never")
            .current_dir(self.crate_dir(flavor))
            .env("CARGO_TARGET_DIR", &self.target)
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS");
        if !self.incremental {
            command.env("CARGO_INCREMENTAL", "0");
        }
        command
    }

    /// `cargo build` of one crate: its wall time and its stderr.
    fn build(&self, flavor: Flavor) -> Result<(f64, String), String> {
        let mut command = self.cargo(flavor, &["build"]);
        let start = Instant::now();
        let output = command
            .output()
            .map_err(|error| format!("cannot run cargo: {error}"))?;
        let seconds = start.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            return Err(format!(
                "`cargo build` of {} failed:\n{stderr}",
                flavor.label()
            ));
        }
        Ok((seconds, stderr))
    }

    /// Rewrites `src/lib.rs` (same text, new mtime): only it is rebuilt.
    fn touch(&self, flavor: Flavor) -> std::io::Result<()> {
        let path = self.crate_dir(flavor).join("src/lib.rs");
        let text = std::fs::read(&path)?;
        std::fs::write(&path, text)
    }

    /// The tool list of the generated server, without `_meta`.
    fn tools(&self, flavor: Flavor) -> Result<Vec<Value>, String> {
        let output = self
            .cargo(flavor, &["run", "--quiet", "--example", "dump"])
            .output()
            .map_err(|error| format!("cannot run cargo: {error}"))?;
        if !output.status.success() {
            return Err(format!(
                "the tool list of {} could not be printed:\n{}",
                flavor.label(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let tools: Vec<Value> = serde_json::from_slice(&output.stdout)
            .map_err(|error| format!("bad tool list from {}: {error}", flavor.label()))?;
        Ok(tools
            .into_iter()
            .map(|mut tool| {
                if let Some(tool) = tool.as_object_mut() {
                    tool.remove("_meta");
                }
                tool
            })
            .collect())
    }
}

/// Fails on a warning in a measured build; tells whether the build compiled
/// only the generated crate (`false` when, e.g., the workspace's macros
/// changed meanwhile, so the round has to be measured again).
fn check_output(flavor: Flavor, stderr: &str) -> Result<bool, String> {
    if stderr
        .lines()
        .any(|line| line.trim_start().starts_with("warning"))
    {
        return Err(format!(
            "the {} server built with warnings; both must build clean:\n{stderr}",
            flavor.label()
        ));
    }
    let compiled: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("Compiling "))
        .collect();
    let only_generated = compiled.len() == 1 && compiled[0].starts_with(flavor.package());
    if !only_generated {
        eprintln!(
            "note: this build of {} compiled {compiled:?}, not only the generated crate; \
             measuring it again",
            flavor.label()
        );
    }
    Ok(only_generated)
}

/// Touches the crate and times its rebuild, again while that rebuilt more
/// than the generated crate.
fn measure(bench: &Bench, flavor: Flavor) -> Result<f64, String> {
    for _ in 0..5 {
        bench.touch(flavor).map_err(|error| error.to_string())?;
        let (seconds, stderr) = bench.build(flavor)?;
        if check_output(flavor, &stderr)? {
            return Ok(seconds);
        }
    }
    Err(format!(
        "every build of {} compiled more than the generated crate",
        flavor.label()
    ))
}

fn run(options: &Options) -> Result<(), String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ is inside the workspace")
        .to_path_buf();
    let target_root = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let target_root = std::path::absolute(&target_root).map_err(|error| error.to_string())?;
    let root = target_root.join("build-bench");
    let bench = Bench {
        target: root.join("target"),
        root,
        workspace,
        incremental: options.incremental,
    };
    // The generated crates are outside the workspace: use its toolchain.
    let toolchain = bench.workspace.join("rust-toolchain.toml");
    if toolchain.exists() {
        std::fs::create_dir_all(&bench.root).map_err(|error| error.to_string())?;
        std::fs::copy(&toolchain, bench.root.join("rust-toolchain.toml"))
            .map_err(|error| error.to_string())?;
    }

    let flavors = [Flavor::McpHints, Flavor::Rmcp];
    println!(
        "generating two {}-tool servers under {} (shared target dir {}; incremental {})",
        options.tools,
        bench.root.display(),
        bench.target.display(),
        if options.incremental { "on" } else { "off" },
    );
    for flavor in flavors {
        bench
            .generate(flavor, options.tools)
            .map_err(|error| format!("cannot generate the {} crate: {error}", flavor.label()))?;
    }

    for flavor in flavors {
        println!(
            "warm-up: building {} and its dependencies...",
            flavor.label()
        );
        let (seconds, _) = bench.build(flavor)?;
        println!("warm-up: {} built in {seconds:.2} s", flavor.label());
    }

    let [ours, theirs] = flavors.map(|flavor| bench.tools(flavor));
    let (ours, theirs) = (ours?, theirs?);
    if ours.len() != options.tools || ours != theirs {
        let first = ours.iter().zip(&theirs).find(|(a, b)| a != b);
        return Err(format!(
            "the two servers differ ({} and {} tools); first difference: {first:#?}",
            ours.len(),
            theirs.len()
        ));
    }
    println!(
        "check: both servers list the same {} tools (name, description, input schema, \
         annotations; `_meta` aside)",
        ours.len()
    );

    let mut times = [Vec::new(), Vec::new()];
    for round in 0..options.rounds {
        // Alternate which goes first, so neither always follows the other.
        let order = if round.is_multiple_of(2) {
            [0, 1]
        } else {
            [1, 0]
        };
        for index in order {
            times[index].push(measure(&bench, flavors[index])?);
        }
        println!(
            "round {}: mcp-hints {:.2} s, rmcp {:.2} s (ratio {:.3})",
            round + 1,
            times[0][round],
            times[1][round],
            times[0][round] / times[1][round],
        );
    }
    let (ours, theirs) = (median(&times[0]), median(&times[1]));
    println!(
        "median of {} rounds: mcp-hints {ours:.2} s, rmcp {theirs:.2} s",
        options.rounds
    );
    println!("build time ratio mcp-hints/rmcp = {:.2}x", ours / theirs);
    Ok(())
}

fn main() -> ExitCode {
    // clap prints the usage and exits 2 for a bad option, 0 for --help.
    let options = Options::parse();
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("build_time: {message}");
            ExitCode::FAILURE
        }
    }
}
