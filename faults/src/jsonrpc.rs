//! Just enough JSON-RPC 2.0 to aim faults: the `tools/call` requests in a
//! client's message and the response ids in a server's. Messages are only
//! read, never re-encoded, so what the proxy relays stays byte for byte.

use serde::Deserialize;
use serde_json::Value;

/// One `tools/call` request.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// `params.name`.
    pub tool: String,
    /// The request's id (a string or a number), as sent.
    pub id: Value,
}

// Only the members a fault needs; serde skips the rest (arguments included)
// without building them.
#[derive(Deserialize)]
struct Probe {
    method: Option<String>,
    // `"id": null` reads as `None`: neither a call nor a response to one.
    id: Option<Value>,
    params: Option<Params>,
}

#[derive(Deserialize)]
struct Params {
    name: Option<String>,
}

// One message or a batch; anything that is not JSON-RPC-shaped is nothing.
fn probes(message: &[u8]) -> Vec<Probe> {
    let first = message.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        Some(b'[') => serde_json::from_slice(message).unwrap_or_default(),
        Some(b'{') => serde_json::from_slice(message).map_or_else(|_| Vec::new(), |p| vec![p]),
        _ => Vec::new(),
    }
}

/// The `tools/call` requests in one client-to-server message (a single
/// request or a batch), in order. Notifications (no id) are not calls: no
/// response will come to aim at. A message that is not JSON yields none.
pub fn tool_calls(message: &[u8]) -> Vec<Call> {
    probes(message)
        .into_iter()
        .filter_map(|probe| match probe {
            Probe {
                method: Some(method),
                id: Some(id),
                params: Some(Params { name: Some(tool) }),
                ..
            } if method == "tools/call" => Some(Call { tool, id }),
            _ => None,
        })
        .collect()
}

/// The ids of the responses in one server-to-client message (a single
/// response or a batch). Requests from the server carry an id too, from the
/// server's own id space, so anything with a `method` is left out.
pub fn response_ids(message: &[u8]) -> Vec<Value> {
    probes(message)
        .into_iter()
        .filter(|probe| probe.method.is_none())
        .filter_map(|probe| probe.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tool_calls_in_a_message_or_a_batch() {
        let one = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add","arguments":{"a":[1,{"b":2}]}}}"#;
        assert_eq!(
            tool_calls(one),
            vec![Call {
                tool: "add".into(),
                id: 7.into()
            }]
        );
        let batch = br#" [{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}},
            {"jsonrpc":"2.0","method":"notifications/progress","params":{}},
            {"jsonrpc":"2.0","id":2,"method":"tools/list"},
            {"jsonrpc":"2.0","method":"tools/call","params":{"name":"no-id"}},
            {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"y"}}]"#;
        let tools: Vec<_> = tool_calls(batch)
            .into_iter()
            .map(|c| (c.tool, c.id))
            .collect();
        assert_eq!(
            tools,
            vec![("x".into(), "a".into()), ("y".into(), 3.into())]
        );
    }

    #[test]
    fn anything_else_holds_no_calls() {
        for message in [
            &b"not json"[..],
            b"",
            b"{\"id\":1,\"method\":\"tools/call\",\"params\":\"odd\"}",
            b"{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":5}}",
            b"{\"id\":1,\"method\":\"tools/call\"",
            b"[1,2]",
            b"42",
        ] {
            assert_eq!(
                tool_calls(message),
                vec![],
                "{:?}",
                String::from_utf8_lossy(message)
            );
        }
    }

    #[test]
    fn response_ids_skip_server_requests_and_notifications() {
        assert_eq!(
            response_ids(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n"),
            vec![Value::from(3)]
        );
        assert_eq!(
            response_ids(br#"[{"id":"x","error":{"code":1,"message":"m"}},{"id":9,"method":"sampling/createMessage"},{"method":"notifications/message"},{"id":null,"error":{}}]"#),
            vec![Value::from("x")]
        );
    }
}
