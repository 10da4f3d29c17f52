#!/usr/bin/env python3
"""Baseline of the audit benchmark: what `mcp-hints audit --json` does, in
Python with the standard library only.

    python3 audit.py [--trusted] [--timeout SECS] (--files FILE... | -- COMMAND ARGS...)

Live mode spawns COMMAND, speaks newline-delimited JSON-RPC 2.0 to it
(initialize, notifications/initialized, then tools/list following nextCursor
while it is present, "" included), and stops it. Saved-pages mode reads
FILEs in order, each a bare tools/list result or a whole JSON-RPC response.

Every tool is checked (an object, a string name, no name twice, annotations
absent, null or an object, each hint absent, null or a boolean), gets the four
hints with their provenance (declared, or defaulted to the spec's value),
and is classified with the policy of DESIGN.md. Prints one JSON document,
{"tools": [{"name", "decision", "reason", "hints"}]}, and exits 0 when every
tool may be resent, 1 when some must be read back first, 2 on bad input.
"""

import argparse
import json
import subprocess
import sys
import threading

PAGE_CAP = 10000
PROTOCOL_VERSION = "2025-11-25"
# The spec's defaults for undeclared hints, in wire order.
DEFAULTS = (
    ("readOnlyHint", False),
    ("destructiveHint", True),
    ("idempotentHint", False),
    ("openWorldHint", True),
)


class BadInput(Exception):
    """The tool list is unusable: exit 2."""


class Collector:
    """Accumulates pages of tools/list, checking them as they come."""

    def __init__(self):
        self.tools = []
        self.names = set()
        self.cursors = set()
        self.pages = 0

    def add_page(self, page, where):
        """Adds one page (a tools/list result or a JSON-RPC response holding
        one) and returns its nextCursor, None when the list ends."""
        if isinstance(page, dict) and "tools" not in page:
            if "error" in page:
                raise BadInput(f"{where}: JSON-RPC error {json.dumps(page['error'])}")
            if "result" in page:
                page = page["result"]
        if not isinstance(page, dict):
            raise BadInput(f"{where}: the result is not an object")
        tools = page.get("tools")
        if not isinstance(tools, list):
            raise BadInput(f"{where}: `tools` is missing or not an array")
        self.pages += 1
        for index, tool in enumerate(tools):
            self.tools.append(self.check_tool(tool, f"{where}, tool {index}"))
        cursor = page.get("nextCursor")
        if cursor is None:
            return None
        if not isinstance(cursor, str):
            raise BadInput(f"{where}: nextCursor is not a string: {json.dumps(cursor)}")
        if cursor in self.cursors:
            raise BadInput(f"{where}: nextCursor {json.dumps(cursor)} was seen before (a loop)")
        self.cursors.add(cursor)
        return cursor

    def check_tool(self, tool, where):
        if not isinstance(tool, dict):
            raise BadInput(f"{where}: not an object")
        name = tool.get("name")
        if not isinstance(name, str):
            raise BadInput(f"{where}: `name` is missing or not a string")
        if name in self.names:
            raise BadInput(f"{where} ({name}): a second tool with this name")
        self.names.add(name)
        annotations = tool.get("annotations")
        if annotations is None:
            annotations = {}
        elif not isinstance(annotations, dict):
            raise BadInput(f"{where} ({name}): `annotations` is not an object")
        hints = {}
        for hint, default in DEFAULTS:
            value = annotations.get(hint)
            if value is not None:
                if not isinstance(value, bool):
                    raise BadInput(
                        f"{where} ({name}): annotations.{hint} is not a boolean: {json.dumps(value)}"
                    )
                hints[hint] = {"value": value, "provenance": "declared"}
            else:
                hints[hint] = {"value": default, "provenance": "defaulted"}
        return name, hints


def describe(hints, hint):
    entry = hints[hint]
    return f"{hint} {'true' if entry['value'] else 'false'} ({entry['provenance']})"


def classify(name, hints, trusted):
    """The decision after a call's delivery is unknown, and why."""
    if not trusted:
        return "read_back_first", "server not trusted: its hints are not relied on"
    if hints["readOnlyHint"]["value"]:
        return "resend", describe(hints, "readOnlyHint") + ": resend with the same arguments"
    if hints["idempotentHint"]["value"]:
        return "resend", (
            describe(hints, "idempotentHint")
            + ": resend with the same arguments only (no fresh nonce, timestamp or client id)"
        )
    return "read_back_first", (
        f"{describe(hints, 'readOnlyHint')} and {describe(hints, 'idempotentHint')}: "
        "read back first; resend once only if absent"
    )


