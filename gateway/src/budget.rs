//! Retry budgets per principal: how many resends the replay-safe client may
//! make for one principal's calls to one upstream, so that one client's
//! lost responses cannot spend another's resends, and so that every replica
//! sharing a state draws on one budget.
//!
//! A budget allows, over the replay-safe client's window (10 s), a reserve
//! of one resend a second plus 20 % of the calls made (its
//! `defaults::BUDGET_*`, the arithmetic of tower's `TpsBudget`). tower asks
//! a budget synchronously, inside the resend loop, so a replica cannot wait
//! for the shared state there: it decides on what the backend last
//! answered of every replica's use plus its own use since, and a task
//! reports that use and learns the total every
//! [`BUDGET_REPORT_INTERVAL`]. On one replica that is exact; across
//! replicas the others' last quarter-second may not be seen yet, so a
//! budget may be overdrawn by at most what the other replicas resent in
//! that time.
//!
//! While the shared state cannot be reached, a budget follows
//! `[state] rate_limit_fallback`: `deny` allows no resend (the call is
//! reported delivery unknown, as when the budget is spent), `local`
//! decides on this replica's own use alone.
//!
//! The principal of the call in progress reaches the budget through a
//! task-local ([`with_principal`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use mcp_hints::client::defaults;
use tower::retry::budget::{Budget, TpsBudget};

use crate::config::RateLimitFallback;
use crate::state::{BUDGET_REPORT_INTERVAL, BudgetUse, SharedState};

tokio::task_local! {
    /// The principal of the call being forwarded, for [`RetryBudgets`].
    static PRINCIPAL: Arc<str>;
}

/// Runs `call` with `principal` as the principal its resends are charged
/// to.
pub(crate) async fn with_principal<F: Future>(principal: &str, call: F) -> F::Output {
    PRINCIPAL.scope(Arc::from(principal), call).await
}

/// The retry budgets of one upstream, one per principal, kept in a
/// [`SharedState`]. Calls made outside [`with_principal`] share one budget.
#[derive(Clone)]
pub(crate) struct RetryBudgets {
    shared: Arc<Shared>,
}

struct Shared {
    upstream: String,
    state: Arc<dyn SharedState>,
    fallback: RateLimitFallback,
    accounts: Mutex<HashMap<Arc<str>, Account>>,
    /// Held through each report: one at a time, so that an account's
    /// `reporting` is one report's.
    round: tokio::sync::Mutex<()>,
}

/// One principal's budget, as this replica knows it.
struct Account {
    /// Every replica's use, as the backend last answered.
    known: BudgetUse,
    /// This replica's use in the report the backend has not answered yet.
    reporting: BudgetUse,
    /// This replica's use since.
    unreported: BudgetUse,
    /// Whether the backend answered the last report.
    reachable: bool,
    /// When a call or resend last used it: an account idle for a window
    /// has nothing left to learn and is dropped.
    used_at: Instant,
    /// This replica's use alone, for `rate_limit_fallback = "local"`.
    local: TpsBudget,
}

impl Account {
    fn new() -> Account {
        Account {
            known: BudgetUse::default(),
            reporting: BudgetUse::default(),
            unreported: BudgetUse::default(),
            reachable: true,
            used_at: Instant::now(),
            local: TpsBudget::new(
                defaults::BUDGET_WINDOW,
                defaults::BUDGET_MIN_PER_SECOND,
                defaults::BUDGET_RATIO,
            ),
        }
    }
}

/// Whether a budget used as `total` over its window allows one resend more.
fn allows(total: BudgetUse) -> bool {
    let reserve =
        f64::from(defaults::BUDGET_MIN_PER_SECOND) * defaults::BUDGET_WINDOW.as_secs_f64();
    let earned = f64::from(defaults::BUDGET_RATIO) * total.deposits as f64;
    (total.withdrawals.saturating_add(1)) as f64 <= reserve + earned
}

