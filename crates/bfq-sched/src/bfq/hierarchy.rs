//! Groups: B-WF2Q+ over a tree of groups and queues, of any depth (seed 003 sec. V: BFQ schedules
//! groups with B-WF2Q+ as it schedules queues; kernel-bfq-reference.md, cgroups support).
//!
//! Every group holds one [`Wf2q`] over its children, which are queues or groups. A group is an entity
//! in its parent's B-WF2Q+ with the group's weight and class, so that each level divides the service
//! its group receives among the children by their weights: two exports of weights 1 and 3 get 1:3 of
//! the device however many connections each has, and each export's connections share its part.
//!
//! The path of service, as in the kernel's hierarchical BFQ:
//! - *selection* walks down from the root, each level choosing by B-WF2Q+ among its children, to a
//!   queue; every entity on the way is in service;
//! - *service* is charged at every level of that path (each level's virtual time advances by the
//!   service over its own weight sum), and summed per group for its turn;
//! - at the queue's *expiry* every group of the path expires in its parent with the service of its
//!   turn, and is requeued if it still has backlogged children, with the budget of the child it
//!   would serve next (the kernel's group budget is its next child's), else goes idle;
//! - a queue that becomes backlogged activates the groups above it that were not backlogged.
//!
//! Children have slots local to their group. Queues start in the root group, in the order they are
//! created, so that without groups every local slot is the queue's own slot and the scheduler behaves
//! exactly as the flat B-WF2Q+ of the papers (the suite's results do not move).

use std::collections::HashMap;

use super::wf2q::{Entity, EntityState, ServiceTree, Wf2q, VTIME_SHIFT};
use crate::types::Instant;
use crate::types::Nanos;

/// The root group's index.
pub const ROOT: u32 = 0;

/// A whole share in [`Hierarchy::path_share`]'s units.
pub const SHARE_ONE: u64 = 1 << 32;

/// What a local slot of a group holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Child {
    /// Nothing (a queue moved away; the slot is reused).
    Free,
    /// A queue, by its scheduler slot.
    Queue(u32),
    /// A group, by its index.
    Group(u32),
}

/// One group.
#[derive(Debug, Default)]
struct Group {
    /// B-WF2Q+ over the children.
    wf2q: Wf2q,
    /// Local slot → child.
    children: Vec<Child>,
    /// Local slots to reuse.
    free: Vec<u32>,
    /// The parent's index and this group's local slot in it (`None` for the root).
    parent: Option<(u32, u32)>,
    /// Weight and class among its siblings.
    weight: u64,
    class: usize,
    /// Service charged through this group since it was selected in its parent.
    turn_service: u64,
}

impl Group {
    /// Whether any child is waiting or in service.
    fn backlogged(&self) -> bool {
        self.wf2q.active_count() > 0 || self.wf2q.in_service.is_some()
    }
}

/// Why a group call was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// No such group.
    Unknown(u32),
    /// The new parent is the group itself or one of its descendants.
    Cycle,
    /// The group has backlogged children, so it cannot change parents now.
    Busy,
}

/// The idle class's index (RT 0, BE 1, IDLE 2).
const IDLE_CLASS: usize = 2;

/// The tree of groups and the place of every queue in it.
#[derive(Debug)]
pub struct Hierarchy {
    /// Index 0 is the root.
    groups: Vec<Group>,
    /// Queue slot → (group, local slot).
    place: Vec<(u32, u32)>,
    /// Queues waiting to move to another group once they are no longer backlogged.
    moves: HashMap<u32, u32>,
    /// [`Wf2q::keep_idle_while_serving`], for every group's B-WF2Q+.
    keep_idle_while_serving: bool,
}

impl Default for Hierarchy {
    fn default() -> Self {
        Hierarchy {
            groups: vec![Group { weight: 100, class: 1, ..Group::default() }],
            place: Vec::new(),
            moves: HashMap::new(),
            keep_idle_while_serving: false,
        }
    }
}

impl Hierarchy {
    /// Whether queue `slot` and every group above it, where active, are filed in their trees
    /// ([`Wf2q::filed`]): for consistency checks only.
    pub fn filed(&self, slot: u32) -> bool {
        let (mut g, mut l) = self.place[slot as usize];
        loop {
            let w = &self.groups[g as usize].wf2q;
            if !w.filed(l) {
                return false;
            }
            match self.groups[g as usize].parent {
                Some((parent, local)) => {
                    g = parent;
                    l = local;
                }
                None => return true,
            }
        }
    }

    /// Makes sure queue slot `slot` exists; new queues go to the root group.
    pub fn ensure_slot(&mut self, slot: usize) {
        while self.place.len() <= slot {
            let queue = self.place.len() as u32;
            let local = self.alloc(ROOT, Child::Queue(queue));
            self.place.push((ROOT, local));
        }
    }

    fn alloc(&mut self, group: u32, child: Child) -> u32 {
        let g = &mut self.groups[group as usize];
        let local = match g.free.pop() {
            Some(l) => {
                g.children[l as usize] = child;
                l
            }
            None => {
                g.children.push(child);
                (g.children.len() - 1) as u32
            }
        };
        g.wf2q.ensure_slot(local as usize);
        g.wf2q.entities[local as usize] =
            Entity { group: matches!(child, Child::Group(_)), ..Entity::default() };
        local
    }

