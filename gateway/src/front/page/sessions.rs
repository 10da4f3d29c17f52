//! The approvals page's sessions: who signed in, kept in this replica's
//! memory under a random id that is all the browser's cookie holds, each
//! with the CSRF token (a synchronizer token) its forms must send back.
//!
//! A session starts anonymous, for the sign-in form (so that the sign-in
//! itself carries a token the session issued), and is replaced by a
//! session under a new id when its approver signs in (an id known before
//! the sign-in is worth nothing after it). How the approver proved who
//! they are is a [`SignIn`]; each method only has to end in
//! [`Sessions::sign_in`] with the [`Approver`] it established.
//!
//! A sign-in through the issuer keeps its [`Flow`] (the OAuth `state` and
//! the PKCE verifier) in the anonymous session that started it, so the
//! verifier never leaves the gateway and the answer from the issuer is
//! taken only by the browser that asked; a flow is good for one answer.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use subtle::ConstantTimeEq as _;

use crate::defaults;

/// How an approver proved who they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SignIn {
    /// The admin token (`[admin]`), typed into the sign-in form.
    AdminToken,
    /// An access token of the `[auth] issuer` holding `[approval]
    /// approver_scope`, got with the authorization code grant.
    Issuer,
}

impl SignIn {
    /// How the page says it: `admin token`, `identity provider`.
    pub(crate) fn words(self) -> &'static str {
        match self {
            SignIn::AdminToken => "admin token",
            SignIn::Issuer => "identity provider",
        }
    }
}

/// A sign-in through the issuer under way (OAuth 2.1 §4.1.1, §7.5.2): the
/// `state` the authorization request carried and must come back, and the
/// PKCE `code_verifier` (RFC 7636 §4.1) the token request sends. Both are
/// 64 hex characters from the operating system's generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Flow {
    pub(crate) state: String,
    pub(crate) verifier: String,
}

/// Who signed in: the name their decisions are logged under (`by`), and
/// how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Approver {
    pub(crate) name: String,
    pub(crate) via: SignIn,
}

/// One session, as a request sees it.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// Its id: the cookie's value.
    pub(crate) id: String,
    /// The token every state-changing form of the session sends back.
    pub(crate) csrf: String,
    /// `None` until someone signs in.
    pub(crate) approver: Option<Approver>,
    /// The sign-in through the issuer this anonymous session started, if
    /// one is under way.
    flow: Option<Flow>,
    /// When a signed-in session ends at the latest besides the page's
    /// caps: when the access token it was signed in with expires.
    until: Option<Instant>,
    started: Instant,
    seen: Instant,
}

impl Session {
    /// Whether `candidate` is this session's CSRF token, compared in
    /// constant time.
    pub(crate) fn csrf_matches(&self, candidate: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(candidate.as_bytes()))
    }

    /// Whether it has ended at `now`: anonymous past
    /// [`defaults::SIGN_IN_FORM_LIFETIME`]; signed in past
    /// [`defaults::SESSION_LIFETIME`], idle past
    /// [`defaults::SESSION_IDLE`], or past its `until` (the access token
    /// it was signed in with expired).
    fn ended(&self, now: Instant) -> bool {
        let age = now.saturating_duration_since(self.started);
        match self.approver {
            None => age >= defaults::SIGN_IN_FORM_LIFETIME,
            Some(_) => {
                age >= defaults::SESSION_LIFETIME
                    || now.saturating_duration_since(self.seen) >= defaults::SESSION_IDLE
                    || self.until.is_some_and(|until| now >= until)
            }
        }
    }
}

/// The operating system's generator failed: no session can be made.
#[derive(Debug, thiserror::Error)]
#[error("no random session id can be made: {0}")]
pub(crate) struct NoRandomness(getrandom::Error);

