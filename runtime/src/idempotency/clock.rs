//! Where idempotency records get their times: an injectable clock, so that
//! tests move time with `tokio::time::pause()` and `advance` instead of
//! sleeping.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::store::millis;

/// The time source of an [`Idempotency`](super::Idempotency): when a key
/// was reserved, until when its lease holds, when its record expires.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;

    /// The current time in milliseconds since the Unix epoch, as records
    /// store it (0 for a time before the epoch).
    fn now_ms(&self) -> u64 {
        self.now().duration_since(UNIX_EPOCH).map_or(0, millis)
    }
}

/// A clock shared: an `Arc` of one reads the same time as the clock itself,
/// so a test (or two layers) can hold the clock an [`Idempotency`]
/// reads.
///
/// [`Idempotency`]: super::Idempotency
impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now(&self) -> SystemTime {
        C::now(self)
    }

    fn now_ms(&self) -> u64 {
        C::now_ms(self)
    }
}

/// The default clock: the wall-clock time when it was made, advanced by
/// tokio's monotonic clock since. It moves with real time, does not jump
/// when the system clock is set, and stands still under
/// `tokio::time::pause()` until a test advances it.
#[derive(Debug)]
pub struct TokioClock {
    wall: SystemTime,
    /// `wall` since the Unix epoch, when it is after it: what `now_ms`
    /// adds tokio's time to, without a `SystemTime` on every read.
    since_epoch: Option<Duration>,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading the wall-clock time now.
    pub fn new() -> TokioClock {
        let wall = SystemTime::now();
        TokioClock {
            wall,
            since_epoch: wall.duration_since(UNIX_EPOCH).ok(),
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> SystemTime {
        self.wall + self.start.elapsed()
    }

    fn now_ms(&self) -> u64 {
        match self.since_epoch {
            Some(since_epoch) => millis(since_epoch.saturating_add(self.start.elapsed())),
            None => self.now().duration_since(UNIX_EPOCH).map_or(0, millis),
        }
    }
}

/// The system's wall clock, read on every call ([`SystemTime::now`]).
/// Several replicas sharing a store agree on times only as far as their
/// system clocks agree.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// `now` plus `duration` in milliseconds, saturating.
pub(crate) fn after(now_ms: u64, duration: Duration) -> u64 {
    now_ms.saturating_add(millis(duration))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_moves_only_with_tokio_time() {
        let clock = TokioClock::new();
        let before = clock.now_ms();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(clock.now_ms() - before, 3_600_000);
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_reads_in_milliseconds_the_time_it_reads() {
        let shared = std::sync::Arc::new(TokioClock::new());
        for step in [0, 1, 999_999, 1_000_000, 1_500_000] {
            tokio::time::advance(Duration::from_nanos(step)).await;
            let millis_of_now = shared.now().duration_since(UNIX_EPOCH).map_or(0, millis);
            assert_eq!(TokioClock::now_ms(&shared), millis_of_now);
            assert_eq!(
                <std::sync::Arc<TokioClock> as Clock>::now_ms(&shared),
                millis_of_now
            );
        }
    }
}