    /// A queue's B-WF2Q+ entity (in its group's tree).
    pub fn entity(&self, slot: u32) -> &Entity {
        let (g, l) = self.place[slot as usize];
        &self.groups[g as usize].wf2q.entities[l as usize]
    }

    /// Whether two queues are children of the same group (their weights compare directly).
    pub fn same_group(&self, a: u32, b: u32) -> bool {
        self.place[a as usize].0 == self.place[b as usize].0
    }

    /// Where the paths of queues `c` and `s` meet: the entities that lead to each among the children of
    /// their lowest common group (the queues themselves when they are siblings, else the groups above
    /// them, or one queue and the other's group), with the service charged through `s`'s entity in its
    /// current turn when that entity is a group (`None` when it is `s` itself: the caller knows the
    /// queue's own). Their weights and timestamps compare directly there. `None` for `c == s`.
    pub fn meeting(&self, c: u32, s: u32) -> Option<(&Entity, &Entity, Option<u64>)> {
        // Without allocating (it runs per injection decision, and the engine's steady state makes no
        // heap allocation): for each group above `c`, from the lowest, look for it above `s`.
        let (mut g, mut l) = self.place[c as usize];
        loop {
            let (mut gs, mut ls) = self.place[s as usize];
            let below = loop {
                if gs == g {
                    break Some(ls);
                }
                match self.groups[gs as usize].parent {
                    Some((p, local)) => (gs, ls) = (p, local),
                    None => break None,
                }
            };
            if let Some(ls) = below {
                if ls == l {
                    return None;
                }
                let w = &self.groups[g as usize].wf2q;
                let turn = match self.groups[g as usize].children[ls as usize] {
                    Child::Group(h) => Some(self.groups[h as usize].turn_service),
                    _ => None,
                };
                return Some((&w.entities[l as usize], &w.entities[ls as usize], turn));
            }
            (g, l) = self.groups[g as usize].parent?;
        }
    }

    /// Whether queue `c`, or a group above it below where its path meets `s`'s ([`Self::meeting`]),
    /// is more than `slack` of service (at its weight) ahead of V in its group's tree while a sibling
    /// there has work: ahead of the others inside its own group. The comparison at the meeting point
    /// says nothing of that: a deep reader and a database's shallow processes in one tenant's group,
    /// injected into another tenant's turns, are one group there, and the reader, which alone always
    /// had a request queued, took the tenant's whole part (2.3 times its share in the simulator).
    pub fn ahead_below_meeting(&self, c: u32, s: u32, slack: u64) -> bool {
        let (mut g, mut l) = self.place[c as usize];
        loop {
            // Stop at the group that is also above `s`: the meeting point.
            let mut gs = self.place[s as usize].0;
            let shared = loop {
                if gs == g {
                    break true;
                }
                match self.groups[gs as usize].parent {
                    Some((p, _)) => gs = p,
                    None => break false,
                }
            };
            if shared {
                return false;
            }
            let w = &self.groups[g as usize].wf2q;
            let e = &w.entities[l as usize];
            let tree = &w.trees[e.class];
            let others = tree.active > usize::from(e.state == EntityState::Active)
                || w.in_service.is_some_and(|i| i != l);
            if others && e.state == EntityState::Active {
                let ahead_by = super::wf2q::vtime_delta(slack, e.weight);
                if e.start > tree.vtime.saturating_add(ahead_by) {
                    return true;
                }
            }
            match self.groups[g as usize].parent {
                Some((p, local)) => (g, l) = (p, local),
                None => return false,
            }
        }
    }

    /// The service tree a queue competes in (its group's, of its class).
    pub fn tree_of(&self, slot: u32) -> &ServiceTree {
        let (g, l) = self.place[slot as usize];
        let w = &self.groups[g as usize].wf2q;
        &w.trees[w.entities[l as usize].class]
    }

    /// The queue's part of the service of its class at the root, in units of [`SHARE_ONE`]: the
    /// product of weight over weight sum at every level of its path (each level of B-WF2Q+ divides
    /// what its group receives by its children's weights, seed 003 sec. V). `weight` is the queue's
    /// weight in force. A queue alone in a group of weight 1 beside a group of weight 3 is owed a
    /// quarter, not all: its own tree's weight sum alone would say all.
    pub fn path_share(&self, slot: u32, weight: u64) -> u64 {
        let mut share = scale(u128::from(SHARE_ONE), weight, self.tree_of(slot).wsum);
        let mut g = self.place[slot as usize].0;
        while let Some((parent, local)) = self.groups[g as usize].parent {
            let w = &self.groups[parent as usize].wf2q;
            let e = &w.entities[local as usize];
            share = scale(share, e.weight, w.trees[e.class].wsum);
            g = parent;
        }
        u64::try_from(share.min(u128::from(SHARE_ONE))).unwrap_or(SHARE_ONE)
    }

    /// The root's tree of class `class` (tests and tracing).
    pub fn root_tree(&self, class: usize) -> &ServiceTree {
        &self.groups[ROOT as usize].wf2q.trees[class]
    }

