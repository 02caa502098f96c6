//! Gates of the fault-injecting file system: points where matching operations stop until the
//! test opens them, so a test can hold a job at an exact operation (a manifest append, a
//! table create) while it does something else on another thread, without sleeping.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::fault::FaultOp;

/// A gate added with [`FaultFs::add_gate`](super::FaultFs::add_gate): the matching operation
/// numbered `skip` (counted from 0 among the operations the gate matches) waits until
/// [`FaultGate::open`] is called; every other operation passes. Clones share the gate.
#[derive(Clone, Debug)]
pub struct FaultGate {
    inner: Arc<Gate>,
}

#[derive(Debug)]
struct Gate {
    op: FaultOp,
    path_contains: Option<String>,
    skip: u64,
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// Operations matched so far (waiting or passed).
    matched: u64,
    /// Operations waiting at the gate now.
    waiting: usize,
    open: bool,
}

impl FaultGate {
    /// Waits until the operation is held at the gate; `false` if it did not arrive within
    /// `timeout`.
    pub fn wait_until_reached(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.inner.state.lock();
        while st.waiting == 0 {
            if self.inner.cv.wait_until(&mut st, deadline).timed_out() {
                return st.waiting > 0;
            }
        }
        true
    }

    /// Whether an operation is held at the gate now.
    pub fn is_holding(&self) -> bool {
        self.inner.state.lock().waiting > 0
    }

    /// Lets the held operation go on (or the one to come pass).
    pub fn open(&self) {
        self.inner.state.lock().open = true;
        self.inner.cv.notify_all();
    }
}

/// The gates of one file system.
#[derive(Debug, Default)]
pub(super) struct Gates {
    gates: Mutex<Vec<Arc<Gate>>>,
}

impl Gates {
    pub(super) fn add(&self, op: FaultOp, path_contains: Option<String>, skip: u64) -> FaultGate {
        let gate = Arc::new(Gate {
            op,
            path_contains,
            skip,
            state: Mutex::new(GateState::default()),
            cv: Condvar::new(),
        });
        self.gates.lock().push(Arc::clone(&gate));
        FaultGate { inner: gate }
    }

    /// Holds the calling operation at every closed gate whose turn it is until that gate opens.
    /// Called before the operation takes the file system's lock, so other operations go on.
    pub(super) fn pass(&self, op: FaultOp, paths: &[&Path]) {
        let matching: Vec<Arc<Gate>> = {
            let gates = self.gates.lock();
            if gates.is_empty() {
                return;
            }
            gates
                .iter()
                .filter(|g| g.op == op || g.op == FaultOp::Any)
                .filter(|g| {
                    g.path_contains
                        .as_deref()
                        .is_none_or(|sub| paths.iter().any(|p| p.to_string_lossy().contains(sub)))
                })
                .cloned()
                .collect()
        };
        for gate in matching {
            let mut st = gate.state.lock();
            let n = st.matched;
            st.matched += 1;
            if n != gate.skip || st.open {
                continue;
            }
            st.waiting += 1;
            gate.cv.notify_all();
            while !st.open {
                gate.cv.wait(&mut st);
            }
            st.waiting -= 1;
        }
    }
}
