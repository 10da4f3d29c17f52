//! When each request of one client stops waiting for its response: one
//! Tokio timer for the client, armed for the request that stops first,
//! instead of one timer per request.
//!
//! rmcp's `RequestHandle::await_response` with a timeout races the
//! response against a timer of its own, put into the runtime's timer wheel
//! and taken out again on every request. Beside rmcp's bare `call_tool`
//! over an in-process duplex pair, that timer made `ReplaySafeClient`
//! 1.08x as slow (31 rounds of 400 calls alternated call by call), and
//! 1.02x without it, for about 1% more instructions (callgrind) and no
//! added system call (`strace -f -c`). Every request of a client
//! waits the same `call_timeout`, so their deadlines mostly come in the
//! order the requests were sent: a queue in deadline order, pushed at its
//! back, and a watchdog task that sleeps until the deadline at its front,
//! cost each request a lock taken when it is sent, when it is polled and
//! when it ends, and no timer: 1.03x and 1.01x in two runs of the same
//! benchmark.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The requests of one client waiting for their responses.
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    state: Mutex<State>,
    /// Tells the watchdog that the front's deadline came forward.
    earlier: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The requests waiting, in the order of their deadlines (requests
    /// with the same deadline in the order they were sent).
    waiting: VecDeque<Waiting>,
    /// The number the next request gets.
    next: u64,
    /// The watchdog, while it runs.
    watchdog: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Waiting {
    number: u64,
    deadline: Instant,
    /// Woken when the deadline passes; `None` until the request is polled.
    waker: Option<Waker>,
}

/// One request's place in [`Deadlines`]; dropping it (the response came,
/// or the call was dropped) takes it out.
#[derive(Debug)]
pub(super) struct Deadline {
    deadlines: Arc<Deadlines>,
    number: u64,
}

impl Deadlines {
    /// A place for a request sent now that waits at most `timeout`.
    ///
    /// Starts the watchdog on the current Tokio runtime when none runs (the
    /// first request, or one after a quiet spell, or after the runtime the
    /// last one ran on shut down).
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, as `tokio::time::timeout` does.
    pub(super) fn start(self: &Arc<Self>, timeout: Duration) -> Deadline {
        let deadline = Instant::now()
            .checked_add(timeout)
            // A timeout too long for the clock never passes.
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365 * 30));
        let mut state = self.state();
        let number = state.next;
        state.next += 1;
        let waiting = Waiting {
            number,
            deadline,
            waker: None,
        };
        // With one timeout for every request, deadlines grow with the order
        // of sending (Tokio's `Instant` is monotonic): a push at the back.
        if state
            .waiting
            .back()
            .is_none_or(|last| last.deadline <= deadline)
        {
            state.waiting.push_back(waiting);
        } else {
            let at = state
                .waiting
                .partition_point(|other| other.deadline <= deadline);
            state.waiting.insert(at, waiting);
            if at == 0 {
                self.earlier.notify_one();
            }
        }
        let running = state
            .watchdog
            .as_ref()
            .is_some_and(|watchdog| !watchdog.is_finished());
        if !running {
            state.watchdog = Some(tokio::spawn(watch(self.clone())));
        }
        Deadline {
            deadlines: self.clone(),
            number,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Each change is made whole under the lock: a poisoned state is
        // still whole.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Deadline {
    /// Whether the deadline passed; if not, `cx`'s waker is woken when it
    /// does.
    pub(super) fn passed(&self, cx: &Context<'_>) -> bool {
        let mut state = self.deadlines.state();
        match find(&state.waiting, self.number) {
            Some(at) => {
                let slot = &mut state.waiting[at].waker;
                if !slot
                    .as_ref()
                    .is_some_and(|waker| waker.will_wake(cx.waker()))
                {
                    *slot = Some(cx.waker().clone());
                }
                false
            }
            // Only the watchdog takes out a request whose `Deadline` is
            // still held: its deadline passed.
            None => true,
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        let mut state = self.deadlines.state();
        if let Some(at) = find(&state.waiting, self.number) {
            // Mostly the front: requests are answered mostly in the order
            // they were sent.
            state.waiting.remove(at);
        }
    }
}

/// Where request `number` waits, if it still does.
fn find(waiting: &VecDeque<Waiting>, number: u64) -> Option<usize> {
    let front = waiting.front()?.number;
    // Mostly numbered in order and taken out anywhere: at `guess` when none
    // before it was taken out, else before it, found by a binary search;
    // a request put in ahead of others (a shorter timeout) by a scan.
    let guess = number
        .checked_sub(front)
        .and_then(|offset| usize::try_from(offset).ok());
    if let Some(guess) = guess
        && waiting.get(guess).is_some_and(|w| w.number == number)
    {
        return Some(guess);
    }
    waiting
        .binary_search_by_key(&number, |w| w.number)
        .ok()
        .or_else(|| waiting.iter().position(|w| w.number == number))
}

/// Wakes each request whose deadline passed, sleeping until the next
/// deadline or until one comes forward; ends when, awake, it finds no
/// request waiting (so at most the longest timeout after the client's
/// last request ended).
async fn watch(deadlines: Arc<Deadlines>) {
    loop {
        let next = {
            let mut state = deadlines.state();
            let now = Instant::now();
            while let Some(front) = state.waiting.front() {
                if front.deadline > now {
                    break;
                }
                let passed = state.waiting.pop_front().expect("just read");
                if let Some(waker) = passed.waker {
                    waker.wake();
                }
            }
            match state.waiting.front() {
                Some(front) => front.deadline,
                None => {
                    // Under the lock: a request sent from now on finds no
                    // watchdog and starts one.
                    state.watchdog = None;
                    return;
                }
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = deadlines.earlier.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::task::Poll;

    /// Waits until `deadline` passed.
    async fn until_passed(deadline: &Deadline) {
        poll_fn(|cx| {
            if deadline.passed(cx) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn each_request_stops_waiting_at_its_own_deadline() {
        let deadlines = Arc::new(Deadlines::default());
        let started = Instant::now();
        let first = deadlines.start(Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(4)).await;
        let second = deadlines.start(Duration::from_secs(10));
        until_passed(&first).await;
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        let waker = std::task::Waker::noop();
        assert!(!second.passed(&Context::from_waker(waker)));
        until_passed(&second).await;
        assert_eq!(started.elapsed(), Duration::from_secs(14));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shorter_timeout_wakes_the_watchdog_sooner() {
        let deadlines = Arc::new(Deadlines::default());
        let started = Instant::now();
        let long = deadlines.start(Duration::from_secs(100));
        // The watchdog sleeps until the long deadline.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let short = deadlines.start(Duration::from_secs(1));
        until_passed(&short).await;
        assert_eq!(started.elapsed(), Duration::from_millis(1_001));
        let waker = std::task::Waker::noop();
        assert!(!long.passed(&Context::from_waker(waker)));
        until_passed(&long).await;
        assert_eq!(started.elapsed(), Duration::from_secs(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_answered_in_time_never_passes_and_leaves_nothing() {
        let deadlines = Arc::new(Deadlines::default());
        let answered = deadlines.start(Duration::from_secs(10));
        let late = deadlines.start(Duration::from_secs(10));
        drop(answered);
        assert_eq!(deadlines.state().waiting.len(), 1);
        until_passed(&late).await;
        drop(late);
        // The watchdog ends once nothing waits, and the next request starts
        // another.
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(deadlines.state().watchdog.is_none());
        let again = deadlines.start(Duration::from_secs(1));
        until_passed(&again).await;
    }

    #[tokio::test(start_paused = true)]
    async fn requests_taken_out_of_the_middle_are_found_by_the_others() {
        let deadlines = Arc::new(Deadlines::default());
        let mut requests: Vec<_> = (0..6)
            .map(|_| Some(deadlines.start(Duration::from_secs(5))))
            .collect();
        for gone in [3, 1, 4] {
            requests[gone] = None;
        }
        let waker = std::task::Waker::noop();
        let cx = Context::from_waker(waker);
        for request in requests.iter().flatten() {
            assert!(!request.passed(&cx));
        }
        for request in requests.iter().flatten() {
            until_passed(request).await;
        }
        assert!(deadlines.state().waiting.is_empty());
    }

    #[test]
    fn a_runtime_shut_down_leaves_no_watchdog_behind() {
        let deadlines = Arc::new(Deadlines::default());
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let kept = first.block_on(async { deadlines.start(Duration::from_secs(3600)) });
        drop(first);
        // The watchdog died with its runtime; a request on another starts
        // one there, which wakes it.
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        second.block_on(async {
            let request = deadlines.start(Duration::from_millis(10));
            until_passed(&request).await;
        });
        drop(kept);
    }
}