    /// Creates group `index` (the next index) under `parent`, or changes an existing one's parent,
    /// weight and class. A new parent applies at once if the group has no backlogged child, and is
    /// refused otherwise; a new weight or class applies at once to a group waiting in its parent, and
    /// at its expiry to a group in service (a few milliseconds away).
    pub fn configure_group(
        &mut self,
        index: u32,
        parent: u32,
        weight: u64,
        class: usize,
    ) -> Result<(), GroupError> {
        if parent as usize >= self.groups.len() {
            return Err(GroupError::Unknown(parent));
        }
        let weight = weight.max(1);
        if index as usize == self.groups.len() {
            self.groups.push(Group { weight, class, ..Group::default() });
            self.groups[index as usize].wf2q.keep_idle_while_serving = self.keep_idle_while_serving;
            let local = self.alloc(parent, Child::Group(index));
            self.groups[index as usize].parent = Some((parent, local));
            return Ok(());
        }
        if index == ROOT || index as usize > self.groups.len() {
            return Err(GroupError::Unknown(index));
        }
        // The new parent must not be this group or below it.
        let mut up = Some(parent);
        while let Some(p) = up {
            if p == index {
                return Err(GroupError::Cycle);
            }
            up = self.groups[p as usize].parent.map(|(pp, _)| pp);
        }
        let (old_parent, local) = self.groups[index as usize].parent.expect("a non-root group has a parent");
        if old_parent != parent {
            if self.groups[index as usize].backlogged() {
                return Err(GroupError::Busy);
            }
            self.groups[old_parent as usize].wf2q.remove(local);
            self.release(old_parent, local);
            let local = self.alloc(parent, Child::Group(index));
            self.groups[index as usize].parent = Some((parent, local));
        }
        let g = &mut self.groups[index as usize];
        g.weight = weight;
        g.class = class;
        // A group waiting in its parent takes them now. Otherwise they applied only at its next
        // requeue, and a group served only out of turn (a tenant injected into another's slots) is
        // never requeued: after `bfq serve` reloaded export weights 1:1 to 1:3, the shares stayed 1:1
        // until that group happened to be selected, 0.4 s and more later (`crates/bfq-cli/tests/serve.rs`).
        let (parent, local) = g.parent.expect("a non-root group has a parent");
        let e = &self.groups[parent as usize].wf2q.entities[local as usize];
        if e.state == EntityState::Active {
            if e.class == class {
                self.groups[parent as usize].wf2q.reweight_waiting(local, weight);
            } else {
                // A class change moves it to the new class's tree, from its V.
                let left = (u128::from(e.finish - e.start) * u128::from(e.weight)) >> VTIME_SHIFT;
                let fallback = u64::try_from(left).unwrap_or(u64::MAX);
                let budget = self.next_budget(index, fallback);
                self.groups[parent as usize].wf2q.activate(local, class, weight, budget, None);
            }
        }
        Ok(())
    }

    fn release(&mut self, group: u32, local: u32) {
        let g = &mut self.groups[group as usize];
        g.children[local as usize] = Child::Free;
        g.free.push(local);
        self.settle(group);
    }

    /// The group a queue is in.
    pub fn group_of(&self, slot: u32) -> u32 {
        self.place[slot as usize].0
    }

    /// Whether a group above queue `slot` is of the idle class (seed 003 sec. V: classes apply at
    /// every level, a group's as a queue's).
    pub fn under_idle_group(&self, slot: u32) -> bool {
        let (mut g, _) = self.place[slot as usize];
        while let Some((parent, _)) = self.groups[g as usize].parent {
            if self.groups[g as usize].class == IDLE_CLASS {
                return true;
            }
            g = parent;
        }
        false
    }

    /// Whether a group of the idle class above queue `slot` has a sibling of a higher class with
    /// work: then the queue yields the device after each request, as an idle-class queue does
    /// beside queues of the other classes.
    pub fn idle_group_outranked(&self, slot: u32) -> bool {
        let (mut g, _) = self.place[slot as usize];
        while let Some((parent, _)) = self.groups[g as usize].parent {
            if self.groups[g as usize].class == IDLE_CLASS {
                let p = &self.groups[parent as usize].wf2q;
                if p.class_busy(0) || p.class_busy(1) {
                    return true;
                }
            }
            g = parent;
        }
        false
    }

    /// Moves a queue to `group`: now if it is not backlogged, else once it is no longer.
    pub fn set_queue_group(&mut self, slot: u32, group: u32) -> Result<(), GroupError> {
        if group as usize >= self.groups.len() {
            return Err(GroupError::Unknown(group));
        }
        self.moves.remove(&slot);
        if self.group_of(slot) == group {
            return Ok(());
        }
        match self.entity(slot).state {
            EntityState::Active | EntityState::InService => {
                self.moves.insert(slot, group);
            }
            EntityState::Idle | EntityState::Forgotten => self.move_now(slot, group),
        }
        Ok(())
    }

