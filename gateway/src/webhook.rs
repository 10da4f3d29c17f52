//! The webhook of parked calls (`[approval] webhook`): each call parked at
//! this replica is POSTed there as JSON, in a task of its own, within
//! [`WEBHOOK_TIMEOUT`]. It tells; it never decides: a webhook that
//! answers an error, fails or hangs is said as an event and changes
//! nothing about the call, which waits for an approver as before.

use std::sync::{Arc, OnceLock};

use mcp_hints_core::escape;
use serde_json::{Value, json};

use crate::Error;
use crate::approval::Parked;
use crate::config::defaults::WEBHOOK_TIMEOUT;
use crate::log::rfc3339;

/// Where parked calls are announced, and the page an approver opens.
#[derive(Clone, Debug)]
pub(crate) struct Webhook {
    url: reqwest::Url,
    client: reqwest::Client,
    /// The approvals page's address (`http://ADMIN/approvals`), once the
    /// admin endpoint is bound; until then (or without one) the payload's
    /// `page` is `null`.
    page: Arc<OnceLock<String>>,
}

impl Webhook {
    /// The webhook at `url` (checked by the config already), its payloads
    /// linking to `page` once it is set.
    ///
    /// # Errors
    ///
    /// [`Error::Webhook`] when `url` does not parse or the HTTP client
    /// cannot be built.
    pub(crate) fn new(url: &str, page: Arc<OnceLock<String>>) -> Result<Webhook, Error> {
        let url = reqwest::Url::parse(url).map_err(|error| Error::Webhook {
            error: error.to_string(),
        })?;
        // reqwest is built without a default crypto provider (as for the
        // HTTP upstreams); an error means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(WEBHOOK_TIMEOUT)
            .connect_timeout(WEBHOOK_TIMEOUT)
            // A redirect would send the call's details where the operator
            // did not say.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| Error::Webhook {
                error: error.without_url().to_string(),
            })?;
        Ok(Webhook { url, client, page })
    }

    /// POSTs `call` to the webhook in a task of its own (within the
    /// current tokio runtime); returns at once. A failure is said as an
    /// event, with the call's id and the reason, escaped.
    pub(crate) fn announce(&self, call: &Parked) {
        let body = payload(call, self.page.get().map(String::as_str)).to_string();
        let (client, url, id) = (self.client.clone(), self.url.clone(), call.id.clone());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let sent = client
                .post(url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await;
            let failed = match sent {
                Ok(answer) if answer.status().is_success() => return,
                Ok(answer) => format!("it answered {}", answer.status()),
                // Without the URL: it may carry a secret.
                Err(error) if error.is_timeout() => {
                    format!("it did not answer within {} s", WEBHOOK_TIMEOUT.as_secs())
                }
                Err(error) => error.without_url().to_string(),
            };
            let (id, error) = (escape::one_line(&id), escape::one_line(&failed));
            tracing::warn!(
                call_id = %id,
                %error,
                "the webhook was not told of parked call {id}: {error}; the call waits for an \
                 approver all the same"
            );
        });
    }
}

/// What the webhook is sent for `call`: `{"id", "tool", "upstream",
/// "principal", "reason", "parked_at", "expires_at", "page"}`, `tool` the
/// namespaced name clients call, times in RFC 3339, `page` the approvals
/// page (with the call's anchor) or `null`.
pub(crate) fn payload(call: &Parked, page: Option<&str>) -> Value {
    json!({
        "id": call.id,
        "tool": crate::namespaced(&call.upstream, &call.tool),
        "upstream": call.upstream,
        "principal": call.principal,
        "reason": call.reason,
        "parked_at": rfc3339::format(call.parked_at),
        "expires_at": rfc3339::format(call.expires_at),
        "page": page.map(|page| format!("{page}#call-{}", call.id)),
    })
}
