//! The periodic re-read: pub/sub loses what is published while a connection is down, so every
//! `resync_every` (and within 100 ms after a failure) the task subscribes if it must, writes
//! what is pending and reads every shared record again.

use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use super::push::Pushed;
use super::{Answer, Intent, Task, Tracked};
use crate::State;
use crate::registry::registry;

impl Task {
    /// Tracks the registry's breakers the config shares that are not tracked yet.
    pub(super) fn track_registry(&mut self) {
        if self.shared.config.share.is_empty() {
            return;
        }
        for name in registry().names() {
            if !self.tracked.contains_key(&name)
                && self.shared.config.shares(&name)
                && let Some(b) = registry().existing(&name)
            {
                self.track(&name, b.downgrade());
            }
        }
    }

    /// Subscribes if not yet, finds newly created shared registry breakers, writes what is
    /// pending, and re-reads every record. `true` if every store operation succeeded.
    pub(super) async fn tick(&mut self) -> bool {
        let mut asked = Vec::new();
        if self.holding() {
            // Held while the store was unreachable: given back once it answers, before the
            // pending changes are written and the records read.
            let limit = self.shared.config.timeout * 2;
            match tokio::time::timeout(limit, self.store.ping()).await {
                Ok(Ok(_)) => {
                    self.shared.connected.store(true, Ordering::Relaxed);
                    // Every change told so far first: one made by hand during the hold stands,
                    // and is not given back over.
                    while let Ok(more) = self.rx.try_recv() {
                        asked.extend(self.note(more));
                    }
                    self.give_back();
                }
                Ok(Err(e)) => {
                    self.failed(&e.to_string());
                    return false;
                }
                Err(_) => {
                    self.failed("timed out");
                    return false;
                }
            }
        }
        if !self.subscribed {
            let channel = self.channel.clone();
            let limit = self.shared.config.timeout * 2;
            match tokio::time::timeout(limit, self.store.subscribe(channel)).await {
                Ok(Ok(())) => self.subscribed = true,
                Ok(Err(e)) => self.failed(&e.to_string()),
                Err(_) => self.failed("timed out"),
            }
            if !self.subscribed {
                return false;
            }
        }
        self.track_registry();
        if !self.flush().await {
            return false;
        }
        let mut read = self.read_all(&mut asked).await;
        // A resync asked for during a pass came after some records were read (a user who
        // overwrote one and then asked must see it read): it is answered by a whole pass
        // begun after it.
        while read && !asked.is_empty() {
            self.shared.resyncs.fetch_add(1, Ordering::Relaxed);
            let waiting = std::mem::take(&mut asked);
            read = self.read_all(&mut asked).await;
            for done in waiting {
                let _ = done.send(read);
            }
        }
        for done in asked {
            let _ = done.send(read);
        }
        if !read {
            return false;
        }
        self.tracked.retain(|_, t| t.breaker.upgrade().is_some());
        self.owed = false;
        self.shared.resyncs.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Re-reads every tracked record. As in `step`, local changes told while earlier records
    /// were read are written before the next record is read, so an older record never wins
    /// over them; a resync asked for meanwhile goes into `asked`, for the pass after.
    async fn read_all(&mut self, asked: &mut Vec<oneshot::Sender<bool>>) -> bool {
        let names: Vec<String> = self.tracked.keys().cloned().collect();
        for name in names {
            while let Ok(more) = self.rx.try_recv() {
                asked.extend(self.note(more));
            }
            if !self.flush().await || !self.resync_one(&name).await {
                return false;
            }
        }
        true
    }

    async fn resync_one(&mut self, name: &str) -> bool {
        if self.left_alone(name) {
            return true; // its backoff (`Task::troubled`): the others are read meanwhile
        }
        let read = ["read"];
        let record = match self.invoke(name, &read).await {
            Answer::Done(record) => record,
            Answer::Unreadable(why) => {
                // An unreadable record is skipped: the pass goes on to the others.
                self.troubled(name, &why);
                return true;
            }
            Answer::Failed => return false,
        };
        let applied = self.tracked.get(name).map_or(0, |t| t.applied);
        if record.epoch == 0 {
            // No record: never written, or flushed. If there was one, a breaker that is not
            // closed here says so again, as a `cas` over "no record", so that of several
            // instances doing it at once one wins and the others take its record on.
            let mut vanished = false;
            if let Some(t) = self.tracked.get_mut(name) {
                vanished = applied != 0 || t.vanished;
                if applied != 0 {
                    *t = Tracked::new(t.breaker.clone());
                    // Until a record is seen or written again: a write below that fails (the
                    // store, a foreign value) is tried again by the next pass.
                    t.vanished = true;
                }
            }
            if !vanished {
                // Never seen one: a change made here is written by its own pending write.
                return true;
            }
            let Some(breaker) = self.breaker(name) else {
                return true;
            };
            const AGAIN: &str = "written again: the record had vanished";
            let pushed = match breaker.state() {
                State::Open => self.push(name, Intent::Trip, AGAIN.to_owned(), false).await,
                s @ (State::ForcedOpen | State::Disabled) => {
                    self.push(name, Intent::Again(s), AGAIN.to_owned(), false)
                        .await
                }
                _ => Pushed::Done,
            };
            return !matches!(pushed, Pushed::Failed);
        }
        if record.epoch != applied {
            self.apply(name, &record);
        }
        true
    }
}
