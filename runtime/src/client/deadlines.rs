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
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::runtime::{Handle, Id};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};

/// The requests of one client waiting for their responses.
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    state: Mutex<State>,
    /// Tells the watchdog that a deadline came before the one it sleeps
    /// until.
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
    watchdog: Option<Watchdog>,
    /// The deadline the watchdog sleeps until, while it sleeps.
    armed: Option<Instant>,
}

#[derive(Debug)]
struct Watchdog {
    task: JoinHandle<()>,
    /// The runtime it runs on: only requests made there are queued, since
    /// a runtime that is not being driven (a current-thread one outside
    /// `block_on`) would never wake them.
    runtime: Id,
}

#[derive(Debug)]
struct Waiting {
    number: u64,
    deadline: Instant,
    /// Woken when the deadline passes; `None` until the request is polled.
    waker: Option<Waker>,
}

/// One request's deadline; dropping it (the response came, or the call
/// was dropped) takes it out of the queue.
#[derive(Debug)]
pub(super) struct Deadline {
    deadlines: Arc<Deadlines>,
    place: Place,
}

#[derive(Debug)]
enum Place {
    /// Its number in the queue.
    Queued(u64),
    /// A timer of its own: the request was made on a runtime other than
    /// the watchdog's.
    Own(Pin<Box<Sleep>>),
}