def collect_files(paths):
    if len(paths) > PAGE_CAP:
        raise BadInput(f"{len(paths)} files: more than the page cap of {PAGE_CAP} pages")
    collector = Collector()
    for number, path in enumerate(paths, 1):
        try:
            with open(path, "rb") as file:
                page = json.load(file)
        except OSError as error:
            raise BadInput(f"{path}: {error.strerror}") from None
        except ValueError as error:
            raise BadInput(f"{path}: not JSON: {error}") from None
        cursor = collector.add_page(page, path)
        if cursor is None and number < len(paths):
            raise BadInput(f"{path}: the list ends here, but {len(paths) - number} more files follow")
    if cursor is not None:
        raise BadInput(
            f"{paths[-1]}: the last page still has nextCursor {json.dumps(cursor)}: "
            "the saved list is incomplete"
        )
    return collector.tools


class Server:
    """An MCP server spoken to over its stdin and stdout."""

    def __init__(self, command, timeout):
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as error:
            raise BadInput(f"cannot start {command[0]}: {error.strerror}") from None
        self.next_id = 1
        self.timed_out = False
        self.timer = threading.Timer(timeout, self.expire)
        self.timer.daemon = True
        self.timer.start()

    def expire(self):
        self.timed_out = True
        self.process.kill()

    def send(self, message):
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise BadInput("the server closed its input") from None

    def request(self, method, params):
        """Sends a request and returns its response's result."""
        request_id = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        readline = self.process.stdout.readline
        while True:
            line = readline()
            if not line:
                if self.timed_out:
                    raise BadInput(f"the server did not answer {method} in time")
                raise BadInput(f"the server closed its output before answering {method}")
            if line.isspace():
                continue
            try:
                message = json.loads(line)
            except ValueError as error:
                raise BadInput(f"the server wrote a line that is not JSON: {error}") from None
            if not isinstance(message, dict):
                raise BadInput("the server wrote a message that is not an object")
            if "method" in message:
                if "id" in message:  # a request from the server: we serve none but ping
                    reply = {"jsonrpc": "2.0", "id": message["id"]}
                    if message["method"] == "ping":
                        reply["result"] = {}
                    else:
                        reply["error"] = {"code": -32601, "message": "method not found"}
                    self.send(reply)
                continue  # notifications are ignored
            if message.get("id") != request_id:
                continue  # not ours (a late answer to something else)
            if "error" in message:
                raise BadInput(f"{method}: JSON-RPC error {json.dumps(message['error'])}")
            return message

    def close(self):
        self.timer.cancel()
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


def collect_live(command, timeout):
    server = Server(command, timeout)
    try:
        server.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "audit.py", "version": "0.1.0"},
            },
        )
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        collector = Collector()
        cursor = None
        while True:
            if collector.pages == PAGE_CAP:
                raise BadInput(f"page cap of {PAGE_CAP} pages reached and the list goes on")
            params = {} if cursor is None else {"cursor": cursor}
            response = server.request("tools/list", params)
            cursor = collector.add_page(response, f"tools/list page {collector.pages + 1}")
            if cursor is None:
                return collector.tools
    finally:
        server.close()


def parse_args(argv):
    command = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="audit.py",
        usage="%(prog)s [--trusted] [--timeout SECS] (--files FILE... | -- COMMAND ARGS...)",
        description="Collect an MCP server's tools/list and classify every tool for resending.",
    )
    parser.add_argument("--trusted", action="store_true", help="rely on the server's hints")
    parser.add_argument("--files", nargs="+", metavar="FILE", help="saved pages, in order")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds (live mode)")
    args = parser.parse_args(argv)
    if bool(args.files) == bool(command):
        parser.error("give either --files FILE... or -- COMMAND ARGS...")
    args.command = command
    return args


def main(argv):
    args = parse_args(argv)
    try:
        if args.files:
            tools = collect_files(args.files)
        else:
            tools = collect_live(args.command, args.timeout)
    except BadInput as error:
        print(f"audit.py: error: {error}", file=sys.stderr)
        return 2
    report = []
    all_resend = True
    for name, hints in tools:
        decision, reason = classify(name, hints, args.trusted)
        all_resend = all_resend and decision == "resend"
        report.append({"name": name, "decision": decision, "reason": reason, "hints": hints})
    # json.dumps, not json.dump: only the one-shot encoder is the C one.
    sys.stdout.write(json.dumps({"tools": report}) + "\n")
    sys.stdout.flush()
    return 0 if all_resend else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
