//! End to end with the official MCP Python SDK: runs pytest on
//! `tests/e2e/test_notes_python.py`, which drives the built `notes` server
//! (named to it by `NOTES_SERVER`) as a child process over stdio.
//!
//! The Python side gets a virtual environment of its own under Cargo's
//! `CARGO_TARGET_TMPDIR`, made with `python3 -m venv` and filled from
//! `tests/e2e/requirements.txt` the first time, and made anew whenever that
//! file changes (the venv keeps a copy of the requirements it was filled
//! from). Set `MCP_HINTS_PYTHON` to an interpreter that already has the
//! requirements to use it instead.
//!
//! This test never skips: without a working `python3`, `venv` or `pip`
//! (which needs PyPI), it fails and says which step broke.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Names an interpreter that already has the requirements; no venv is made.
const PYTHON_OVERRIDE: &str = "MCP_HINTS_PYTHON";

fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e")
}

/// Runs `command` to completion, failing the test with `what`, the command
/// line and its output when it cannot start or exits unsuccessfully.
fn run(what: &str, command: &mut Command) -> Output {
    let line = format!("{command:?}");
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: cannot run {line}: {error}"));
    if !output.status.success() {
        panic!(
            "{what}: {line} failed with {status}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
            status = output.status,
            stdout = String::from_utf8_lossy(&output.stdout),
            stderr = String::from_utf8_lossy(&output.stderr),
        );
    }
    output
}

fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// The venv's interpreter, after making and filling the venv if it is absent
/// or was filled from other requirements.
fn prepared_venv() -> PathBuf {
    let requirements_path = e2e_dir().join("requirements.txt");
    let requirements = fs::read_to_string(&requirements_path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", requirements_path.display()));

    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-python-venv");
    let python = venv_python(&venv);
    // Written only after a successful install, so a half-made venv is redone.
    let stamp = venv.join("installed-requirements.txt");
    if python.exists() && fs::read_to_string(&stamp).ok().as_deref() == Some(&requirements) {
        return python;
    }

    if venv.exists() {
        fs::remove_dir_all(&venv)
            .unwrap_or_else(|error| panic!("cannot remove the stale {}: {error}", venv.display()));
    }
    let base = if cfg!(windows) { "python" } else { "python3" };
    run(
        "making the Python virtual environment (is python3 with venv installed?)",
        Command::new(base).arg("-m").arg("venv").arg(&venv),
    );
    run(
        "installing tests/e2e/requirements.txt (pip needs PyPI)",
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "-r",
            ])
            .arg(&requirements_path),
    );
    fs::write(&stamp, &requirements)
        .unwrap_or_else(|error| panic!("cannot write {}: {error}", stamp.display()));
    python
}

fn interpreter() -> PathBuf {
    match std::env::var_os(PYTHON_OVERRIDE) {
        Some(python) if !python.is_empty() => PathBuf::from(python),
        _ => prepared_venv(),
    }
}

fn pytest(python: &Path, server: &str) -> Output {
    Command::new(python)
        .current_dir(e2e_dir())
        .args(["-m", "pytest", "-v", "-rfEs", "-p", "no:cacheprovider"])
        .arg("test_notes_python.py")
        .env("NOTES_SERVER", server)
        // Leave no __pycache__ in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run pytest with {}: {error}", python.display()))
}

#[test]
fn python_sdk_client_sees_the_hints_and_drives_every_tool() {
    let python = interpreter();
    let version = run(
        "checking the interpreter's MCP SDK (does it have tests/e2e/requirements.txt?)",
        Command::new(&python).args([
            "-c",
            "import importlib.metadata as m, anyio, pytest, mcp; print(m.version('mcp'))",
        ]),
    );
    println!(
        "python: {} (mcp {})",
        python.display(),
        String::from_utf8_lossy(&version.stdout).trim()
    );

    let output = pytest(&python, env!("CARGO_BIN_EXE_notes"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    if !stderr.trim().is_empty() {
        println!("--- pytest stderr ---\n{stderr}");
    }
    assert!(
        output.status.success(),
        "pytest failed with {} (its output is above)",
        output.status
    );

    // pytest's closing line, e.g. "==== 16 passed in 3.10s ====": every test
    // ran and passed, none was skipped.
    let summary = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('=') && line.contains(" in "))
        .unwrap_or_else(|| panic!("no pytest summary line in its output"));
    for word in ["skipped", "xfailed", "xpassed", "deselected"] {
        assert!(
            !summary.contains(word),
            "pytest summary has {word}: {summary}"
        );
    }
    assert!(summary.contains(" passed"), "pytest summary: {summary}");
}