impl RetryBudgets {
    /// The budgets of `upstream`'s calls, in `state`, deciding by
    /// `fallback` while `state` cannot be reached. Starts the task that
    /// reports to `state`, which ends with the last clone: call within a
    /// tokio runtime.
    pub(crate) fn new(
        upstream: &str,
        state: Arc<dyn SharedState>,
        fallback: RateLimitFallback,
    ) -> RetryBudgets {
        let shared = Arc::new(Shared {
            upstream: upstream.to_owned(),
            state,
            fallback,
            accounts: Mutex::new(HashMap::new()),
            round: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(report(Arc::downgrade(&shared)));
        RetryBudgets { shared }
    }

    fn with_account<T>(&self, change: impl FnOnce(&mut Account) -> T) -> T {
        let principal = PRINCIPAL
            .try_with(Arc::clone)
            .unwrap_or_else(|_| Arc::from(""));
        let mut accounts = self.shared.accounts();
        let account = accounts.entry(principal).or_insert_with(Account::new);
        account.used_at = Instant::now();
        change(account)
    }
}

impl Shared {
    fn accounts(&self) -> MutexGuard<'_, HashMap<Arc<str>, Account>> {
        // Each account is consistent between statements.
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Budget for RetryBudgets {
    fn deposit(&self) {
        self.with_account(|account| {
            account.unreported.deposits += 1;
            account.local.deposit();
        });
    }

    fn withdraw(&self) -> bool {
        let fallback = self.shared.fallback;
        self.with_account(|account| {
            // The local budget is drawn on in step, so that it is current
            // when the shared one cannot be reached.
            let locally = account.local.withdraw();
            let allowed = if account.reachable {
                allows(account.known + account.reporting + account.unreported)
            } else {
                fallback == RateLimitFallback::Local && locally
            };
            if allowed {
                account.unreported.withdrawals += 1;
            }
            allowed
        })
    }
}

/// Reports each budget's use to the shared state and learns its total,
/// every [`BUDGET_REPORT_INTERVAL`], while anyone holds the budgets.
async fn report(shared: Weak<Shared>) {
    let mut ticks = tokio::time::interval(BUDGET_REPORT_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.report_round().await;
    }
}

impl Shared {
    /// One report of every account in use, and what the state answered.
    async fn report_round(&self) {
        let _round = self.round.lock().await;
        let due: Vec<(Arc<str>, BudgetUse)> = {
            let mut accounts = self.accounts();
            accounts.retain(|_, account| {
                !account.unreported.is_empty()
                    || account.used_at.elapsed() < defaults::BUDGET_WINDOW
            });
            accounts
                .iter_mut()
                .map(|(principal, account)| {
                    account.reporting = std::mem::take(&mut account.unreported);
                    (principal.clone(), account.reporting)
                })
                .collect()
        };
        let answers = futures_util::future::join_all(due.iter().map(|(principal, used)| {
            let budget = format!("{}:{principal}", self.upstream);
            async move {
                self.state
                    .retry_budget(&budget, *used, defaults::BUDGET_WINDOW)
                    .await
            }
        }))
        .await;
        let mut accounts = self.accounts();
        for ((principal, _), answer) in due.iter().zip(answers) {
            let Some(account) = accounts.get_mut(principal) else {
                continue;
            };
            account.reporting = BudgetUse::default();
            match answer {
                Ok(total) => {
                    if !account.reachable {
                        tracing::info!(
                            upstream = %self.upstream,
                            "the retry budgets of upstream `{}` are shared again",
                            self.upstream
                        );
                    }
                    account.known = total;
                    account.reachable = true;
                }
                // What was reported may or may not have been counted: it
                // is not reported again, so the budget errs on allowing.
                Err(error) => {
                    if account.reachable {
                        let error =
                            mcp_hints_core::escape::one_line(&error.to_string()).into_owned();
                        tracing::warn!(
                            upstream = %self.upstream,
                            %error,
                            "{error}; resends to upstream `{}` are decided by `rate_limit_fallback` ({}) until it answers",
                            self.upstream,
                            match self.fallback {
                                RateLimitFallback::Deny => "none allowed",
                                RateLimitFallback::Local => "this replica's budget",
                            }
                        );
                    }
                    account.reachable = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use async_trait::async_trait;
    use mcp_hints::fingerprint::PinnedTool;
    use tokio::sync::broadcast;

    use super::*;
    use crate::approval::{Parked, Resolution};
    use crate::state::{Counted, InProcess, StateError, Window};

    /// Withdraws from `budget` as `principal` until it refuses, at most
    /// `bound` times: how many resends it allowed.
    async fn spend(budget: &RetryBudgets, principal: &str, bound: usize) -> usize {
        with_principal(principal, async {
            (0..bound).take_while(|_| budget.withdraw()).count()
        })
        .await
    }

    async fn deposit(budget: &RetryBudgets, principal: &str, calls: usize) {
        with_principal(principal, async {
            for _ in 0..calls {
                budget.deposit();
            }
        })
        .await;
    }

    /// One report of `budget`'s use, as its task makes every interval.
    async fn reported(budget: &RetryBudgets) {
        budget.shared.report_round().await;
    }

    #[tokio::test]
    async fn one_principals_resends_cannot_spend_anothers_budget() {
        let budget = RetryBudgets::new(
            "notes",
            Arc::new(InProcess::new(None)),
            RateLimitFallback::Deny,
        );
        // The reserve: 1 resend a second over a 10-second window.
        assert_eq!(spend(&budget, "alice", 1_000).await, 10);
        assert_eq!(spend(&budget, "alice", 1_000).await, 0, "alice's is spent");
        assert_eq!(spend(&budget, "bob", 1_000).await, 10, "bob's is whole");
        // Calls deposit into their principal's budget only: 20 % of them.
        deposit(&budget, "alice", 50).await;
        assert_eq!(spend(&budget, "alice", 1_000).await, 10);
        assert_eq!(spend(&budget, "bob", 1_000).await, 0);
        // Reporting changes nothing on one replica.
        reported(&budget).await;
        assert_eq!(spend(&budget, "alice", 1_000).await, 0);
    }

    #[tokio::test]
    async fn replicas_sharing_a_state_draw_on_one_budget() {
        let state: Arc<dyn SharedState> = Arc::new(InProcess::new(None));
        let a = RetryBudgets::new("notes", state.clone(), RateLimitFallback::Deny);
        let b = RetryBudgets::new("notes", state.clone(), RateLimitFallback::Deny);
        let other = RetryBudgets::new("files", state, RateLimitFallback::Deny);
        // A replica learns of a budget once it has used it.
        deposit(&a, "alice", 1).await;
        deposit(&b, "alice", 1).await;
        assert_eq!(spend(&a, "alice", 6).await, 6);
        reported(&a).await;
        reported(&b).await;
        assert_eq!(spend(&b, "alice", 1_000).await, 4, "a's six are seen at b");
        assert_eq!(
            spend(&other, "alice", 1_000).await,
            10,
            "another upstream's is apart"
        );
        // 27 calls in all earn 5 resends more (20 %, whole ones).
        deposit(&b, "alice", 25).await;
        reported(&b).await;
        reported(&a).await;
        assert_eq!(
            spend(&a, "alice", 1_000).await,
            5,
            "b's calls pay for a's resends"
        );
        assert_eq!(spend(&a, "alice", 1_000).await, 0);
    }

    /// A backend that cannot be reached.
    #[derive(Debug)]
    struct Down;

    #[async_trait]
    impl SharedState for Down {
        fn backend(&self) -> &'static str {
            "down"
        }
        async fn count(&self, _: &str, _: &[Window<'_>]) -> Result<Counted, StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn park(&self, _: &Parked) -> Result<(), StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn resolve(&self, _: &str, _: &Resolution) -> Result<bool, StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn resolution(&self, _: &str) -> Result<Option<Resolution>, StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn pending(&self) -> Result<Vec<Parked>, StateError> {
            Err(StateError::new("down", "refused"))
        }
        fn resolved(&self) -> broadcast::Receiver<String> {
            broadcast::channel(1).1
        }
        async fn approved_tool(&self, _: &str) -> Result<Option<PinnedTool>, StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn approve_tool(&self, _: &str, _: &PinnedTool) -> Result<(), StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn retry_budget(
            &self,
            _: &str,
            _: BudgetUse,
            _: Duration,
        ) -> Result<BudgetUse, StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn open_session(&self, _: &str, _: &str, _: &str) -> Result<(), StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn session_opener(&self, _: &str, _: &str) -> Result<Option<String>, StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn end_session(&self, _: &str) -> Result<(), StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn record_history(
            &self,
            _: &str,
            _: &crate::session::HistoryEvent,
            _: crate::session::HistoryLimits,
        ) -> Result<(), StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn history(&self, _: &str) -> Result<crate::session::History, StateError> {
            Err(StateError::new("down", "refused"))
        }
        async fn ready(&self) -> Result<(), StateError> {
            Err(StateError::new("down", "refused"))
        }
    }

    #[tokio::test]
    async fn an_unreachable_state_allows_no_resend_or_this_replicas_by_the_fallback() {
        let deny = RetryBudgets::new("notes", Arc::new(Down), RateLimitFallback::Deny);
        let local = RetryBudgets::new("notes", Arc::new(Down), RateLimitFallback::Local);
        // Both used once, so that the report task learns the state is down.
        assert!(deny.withdraw() && local.withdraw());
        reported(&deny).await;
        reported(&local).await;
        assert_eq!(spend(&deny, "", 1_000).await, 0);
        assert_eq!(
            spend(&local, "", 1_000).await,
            9,
            "the local reserve, less the first"
        );
    }
}