    fn move_now(&mut self, slot: u32, group: u32) {
        let (g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.remove(l);
        self.release(g, l);
        let local = self.alloc(group, Child::Queue(slot));
        self.place[slot as usize] = (group, local);
    }

    fn apply_move(&mut self, slot: u32) {
        if self.moves.is_empty() {
            return;
        }
        if let Some(group) = self.moves.remove(&slot) {
            self.move_now(slot, group);
        }
    }

    /// A group whose children are all idle leaves its parent's active set (when it is waiting there;
    /// an in-service group is expired with its queue), and so on up.
    fn settle(&mut self, mut group: u32) {
        while let Some((parent, local)) = self.groups[group as usize].parent {
            if self.groups[group as usize].backlogged() {
                return;
            }
            let p = &mut self.groups[parent as usize].wf2q;
            if p.entities[local as usize].state != EntityState::Active {
                return;
            }
            p.deactivate(local);
            group = parent;
        }
    }

    /// The budget a group is queued with: that of the child it would serve next (its F - S times its
    /// weight), or `fallback`.
    fn next_budget(&mut self, group: u32, fallback: u64) -> u64 {
        let w = &mut self.groups[group as usize].wf2q;
        match w.peek_out_of_turn(2, |_| true) {
            Some(l) => {
                let e = &w.entities[l as usize];
                let budget = (u128::from(e.finish - e.start) * u128::from(e.weight)) >> VTIME_SHIFT;
                u64::try_from(budget).unwrap_or(u64::MAX).max(1)
            }
            None => fallback.max(1),
        }
    }

    /// Removes a queue from wherever it is (see [`Wf2q::remove`]).
    pub fn remove(&mut self, slot: u32) {
        let (g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.remove(l);
        self.apply_move(slot);
        self.settle(g);
    }

    /// Sets [`Wf2q::keep_idle_while_serving`] at every level, now and for groups made later.
    pub fn set_keep_idle_while_serving(&mut self, on: bool) {
        self.keep_idle_while_serving = on;
        for g in &mut self.groups {
            g.wf2q.keep_idle_while_serving = on;
        }
    }

    /// A queue becomes backlogged (see [`Wf2q::activate`]); so do the groups above it that were not.
    pub fn activate(&mut self, slot: u32, class: usize, weight: u64, budget: u64, backshift: Option<u64>) {
        let (mut g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.activate(l, class, weight, budget, backshift);
        while let Some((parent, local)) = self.groups[g as usize].parent {
            let (gw, gc) = (self.groups[g as usize].weight, self.groups[g as usize].class);
            let p = &mut self.groups[parent as usize].wf2q;
            if matches!(p.entities[local as usize].state, EntityState::Active | EntityState::InService) {
                return;
            }
            p.activate(local, gc, gw, budget, None);
            g = parent;
        }
    }

    /// Chooses the next queue: B-WF2Q+ at each level from the root down.
    pub fn select(&mut self, now: Instant, idle_class_guard: Nanos) -> Option<u32> {
        // Each retry expires one group that was chosen with nothing below it, so this ends.
        for _ in 0..=self.groups.len() {
            let mut g = ROOT;
            loop {
                match self.groups[g as usize].wf2q.select(now, idle_class_guard) {
                    Some(l) => match self.groups[g as usize].children[l as usize] {
                        Child::Queue(s) => return Some(s),
                        Child::Group(h) => g = h,
                        Child::Free => return None,
                    },
                    None if g == ROOT => return None,
                    None => {
                        self.expire_group(g);
                        break;
                    }
                }
            }
        }
        None
    }

    /// The in-service queue consumed `charge` sectors: charged at every level of its path.
    pub fn served(&mut self, slot: u32, charge: u64) {
        let (mut g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.served(l, charge);
        while let Some((parent, local)) = self.groups[g as usize].parent {
            self.groups[g as usize].turn_service += charge;
            self.groups[parent as usize].wf2q.served(local, charge);
            g = parent;
        }
    }

    /// The in-service queue's service ends (see [`Wf2q::expire`]); every group of its path expires in
    /// its parent with the service of its turn.
    pub fn expire(&mut self, slot: u32, charged: u64, next: Option<(u64, u64)>) {
        let (g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.expire(l, charged, next);
        if next.is_none() {
            self.apply_move(slot);
        }
        let mut g = g;
        while let Some((parent, _)) = self.groups[g as usize].parent {
            if !self.expire_group(g) {
                return;
            }
            g = parent;
        }
    }

    /// Expires an in-service group in its parent: requeued with its next child's budget if it has
    /// backlogged children, else idle. False if it was not in service.
    fn expire_group(&mut self, g: u32) -> bool {
        let Some((parent, local)) = self.groups[g as usize].parent else { return false };
        if self.groups[parent as usize].wf2q.entities[local as usize].state != EntityState::InService {
            return false;
        }
        let charged = std::mem::take(&mut self.groups[g as usize].turn_service);
        let next = if self.groups[g as usize].backlogged() {
            let weight = self.groups[g as usize].weight;
            Some((weight, self.next_budget(g, charged)))
        } else {
            None
        };
        let class = self.groups[g as usize].class;
        let p = &mut self.groups[parent as usize].wf2q;
        match next {
            // A class change applies at requeueing: leave, then enter the new class's tree.
            Some((weight, budget)) if p.entities[local as usize].class != class => {
                p.expire(local, charged, None);
                p.activate(local, class, weight, budget, None);
            }
            _ => p.expire(local, charged, next),
        }
        true
    }

    /// The queue injection would serve next (see [`Wf2q::peek_out_of_turn`]): among the siblings of
    /// the in-service queue first, then among its group's siblings, and so on up to the root.
    pub fn peek_out_of_turn(&mut self, max_class: usize, accept: impl Fn(u32) -> bool) -> Option<u32> {
        let start = self.in_service_queue().map_or(ROOT, |s| self.group_of(s));
        let mut g = Some(start);
        while let Some(group) = g {
            if let Some(s) = self.peek_in(group, max_class, &accept) {
                return Some(s);
            }
            g = self.groups[group as usize].parent.map(|(p, _)| p);
        }
        None
    }

    fn peek_in(&mut self, group: u32, max_class: usize, accept: &dyn Fn(u32) -> bool) -> Option<u32> {
        // This group's tree is searched while the filter looks at the other groups: split borrows.
        let at = group as usize;
        let (before, rest) = self.groups.split_at_mut(at);
        let (this, after) = rest.split_first_mut()?;
        let busy = |h: u32| {
            let h = h as usize;
            let g = if h < at { &before[h] } else { &after[h - at - 1] };
            g.wf2q.active_count() > 0
        };
        let children = &this.children;
        let found = this.wf2q.peek_out_of_turn(max_class, |l| match children[l as usize] {
            Child::Queue(s) => accept(s),
            Child::Group(h) => busy(h),
            Child::Free => false,
        });
        match self.groups[at].children[found? as usize] {
            Child::Queue(s) => Some(s),
            Child::Group(h) => self.peek_in(h, max_class, accept),
            Child::Free => None,
        }
    }

    /// Whether a waiting queue is B-WF2Q+-eligible at every level (`bypass`): its entity and each
    /// waiting group above it have S <= V in their trees; a group in service is eligible by being
    /// served. B-WF2Q+ serves only eligible entities (seed 000 sec. 3.1), which is what bounds the
    /// service any entity can get ahead of its weight's share.
    pub fn eligible(&self, slot: u32) -> bool {
        self.eligible_within(slot, 0)
    }

    /// As [`Self::eligible`], with each level allowed to be up to `slack` sectors of service ahead
    /// (S <= V + slack / weight): with `slack` = B_max, the lag B-WF2Q+ itself allows an entity
    /// (`injection`'s bound on a waker served without the inject limit).
    pub fn eligible_within(&self, slot: u32, slack: u64) -> bool {
        let (mut g, mut l) = self.place[slot as usize];
        loop {
            let w = &self.groups[g as usize].wf2q;
            let e = &w.entities[l as usize];
            let ahead_by = super::wf2q::vtime_delta(slack, e.weight);
            match e.state {
                EntityState::InService => return true,
                EntityState::Active if e.start <= w.trees[e.class].vtime.saturating_add(ahead_by) => {}
                _ => return false,
            }
            match self.groups[g as usize].parent {
                Some((p, local)) => (g, l) = (p, local),
                None => return true,
            }
        }
    }

    /// The queue in service, if any (the end of the in-service path).
    pub fn in_service_queue(&self) -> Option<u32> {
        let mut g = ROOT;
        loop {
            let l = self.groups[g as usize].wf2q.in_service?;
            match self.groups[g as usize].children[l as usize] {
                Child::Queue(s) => return Some(s),
                Child::Group(h) => g = h,
                Child::Free => return None,
            }
        }
    }

    /// A waiting queue's weight changes before it is served out of its turn
    /// ([`Wf2q::reweight_waiting`]).
    pub fn reweight_waiting(&mut self, slot: u32, weight: u64) {
        let (g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.reweight_waiting(l, weight);
    }

    /// A waiting queue's lead is forgiven ([`Wf2q::forgive_lead`]), and so is that of each group
    /// above it that is waiting too (its lead came from the same service). Returns whether the
    /// queue's own start time moved.
    pub fn forgive_lead(&mut self, slot: u32) -> bool {
        let (mut g, l) = self.place[slot as usize];
        let moved = self.groups[g as usize].wf2q.forgive_lead(l);
        while let Some((parent, local)) = self.groups[g as usize].parent {
            if self.groups[parent as usize].wf2q.entities[local as usize].state != EntityState::Active {
                break;
            }
            self.groups[parent as usize].wf2q.forgive_lead(local);
            g = parent;
        }
        moved
    }

    /// A waiting queue's budget shrank ([`Wf2q::rebudget_waiting`]; the queue's level only: a group's
    /// finish time follows the child it is next served for, when it is next queued).
    pub fn rebudget_waiting(&mut self, slot: u32, budget: u64) -> bool {
        let (g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.rebudget_waiting(l, budget)
    }

    /// A waiting queue was served out of its turn (see [`Wf2q::served_out_of_turn`]); the groups above
    /// it are charged too: out of turn where they are waiting, as service of their turn where they are
    /// in service.
    pub fn served_out_of_turn(&mut self, slot: u32, charge: u64, budget: u64) {
        let (mut g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.served_out_of_turn(l, charge, budget);
        while let Some((parent, local)) = self.groups[g as usize].parent {
            match self.groups[parent as usize].wf2q.entities[local as usize].state {
                EntityState::Active => {
                    let group_budget = self.next_budget(g, budget);
                    self.groups[parent as usize].wf2q.served_out_of_turn(local, charge, group_budget);
                }
                EntityState::InService => {
                    self.groups[g as usize].turn_service += charge;
                    self.groups[parent as usize].wf2q.served(local, charge);
                }
                EntityState::Idle | EntityState::Forgotten => return,
            }
            g = parent;
        }
    }

    /// A waiting queue has no more requests (see [`Wf2q::deactivate`]); groups left with nothing
    /// backlogged leave their parents' active sets.
    pub fn deactivate(&mut self, slot: u32) {
        let (g, l) = self.place[slot as usize];
        self.groups[g as usize].wf2q.deactivate(l);
        self.apply_move(slot);
        self.settle(g);
    }

    /// Whether any entity of class `class` is backlogged, in any group.
    pub fn class_busy(&self, class: usize) -> bool {
        self.groups.iter().any(|g| g.wf2q.class_busy(class))
    }

    /// Number of groups other than the root with backlogged queues.
    pub fn busy_groups(&self) -> usize {
        self.groups.iter().skip(1).filter(|g| g.backlogged()).count()
    }
}

/// `value * weight / sum` (a `sum` of 0 counts as 1), in 64 bits when the product fits (the usual
/// case: a 128-bit division is a library call, and this runs at completions), else in 128.
fn scale(value: u128, weight: u64, sum: u64) -> u128 {
    let sum = sum.max(1);
    match u64::try_from(value).ok().and_then(|v| v.checked_mul(weight)) {
        Some(product) => u128::from(product / sum),
        None => value * u128::from(weight) / u128::from(sum),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The share along a path (seed 003 sec. V: weight over weight sum at each level) is the same
        /// whether a level is computed in 64 or 128 bits.
        #[test]
        fn a_level_of_the_path_share_is_exact_in_64_and_128_bits(
            value in 0u128..=(1u128 << 70),
            weight in proptest::prelude::any::<u64>(),
            sum in proptest::prelude::any::<u64>(),
        ) {
            let wide = value.checked_mul(u128::from(weight)).map(|p| p / u128::from(sum.max(1)));
            if let Some(expected) = wide {
                proptest::prop_assert_eq!(scale(value, weight, sum), expected);
            }
        }
    }

    const GUARD: Nanos = 200_000_000;
    const BUDGET: u64 = 1000;

    /// Serves `rounds` slots of `BUDGET` sectors, each backlogged queue staying backlogged, and returns
    /// the service of each queue.
    fn serve(h: &mut Hierarchy, queues: &[(u32, u64)], rounds: usize) -> Vec<u64> {
        for &(q, w) in queues {
            h.activate(q, 1, w, BUDGET, None);
        }
        let mut got = vec![0; queues.len()];
        for _ in 0..rounds {
            let s = h.select(Instant::ZERO, GUARD).expect("something is backlogged");
            h.served(s, BUDGET);
            let w = queues.iter().find(|(q, _)| *q == s).map(|(_, w)| *w).unwrap();
            h.expire(s, BUDGET, Some((w, BUDGET)));
            got[queues.iter().position(|(q, _)| *q == s).unwrap()] += BUDGET;
        }
        got
    }

    /// Queue 0 alone in tenant group 1, in service; queues 1 and 2 waiting in tenant group 2; every
    /// weight 100.
    fn two_tenants_first_in_service() -> Hierarchy {
        let mut h = Hierarchy::default();
        h.ensure_slot(2);
        h.configure_group(1, ROOT, 100, 1).unwrap();
        h.configure_group(2, ROOT, 100, 1).unwrap();
        h.set_queue_group(0, 1).unwrap();
        h.set_queue_group(1, 2).unwrap();
        h.set_queue_group(2, 2).unwrap();
        for q in 0..3 {
            h.activate(q, 1, 100, BUDGET, None);
        }
        assert_eq!(h.select(Instant::ZERO, GUARD), Some(0));
        h
    }

    #[test]
    fn a_queue_ahead_of_its_siblings_inside_its_group_is_seen_below_where_its_path_meets_anothers() {
        // Seed 003 sec. V: injection compares two tenants where their paths meet (`meeting`); a queue
        // served out of turn far beyond its siblings in its own group is ahead there, which that
        // comparison cannot see. Queue 0 is alone in tenant group 1 and in service; queues 1 and 2
        // share tenant group 2.
        let mut h = two_tenants_first_in_service();
        assert!(!h.ahead_below_meeting(1, 0, BUDGET), "nobody has been served yet");
        // Queue 1 takes ten budgets out of queue 0's turn: ahead of queue 2 inside group 2.
        h.served_out_of_turn(1, 10 * BUDGET, BUDGET);
        assert!(h.ahead_below_meeting(1, 0, BUDGET));
        assert!(!h.ahead_below_meeting(2, 0, BUDGET), "its sibling is not ahead");
        // Siblings meet in their own group: the comparison there is `meeting`'s.
        assert!(!h.ahead_below_meeting(1, 2, BUDGET));
        // Alone in its group (its sibling gone), V follows it: not ahead of anyone there.
        h.deactivate(2);
        assert!(!h.ahead_below_meeting(1, 0, BUDGET));
    }

    #[test]
    fn a_forgiven_lead_is_forgiven_in_the_waiting_groups_above_the_queue_too() {
        // `max_lead_wait` (docs/fast-devices.md, "Debt from injection"): service out of turn moves the
        // queue and every waiting group above it past their trees' virtual times; forgiving the
        // queue's lead brings each of them back, or the group would still wait out the same debt.
        let mut h = two_tenants_first_in_service();
        h.served_out_of_turn(1, 40 * BUDGET, BUDGET);
        let (parent, local) = h.groups[2].parent.unwrap();
        let group = |h: &Hierarchy| {
            let w = &h.groups[parent as usize].wf2q;
            (w.entities[local as usize].start, w.trees[1].vtime)
        };
        let queue = |h: &Hierarchy| (h.entity(1).start, h.groups[2].wf2q.trees[1].vtime);
        assert!(queue(&h).0 > queue(&h).1 && group(&h).0 > group(&h).1, "both ahead after the injection");
        assert!(h.forgive_lead(1));
        assert_eq!(queue(&h).0, queue(&h).1, "the queue starts at its group's virtual time");
        assert_eq!(group(&h).0, group(&h).1, "its group starts at the root's");
        assert!(!h.forgive_lead(2), "its sibling was never ahead");
    }

    #[test]
    fn without_groups_every_queue_keeps_its_own_slot_in_the_root() {
        let mut h = Hierarchy::default();
        h.ensure_slot(9);
        for s in 0..10 {
            assert_eq!(h.place[s], (ROOT, s as u32));
        }
        assert_eq!(h.groups.len(), 1, "the root only");
    }

    #[test]
    fn two_groups_share_by_group_weight_whatever_their_number_of_queues() {
        // Seed 003 sec. V: groups are scheduled by B-WF2Q+ as queues are. Group 1 (weight 100) has one
        // queue, group 2 (weight 300) has three: the groups get 1:3, not 1:9.
        let mut h = Hierarchy::default();
        h.ensure_slot(3);
        h.configure_group(1, ROOT, 100, 1).unwrap();
        h.configure_group(2, ROOT, 300, 1).unwrap();
        h.set_queue_group(0, 1).unwrap();
        for q in 1..4 {
            h.set_queue_group(q, 2).unwrap();
        }
        let got = serve(&mut h, &[(0, 100), (1, 100), (2, 100), (3, 100)], 400);
        let group2: u64 = got[1..].iter().sum();
        let ratio = group2 as f64 / got[0] as f64;
        assert!((ratio - 3.0).abs() < 0.1, "group shares {:?} ratio {ratio}", got);
        // Inside group 2 the three equal queues share equally.
        assert!(
            got[1..].iter().all(|&g| (g as f64 - group2 as f64 / 3.0).abs() <= 2.0 * BUDGET as f64),
            "{got:?}"
        );
    }

    /// Root: A (100) and B (100); A holds queue 0 and group C (300); C holds queues 1 and 2; B holds
    /// queue 3. With equal queue weights each queue is owed: B's 1/2; A's half split 1:3 between
    /// queue 0 and C; C's part 1:1.
    fn nested_tree() -> Hierarchy {
        let mut h = Hierarchy::default();
        h.ensure_slot(3);
        h.configure_group(1, ROOT, 100, 1).unwrap(); // A
        h.configure_group(2, ROOT, 100, 1).unwrap(); // B
        h.configure_group(3, 1, 300, 1).unwrap(); // C in A
        for (q, g) in [(0, 1), (1, 3), (2, 3), (3, 2)] {
            h.set_queue_group(q, g).unwrap();
        }
        h
    }

    #[test]
    fn nested_groups_divide_each_level_by_its_own_weights() {
        let mut h = nested_tree();
        let got = serve(&mut h, &[(0, 100), (1, 100), (2, 100), (3, 100)], 800);
        let total = got.iter().sum::<u64>() as f64;
        let share: Vec<f64> = got.iter().map(|&g| g as f64 / total).collect();
        let expected = [0.125, 0.1875, 0.1875, 0.5];
        for (s, e) in share.iter().zip(expected) {
            assert!((s - e).abs() < 0.02, "shares {share:?}, expected {expected:?}");
        }
    }

    #[test]
    fn a_queues_share_of_the_device_is_the_product_of_its_weights_along_its_path() {
        // `nested_tree`: what a queue is owed at the root is weight / weight sum at each level
        // of its path (seed 003 sec. V), not its part of its own group alone (queue 3, alone in B, is
        // owed a half, not all). The inject limit's "has its share" rule uses it (`injection.rs`).
        let mut h = nested_tree();
        for q in 0..4 {
            h.activate(q, 1, 100, BUDGET, None);
        }
        let got: Vec<f64> = (0..4).map(|q| h.path_share(q, 100) as f64 / SHARE_ONE as f64).collect();
        let expected = [0.125, 0.1875, 0.1875, 0.5];
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() < 1e-6, "shares {got:?}, expected {expected:?}");
        }
        // Without groups a queue's share is its weight over the root's weight sum.
        let mut flat = Hierarchy::default();
        flat.ensure_slot(1);
        flat.activate(0, 1, 100, BUDGET, None);
        flat.activate(1, 1, 300, BUDGET, None);
        assert_eq!(flat.path_share(0, 100), SHARE_ONE / 4);
    }

    /// Groups 1 and 2 (weight 100 each) under the root, queue 0 in group 1 and queue 1 in group 2,
    /// both backlogged.
    fn two_groups_of_one_backlogged_queue() -> Hierarchy {
        let mut h = Hierarchy::default();
        h.ensure_slot(1);
        h.configure_group(1, ROOT, 100, 1).unwrap();
        h.configure_group(2, ROOT, 100, 1).unwrap();
        h.set_queue_group(0, 1).unwrap();
        h.set_queue_group(1, 2).unwrap();
        h.activate(0, 1, 100, BUDGET, None);
        h.activate(1, 1, 100, BUDGET, None);
        h
    }

    #[test]
    fn a_group_that_empties_stops_competing_and_its_sibling_gets_everything() {
        let mut h = two_groups_of_one_backlogged_queue();
        // Queue 0 leaves (not backlogged) after its first slot; only queue 1 is selected afterwards.
        let first = h.select(Instant::ZERO, GUARD).unwrap();
        h.served(first, BUDGET);
        h.expire(first, BUDGET, None);
        let mut seen = Vec::new();
        for _ in 0..5 {
            let s = h.select(Instant::ZERO, GUARD).unwrap();
            seen.push(s);
            h.served(s, BUDGET);
            h.expire(s, BUDGET, Some((100, BUDGET)));
        }
        assert!(seen.iter().all(|&s| s != first), "{seen:?} after {first} left");
        assert_eq!(h.busy_groups(), 1);
    }

    #[test]
    fn a_busy_queue_moves_to_its_new_group_only_when_it_goes_idle() {
        let mut h = Hierarchy::default();
        h.ensure_slot(0);
        h.configure_group(1, ROOT, 100, 1).unwrap();
        h.activate(0, 1, 100, BUDGET, None);
        h.set_queue_group(0, 1).unwrap();
        assert_eq!(h.group_of(0), ROOT, "still backlogged where it was charged");
        let s = h.select(Instant::ZERO, GUARD).unwrap();
        h.served(s, BUDGET);
        h.expire(s, BUDGET, None);
        assert_eq!(h.group_of(0), 1);
        h.activate(0, 1, 100, BUDGET, None);
        assert_eq!(h.select(Instant::ZERO, GUARD), Some(0));
        assert_eq!(h.in_service_queue(), Some(0));
    }

    #[test]
    fn group_changes_are_refused_for_unknown_groups_and_cycles() {
        let mut h = Hierarchy::default();
        h.configure_group(1, ROOT, 100, 1).unwrap();
        h.configure_group(2, 1, 100, 1).unwrap();
        assert_eq!(h.configure_group(1, 2, 100, 1), Err(GroupError::Cycle));
        assert_eq!(h.configure_group(1, 1, 100, 1), Err(GroupError::Cycle));
        assert_eq!(h.configure_group(3, 7, 100, 1), Err(GroupError::Unknown(7)));
        assert_eq!(h.set_queue_group(0, 5).map_err(|_| ()), Err(()));
    }

    #[test]
    fn injection_looks_at_the_in_service_queues_siblings_first() {
        let mut h = Hierarchy::default();
        h.ensure_slot(2);
        h.configure_group(1, ROOT, 100, 1).unwrap();
        h.set_queue_group(0, 1).unwrap();
        h.set_queue_group(1, 1).unwrap();
        for q in 0..3 {
            h.activate(q, 1, 100, BUDGET, None);
        }
        let s = h.select(Instant::ZERO, GUARD).unwrap();
        let sibling = h.peek_out_of_turn(2, |q| q != s).unwrap();
        if h.group_of(s) == 1 {
            assert_eq!(h.group_of(sibling), 1, "a sibling in the same group comes first");
        }
        // Charged out of turn, the sibling and its group stay consistent.
        h.served_out_of_turn(sibling, 100, BUDGET);
        h.served(s, BUDGET);
        h.expire(s, BUDGET, Some((100, BUDGET)));
        assert!(h.select(Instant::ZERO, GUARD).is_some());
    }

    fn root(h: &Hierarchy) -> &Wf2q {
        &h.groups[ROOT as usize].wf2q
    }

    #[test]
    fn a_waiting_groups_new_weight_and_class_apply_at_once() {
        // Issue 16 (a reload of `bfq serve`'s export weights): a group that waits in its parent while
        // another is in service takes a new weight at once, not at a requeue that a group served only
        // out of turn never has; a new class moves it to that class's tree. In service, a group keeps
        // its weight until its expiry.
        let mut h = two_groups_of_one_backlogged_queue();
        let s = h.select(Instant::ZERO, GUARD).unwrap();
        let (serving, waiting) = (h.group_of(s), 3 - h.group_of(s));
        let local = |h: &Hierarchy, g: u32| h.groups[g as usize].parent.unwrap().1;
        h.configure_group(waiting, ROOT, 300, 1).unwrap();
        assert_eq!(root(&h).entities[local(&h, waiting) as usize].weight, 300, "the waiting group at once");
        assert_eq!(root(&h).trees[1].wsum, 400);
        h.configure_group(serving, ROOT, 500, 1).unwrap();
        assert_eq!(root(&h).entities[local(&h, serving) as usize].weight, 100, "the one in service: not yet");
        h.served(s, BUDGET);
        h.expire(s, BUDGET, Some((100, BUDGET)));
        assert_eq!(root(&h).entities[local(&h, serving) as usize].weight, 500, "at its expiry");
        assert_eq!(root(&h).trees[1].wsum, 800);
        // A class change of a waiting group: it leaves the best-effort tree for the real-time one.
        let next = h.select(Instant::ZERO, GUARD).unwrap();
        let other = 3 - h.group_of(next);
        h.configure_group(other, ROOT, 300, 0).unwrap();
        let e = &root(&h).entities[local(&h, other) as usize];
        assert_eq!((e.class, e.state), (0, EntityState::Active));
        assert_eq!(root(&h).trees[0].wsum, 300);
        h.served(next, BUDGET);
        let w = root(&h).entities[local(&h, h.group_of(next)) as usize].weight;
        h.expire(next, BUDGET, Some((w, BUDGET)));
        let first = h.select(Instant::ZERO, GUARD).unwrap();
        assert_eq!(h.group_of(first), other, "the real-time group first");
    }
}
