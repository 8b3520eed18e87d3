//! The express lane: short requests that arrive while long ones decode run in a batch of
//! their own, stepped ahead of the long batch.
//!
//! Continuous batching alone lets a short request join a long batch at its next step, but
//! on the CPU every step of that batch costs more than a step of the short request alone:
//! on the 2-core machine a decode step of SmolLM2 with one row took 32–50 ms (OpenBLAS
//! multiplies one row as a matrix-vector product that reads each weight once), with four rows
//! 45–48 ms and with 8 to 12 rows 54–105 ms (it packs the weights into blocks first), so a
//! short request inside a batch of long ones took 2.1–2.8× its solo latency (`bench serve`;
//! 1.7–1.9× in the express lane). The express lane keeps the short requests in a
//! second [`Decoder`] and steps it alone while the long batch waits, up to a bound
//! ([`Express::wait`]) so that a stream of short requests delays long ones but never stops
//! them: the preemptive, shortest-first scheduling of serving systems such as FastServe,
//! with the request's token budget (`max_tokens`) standing in for its unknown length.

use std::collections::HashSet;

use sandgym_policy::{Cpu, Decoder, Done, RowRequest, SeqCache};

/// When a request takes the express lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Express {
    /// Requests of at most this many new tokens are short; 0 turns the lane off.
    pub tokens: usize,
    /// Most steps in a row the long batch waits while the short one decodes.
    pub wait: usize,
}

impl Default for Express {
    fn default() -> Self {
        Self {
            tokens: 32,
            wait: 32,
        }
    }
}

/// A generating thread's two batches: the main one and the express lane beside it.
pub(crate) struct Lanes<'m> {
    main: Decoder<'m, Cpu>,
    express: Decoder<'m, Cpu>,
    rule: Express,
    /// Ids of the main batch's running rows whose budget is over `rule.tokens`.
    long: HashSet<usize>,
    /// Steps the long batch has waited in a row.
    waited: usize,
}

/// What one [`Lanes::step`] decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stepped {
    /// The express lane alone; the long batch waited.
    ExpressOnly,
    /// Every running row.
    All,
}

/// Whether the next step decodes the express lane alone: it has rows, the main batch has a
/// long one, and the long batch has not yet waited `wait` steps in a row.
pub(crate) fn express_only(
    express_running: bool,
    long_waiting: bool,
    waited: usize,
    wait: usize,
) -> bool {
    express_running && long_waiting && waited < wait
}

impl<'m> Lanes<'m> {
    /// Two empty batches of `main` and `express` (decoders of the same model).
    pub fn new(main: Decoder<'m, Cpu>, express: Decoder<'m, Cpu>, rule: Express) -> Self {
        Self {
            main,
            express,
            rule,
            long: HashSet::new(),
            waited: 0,
        }
    }

    /// Rows decoding in both batches.
    pub fn running(&self) -> usize {
        self.main.running() + self.express.running()
    }

    /// Whether no row is decoding.
    pub fn is_idle(&self) -> bool {
        self.main.is_idle() && self.express.is_idle()
    }

    /// Whether `request` is short and a long row is decoding: it takes the express lane.
    fn is_express(&self, request: &RowRequest) -> bool {
        self.rule.tokens > 0 && request.max_new_tokens <= self.rule.tokens && !self.long.is_empty()
    }

    /// Splits `requests` into the main batch's and the express lane's, noting the long ones.
    fn route<T>(&mut self, requests: Vec<T>, row: impl Fn(&T) -> &RowRequest) -> (Vec<T>, Vec<T>) {
        let (mut main, mut express) = (Vec::new(), Vec::new());
        for request in requests {
            let r = row(&request);
            if self.is_express(r) {
                express.push(request);
            } else {
                if r.max_new_tokens > self.rule.tokens {
                    self.long.insert(r.id);
                }
                main.push(request);
            }
        }
        (main, express)
    }

    /// Admits new requests (encoded from scratch) to the lane each belongs to.
    pub fn admit(&mut self, requests: Vec<RowRequest>) {
        let (main, express) = self.route(requests, |r| r);
        self.main.admit(main);
        self.express.admit(express);
    }

    /// Admits requests that continue cached sequences to the lane each belongs to.
    pub fn admit_continuing(&mut self, requests: Vec<(RowRequest, SeqCache<Cpu>)>) {
        let (main, express) = self.route(requests, |(r, _)| r);
        self.main.admit_continuing(main);
        self.express.admit_continuing(express);
    }

    /// One step: the express lane alone while it has rows and the long batch has waited
    /// less than its bound, else both batches.
    pub fn step(&mut self, stop: &dyn Fn(usize) -> bool) -> Stepped {
        let alone = express_only(
            !self.express.is_idle(),
            !self.long.is_empty(),
            self.waited,
            self.rule.wait,
        );
        if alone {
            self.express.step(stop);
            self.waited += 1;
            Stepped::ExpressOnly
        } else {
            self.express.step(stop);
            self.main.step(stop);
            self.waited = 0;
            Stepped::All
        }
    }

    /// Takes the rows that have ended in either batch.
    pub fn done(&mut self) -> Vec<Done> {
        let mut done = self.main.done();
        for d in &done {
            self.long.remove(&d.id);
        }
        done.extend(self.express.done());
        done
    }

    /// Takes the kept caches of the rows that have ended in either batch.
    pub fn take_caches(&mut self) -> Vec<(usize, SeqCache<Cpu>)> {
        let mut kept = self.main.take_caches();
        kept.extend(self.express.take_caches());
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::express_only;

    #[test]
    fn the_express_lane_runs_alone_only_beside_a_long_batch_and_only_up_to_its_bound() {
        assert!(express_only(true, true, 0, 32));
        assert!(express_only(true, true, 31, 32));
        // The long batch has waited its bound: both step.
        assert!(!express_only(true, true, 32, 32));
        // No short row, or no long row waiting: nothing to put first.
        assert!(!express_only(false, true, 0, 32));
        assert!(!express_only(true, false, 0, 32));
        // A bound of 0 never lets the long batch wait.
        assert!(!express_only(true, true, 0, 0));
    }
}