/// 32 bytes from the operating system's generator, in hex (64
/// characters).
fn random_token() -> Result<String, NoRandomness> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(NoRandomness)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Every session of one admin endpoint, at most
/// [`defaults::MAX_PAGE_SESSIONS`].
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    fn held(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        // Consistent between statements: a panic elsewhere leaves nothing
        // half done.
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new anonymous session, for a sign-in form.
    ///
    /// # Errors
    ///
    /// [`NoRandomness`] when no id can be drawn.
    pub(crate) fn start(&self) -> Result<Session, NoRandomness> {
        self.insert(None, None, Instant::now())
    }

    /// Starts a sign-in through the issuer in the anonymous session `id`:
    /// a new [`Flow`], replacing any the session had (only the latest
    /// answer is taken). `Ok(None)` when `id` names no live anonymous
    /// session.
    ///
    /// # Errors
    ///
    /// [`NoRandomness`] when no state or verifier can be drawn.
    pub(crate) fn begin_flow(&self, id: &str) -> Result<Option<Flow>, NoRandomness> {
        let flow = Flow {
            state: random_token()?,
            verifier: random_token()?,
        };
        let now = Instant::now();
        let mut sessions = self.held();
        let Some(session) = sessions.get_mut(id) else {
            return Ok(None);
        };
        if session.approver.is_some() || session.ended(now) {
            return Ok(None);
        }
        session.seen = now;
        session.flow = Some(flow.clone());
        Ok(Some(flow))
    }

    /// Takes the flow of the anonymous session `id` for an answer that
    /// carried `state`: the flow when `state` is its state (compared in
    /// constant time), else `None`. Either way the session keeps no flow
    /// after: one answer per flow, right or wrong.
    pub(crate) fn take_flow(&self, id: &str, state: &str) -> Option<Flow> {
        let now = Instant::now();
        let mut sessions = self.held();
        let session = sessions.get_mut(id)?;
        if session.ended(now) {
            return None;
        }
        let flow = session.flow.take()?;
        bool::from(flow.state.as_bytes().ct_eq(state.as_bytes())).then_some(flow)
    }

    /// The session `id`, its idle time reset; `None` when there is none
    /// or it has ended (it is then forgotten).
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        self.get_at(id, Instant::now())
    }

    fn get_at(&self, id: &str, now: Instant) -> Option<Session> {
        let mut sessions = self.held();
        let session = sessions.get_mut(id)?;
        if session.ended(now) {
            sessions.remove(id);
            return None;
        }
        session.seen = now;
        Some(session.clone())
    }

    /// Ends the session `previous` (anonymous or not) and starts one under
    /// a new id and a new CSRF token, signed in as `approver`, ending
    /// within the page's caps and at `until` at the latest when given.
    ///
    /// # Errors
    ///
    /// [`NoRandomness`] when no id can be drawn; `previous` is ended all
    /// the same.
    pub(crate) fn sign_in(
        &self,
        previous: &str,
        approver: Approver,
        until: Option<Instant>,
    ) -> Result<Session, NoRandomness> {
        self.end(previous);
        self.insert(Some(approver), until, Instant::now())
    }

    /// Ends the session `id`, if there is one.
    pub(crate) fn end(&self, id: &str) {
        self.held().remove(id);
    }

    fn insert(
        &self,
        approver: Option<Approver>,
        until: Option<Instant>,
        now: Instant,
    ) -> Result<Session, NoRandomness> {
        let session = Session {
            id: random_token()?,
            csrf: random_token()?,
            approver,
            flow: None,
            until,
            started: now,
            seen: now,
        };
        let mut sessions = self.held();
        if sessions.len() >= defaults::MAX_PAGE_SESSIONS {
            sessions.retain(|_, session| !session.ended(now));
        }
        if sessions.len() >= defaults::MAX_PAGE_SESSIONS {
            // Full of live sessions: an anonymous one goes first (anyone
            // who reaches the endpoint can make those), else the oldest.
            let oldest = |anonymous: bool| {
                sessions
                    .values()
                    .filter(|session| session.approver.is_none() == anonymous)
                    .min_by_key(|session| session.started)
                    .map(|session| session.id.clone())
            };
            if let Some(id) = oldest(true).or_else(|| oldest(false)) {
                sessions.remove(&id);
            }
        }
        sessions.insert(session.id.clone(), session.clone());
        Ok(session)
    }

    /// How many sessions are kept, for tests.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carol() -> Approver {
        Approver {
            name: "carol".to_owned(),
            via: SignIn::AdminToken,
        }
    }

    #[test]
    fn ids_and_tokens_are_random_hex_and_a_sign_in_takes_a_new_id() {
        let sessions = Sessions::default();
        let form = sessions.start().unwrap();
        assert_eq!(form.id.len(), 64);
        assert!(form.id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(form.id, form.csrf);
        assert!(form.approver.is_none());
        assert!(form.csrf_matches(&form.csrf));
        assert!(!form.csrf_matches(""));
        assert!(!form.csrf_matches(&form.id));

        let signed_in = sessions.sign_in(&form.id, carol(), None).unwrap();
        assert_ne!(signed_in.id, form.id);
        assert_ne!(signed_in.csrf, form.csrf);
        assert!(sessions.get(&form.id).is_none(), "the form's id lives on");
        assert_eq!(sessions.get(&signed_in.id).unwrap().approver, Some(carol()));
        sessions.end(&signed_in.id);
        assert!(sessions.get(&signed_in.id).is_none());
    }

    #[test]
    fn sessions_end_when_idle_or_old_and_forms_sooner() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let form = sessions.insert(None, None, start).unwrap();
        let later = start + defaults::SIGN_IN_FORM_LIFETIME;
        assert!(sessions.get_at(&form.id, later).is_none());

        let signed_in = sessions.insert(Some(carol()), None, start).unwrap();
        // Kept alive by use, up to its lifetime.
        let mut now = start;
        while now.saturating_duration_since(start) + defaults::SESSION_IDLE / 2
            < defaults::SESSION_LIFETIME
        {
            now += defaults::SESSION_IDLE / 2;
            assert!(sessions.get_at(&signed_in.id, now).is_some());
        }
        assert!(
            sessions
                .get_at(&signed_in.id, start + defaults::SESSION_LIFETIME)
                .is_none()
        );
        let idle = sessions.insert(Some(carol()), None, start).unwrap();
        assert!(
            sessions
                .get_at(&idle.id, start + defaults::SESSION_IDLE)
                .is_none()
        );
    }

    #[test]
    fn a_session_signed_in_with_an_access_token_ends_when_it_expires() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let until = start + defaults::SESSION_IDLE / 4;
        let session = sessions.insert(Some(carol()), Some(until), start).unwrap();
        assert!(
            sessions
                .get_at(&session.id, until - defaults::SESSION_IDLE / 8)
                .is_some()
        );
        assert!(sessions.get_at(&session.id, until).is_none());
    }

    #[test]
    fn a_flow_answers_once_and_only_to_its_state() {
        let sessions = Sessions::default();
        let form = sessions.start().unwrap();
        let flow = sessions.begin_flow(&form.id).unwrap().unwrap();
        assert_eq!(flow.state.len(), 64);
        assert_eq!(flow.verifier.len(), 64);
        assert_ne!(flow.state, flow.verifier);
        assert_ne!(flow.state, form.csrf);
        // A wrong state spends the flow: the right one is refused after it.
        assert!(sessions.take_flow(&form.id, "forged").is_none());
        assert!(sessions.take_flow(&form.id, &flow.state).is_none());
        // A new flow replaces the one before.
        let first = sessions.begin_flow(&form.id).unwrap().unwrap();
        let second = sessions.begin_flow(&form.id).unwrap().unwrap();
        assert_ne!(first, second);
        assert!(sessions.take_flow(&form.id, &first.state).is_none());
        let third = sessions.begin_flow(&form.id).unwrap().unwrap();
        assert_eq!(
            sessions.take_flow(&form.id, &third.state),
            Some(third.clone())
        );
        assert!(sessions.take_flow(&form.id, &third.state).is_none());
        // Only an anonymous session starts one.
        let signed_in = sessions.sign_in(&form.id, carol(), None).unwrap();
        assert_eq!(sessions.begin_flow(&signed_in.id).unwrap(), None);
        assert_eq!(sessions.begin_flow("no-such-session").unwrap(), None);
    }

    #[test]
    fn a_full_table_drops_an_anonymous_session_before_a_signed_in_one() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let signed_in = sessions.insert(Some(carol()), None, now).unwrap();
        for _ in 1..defaults::MAX_PAGE_SESSIONS + 10 {
            sessions.insert(None, None, now).unwrap();
        }
        assert_eq!(sessions.len(), defaults::MAX_PAGE_SESSIONS);
        assert!(sessions.get_at(&signed_in.id, now).is_some());
    }
}
