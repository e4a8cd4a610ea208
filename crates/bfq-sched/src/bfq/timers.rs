//! BFQ's timers, by name (the style guide's quinn-proto keeps one table of named timers and reports
//! the earliest): `Scheduler::next_timer` is the earliest armed one, and `Scheduler::timer` handles
//! every one that is due. The idle slice of the in-service queue (seed 001 sec. 3,
//! kernel-bfq-reference.md "Idling": the device is idled for the queue's next synchronous request
//! until the slice ends, then the queue expires as too idle), and within it the wait after which
//! queues raised as the in-service one may go in (`raised_sibling_wait`, beyond the seeds). The
//! budget timeout is not a timer: as in the kernel, it is checked when the queue next dispatches or
//! completes (a queue being served is never idle long enough for it to matter otherwise).

use crate::types::Instant;

/// The timers BFQ arms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// The in-service queue's idle slice ends: expire it as too idle.
    IdleSlice,
    /// The in-service raised queue has been idled for longer than it takes to come back: queues
    /// raised as it is may go in (`raised_sibling_wait`, `bfq::injection`).
    SiblingWait,
}

/// Every timer with its deadline, if armed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timers {
    idle_slice: Option<Instant>,
    sibling_wait: Option<Instant>,
}

impl Timers {
    /// Arms (`Some`) or disarms (`None`) a timer.
    pub fn set(&mut self, timer: Timer, at: Option<Instant>) {
        match timer {
            Timer::IdleSlice => self.idle_slice = at,
            Timer::SiblingWait => self.sibling_wait = at,
        }
    }

    /// A timer's deadline, if armed.
    pub fn get(&self, timer: Timer) -> Option<Instant> {
        match timer {
            Timer::IdleSlice => self.idle_slice,
            Timer::SiblingWait => self.sibling_wait,
        }
    }

    fn all(&self) -> [(Timer, Option<Instant>); 2] {
        [(Timer::IdleSlice, self.idle_slice), (Timer::SiblingWait, self.sibling_wait)]
    }

    /// The earliest armed timer.
    pub fn earliest(&self) -> Option<(Timer, Instant)> {
        self.all().into_iter().filter_map(|(t, at)| at.map(|at| (t, at))).min_by_key(|&(_, at)| at)
    }

    /// The timers due at `now`, earliest first (without allocating: the sibling wait fires once per
    /// idle window of a raised queue, in the engine's steady state).
    pub fn due(&self, now: Instant) -> impl Iterator<Item = Timer> {
        let mut due = self.all().map(|(t, at)| at.filter(|&a| a <= now).map(|a| (a, t)));
        // `None` (not due) sorts first and is dropped by `flatten`.
        due.sort_by_key(|d| d.map(|(at, _)| at));
        due.into_iter().flatten().map(|(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_armed_timer_is_reported_and_only_due_ones_fire() {
        let mut t = Timers::default();
        assert_eq!(t.earliest(), None);
        t.set(Timer::IdleSlice, Some(Instant::from_nanos(500)));
        assert_eq!(t.earliest(), Some((Timer::IdleSlice, Instant::from_nanos(500))));
        assert_eq!(t.due(Instant::from_nanos(499)).count(), 0);
        assert_eq!(t.due(Instant::from_nanos(500)).collect::<Vec<_>>(), vec![Timer::IdleSlice]);
        t.set(Timer::IdleSlice, None);
        assert_eq!((t.get(Timer::IdleSlice), t.earliest()), (None, None));
    }
}