impl Deadlines {
    /// The deadline of a request sent now that waits at most `timeout`.
    ///
    /// Starts the watchdog on the current Tokio runtime when none runs (the
    /// first request, or one after a quiet spell, or after the runtime the
    /// last one ran on shut down). A request made on a runtime other than
    /// the running watchdog's gets a timer of its own.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, or on one without timers, as
    /// `tokio::time::timeout` does.
    pub(super) fn start(self: &Arc<Self>, timeout: Duration) -> Deadline {
        let runtime = Handle::current();
        let deadline = Instant::now()
            .checked_add(timeout)
            // A timeout too long for the clock never passes.
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365 * 30));
        let mut state = self.state();
        let watchdog = state
            .watchdog
            .as_ref()
            .filter(|watchdog| !watchdog.task.is_finished())
            .map(|watchdog| watchdog.runtime);
        match watchdog {
            Some(there) if there != runtime.id() => {
                drop(state);
                return Deadline {
                    deadlines: self.clone(),
                    place: Place::Own(Box::pin(tokio::time::sleep_until(deadline))),
                };
            }
            Some(_) => {}
            None => {
                // Made here, so that a runtime without timers panics in the
                // caller, not in the watchdog's task.
                let sleep = Box::pin(tokio::time::sleep_until(deadline));
                state.armed = None;
                state.watchdog = Some(Watchdog {
                    task: runtime.spawn(watch(self.clone(), sleep)),
                    runtime: runtime.id(),
                });
            }
        }
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
        }
        if state.armed.is_some_and(|armed| deadline < armed) {
            self.earlier.notify_one();
        }
        Deadline {
            deadlines: self.clone(),
            place: Place::Queued(number),
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
    pub(super) fn passed(&mut self, cx: &mut Context<'_>) -> bool {
        let number = match &mut self.place {
            Place::Own(sleep) => return sleep.as_mut().poll(cx).is_ready(),
            Place::Queued(number) => *number,
        };
        let mut state = self.deadlines.state();
        match find(&state.waiting, number) {
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
        let Place::Queued(number) = self.place else {
            return;
        };
        let mut state = self.deadlines.state();
        if let Some(at) = find(&state.waiting, number) {
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

/// Wakes each request whose deadline passed, sleeping on `sleep` until
/// the next deadline or until an earlier one comes; ends when, awake, it
/// finds no request waiting (so at most the longest timeout after the
/// client's last request ended).
async fn watch(deadlines: Arc<Deadlines>, mut sleep: Pin<Box<Sleep>>) {
    loop {
        {
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
            let Some(next) = state.waiting.front().map(|front| front.deadline) else {
                // Under the lock: a request sent from now on finds no
                // watchdog and starts one.
                state.watchdog = None;
                state.armed = None;
                return;
            };
            state.armed = Some(next);
            sleep.as_mut().reset(next);
        }
        tokio::select! {
            () = sleep.as_mut() => {}
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
    async fn until_passed(deadline: &mut Deadline) {
        poll_fn(|cx| {
            if deadline.passed(cx) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    /// Whether `deadline` passed, asked once.
    fn passed_now(deadline: &mut Deadline) -> bool {
        deadline.passed(&mut Context::from_waker(Waker::noop()))
    }

    fn queued(deadline: &Deadline) -> bool {
        matches!(deadline.place, Place::Queued(_))
    }

    #[tokio::test(start_paused = true)]
    async fn each_request_stops_waiting_at_its_own_deadline() {
        let deadlines = Arc::new(Deadlines::default());
        let started = Instant::now();
        let mut first = deadlines.start(Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(4)).await;
        let mut second = deadlines.start(Duration::from_secs(10));
        assert!(queued(&first) && queued(&second));
        until_passed(&mut first).await;
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert!(!passed_now(&mut second));
        until_passed(&mut second).await;
        assert_eq!(started.elapsed(), Duration::from_secs(14));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shorter_timeout_wakes_the_watchdog_sooner() {
        let deadlines = Arc::new(Deadlines::default());
        let started = Instant::now();
        let mut long = deadlines.start(Duration::from_secs(100));
        // The watchdog sleeps until the long deadline.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let mut short = deadlines.start(Duration::from_secs(1));
        until_passed(&mut short).await;
        assert_eq!(started.elapsed(), Duration::from_millis(1_001));
        assert!(!passed_now(&mut long));
        until_passed(&mut long).await;
        assert_eq!(started.elapsed(), Duration::from_secs(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shorter_timeout_into_an_emptied_queue_wakes_the_watchdog_sooner() {
        let deadlines = Arc::new(Deadlines::default());
        let started = Instant::now();
        let long = deadlines.start(Duration::from_secs(100));
        tokio::time::sleep(Duration::from_millis(1)).await;
        // Answered: the queue is empty, the watchdog still asleep.
        drop(long);
        let mut short = deadlines.start(Duration::from_secs(1));
        until_passed(&mut short).await;
        assert_eq!(started.elapsed(), Duration::from_millis(1_001));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_answered_in_time_never_passes_and_leaves_nothing() {
        let deadlines = Arc::new(Deadlines::default());
        let answered = deadlines.start(Duration::from_secs(10));
        let mut late = deadlines.start(Duration::from_secs(10));
        drop(answered);
        assert_eq!(deadlines.state().waiting.len(), 1);
        until_passed(&mut late).await;
        drop(late);
        // The watchdog ends once nothing waits, and the next request starts
        // another.
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(deadlines.state().watchdog.is_none());
        let mut again = deadlines.start(Duration::from_secs(1));
        until_passed(&mut again).await;
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
        for request in requests.iter_mut().flatten() {
            assert!(!passed_now(request));
        }
        for request in requests.iter_mut().flatten() {
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
        let kept = first.block_on(async { deadlines.start(Duration::from_secs(3_600)) });
        drop(first);
        // The watchdog died with its runtime; a request on another starts
        // one there, which wakes it.
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        second.block_on(async {
            let mut request = deadlines.start(Duration::from_millis(10));
            assert!(queued(&request));
            until_passed(&mut request).await;
        });
        drop(kept);
    }

    #[test]
    fn a_request_on_another_runtime_than_the_watchdogs_times_out_on_its_own() {
        let deadlines = Arc::new(Deadlines::default());
        // A current-thread runtime outside `block_on` runs nothing: its
        // watchdog would never wake a request made elsewhere.
        let idle = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let kept = idle.block_on(async { deadlines.start(Duration::from_secs(3_600)) });
        let other = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        let timed_out = other.block_on(async {
            let mut request = deadlines.start(Duration::from_millis(10));
            assert!(!queued(&request));
            tokio::time::timeout(Duration::from_secs(10), until_passed(&mut request)).await
        });
        assert!(
            timed_out.is_ok(),
            "a 10 ms deadline had not passed after 10 s"
        );
        drop(kept);
    }

    #[test]
    #[should_panic(expected = "timers are disabled")]
    fn a_runtime_without_timers_panics_in_the_caller() {
        let deadlines = Arc::new(Deadlines::default());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            deadlines.start(Duration::from_millis(1));
        });
    }
}
