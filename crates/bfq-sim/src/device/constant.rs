//! A device whose every command takes the same time: not one of the papers' devices, but the simplest
//! model for testing the simulator's event loop and the schedulers' accounting.

use std::collections::VecDeque;

use bfq_sched::{DeviceInfo, Nanos, Request};

use super::{Completion, Device};

/// Serves up to `depth` commands in parallel, each in `service_time`, in submission order.
#[derive(Debug, Clone)]
pub struct ConstantDevice {
    service_time: Nanos,
    depth: u32,
    capacity_bytes: u64,
    rotational: bool,
    /// Commands being served, with their completion times (non-decreasing: all take the same time).
    serving: VecDeque<Completion>,
    /// Commands beyond the depth, waiting for a free slot.
    waiting: VecDeque<Request>,
}

impl ConstantDevice {
    /// A device serving `depth` commands at once, each in `service_time`.
    pub fn new(service_time: Nanos, depth: u32, capacity_bytes: u64) -> Self {
        ConstantDevice {
            service_time,
            depth: depth.max(1),
            capacity_bytes,
            rotational: false,
            serving: VecDeque::new(),
            waiting: VecDeque::new(),
        }
    }

    /// Makes it report itself as rotational (for schedulers that care).
    pub fn rotational(mut self, rotational: bool) -> Self {
        self.rotational = rotational;
        self
    }
}

impl Device for ConstantDevice {
    fn name(&self) -> &str {
        "constant"
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo { rotational: self.rotational, queue_depth: self.depth }
    }

    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    fn can_accept(&self) -> bool {
        self.serving.len() + self.waiting.len() < self.depth as usize
    }

    fn in_flight(&self) -> usize {
        self.serving.len() + self.waiting.len()
    }

    fn submit(&mut self, request: Request, now: Nanos) {
        if self.serving.len() < self.depth as usize {
            self.serving.push_back(Completion { request, time: now + self.service_time });
        } else {
            self.waiting.push_back(request);
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        self.serving.front().map(|c| c.time)
    }

    fn advance(&mut self, now: Nanos, completed: &mut Vec<Completion>) {
        while let Some(first) = self.serving.front().copied() {
            if first.time > now {
                break;
            }
            self.serving.pop_front();
            completed.push(first);
            if let Some(next) = self.waiting.pop_front() {
                self.serving.push_back(Completion { request: next, time: first.time + self.service_time });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_sched::{Op, QueueId, RequestId};

    fn req(id: u64) -> Request {
        Request {
            id: RequestId(id),
            queue: QueueId(0),
            op: Op::Read,
            offset: 0,
            len: 4096,
            sync: true,
            meta: false,
        }
    }

    #[test]
    fn commands_complete_after_the_service_time_depth_at_a_time() {
        let mut d = ConstantDevice::new(100, 2, 1 << 30);
        d.submit(req(1), 0);
        d.submit(req(2), 0);
        assert!(!d.can_accept());
        d.submit(req(3), 0);
        let mut done = Vec::new();
        d.advance(100, &mut done);
        assert_eq!(
            done.iter().map(|c| (c.request.id.0, c.time)).collect::<Vec<_>>(),
            vec![(1, 100), (2, 100)]
        );
        assert_eq!(d.next_event(), Some(200));
        d.advance(250, &mut done);
        assert_eq!(done.len(), 3);
        assert_eq!(d.next_event(), None);
    }
}
