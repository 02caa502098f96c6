//! Several of a GC job's reads in flight at once. A job's validity lookups and its reads of live
//! records are independent small random reads; one at a time, each waits for the device (the
//! test machine serves three times as many random 4 KiB reads at queue depth 32 as at 1), and
//! a job spent most of its time waiting (docs/benchmarks.md, "GC reads in flight").
//!
//! `map_in_parallel` splits a batch into contiguous chunks (neighbours in key order stay on
//! one thread, so they share cached blocks), runs the first on the caller's thread and the rest
//! on a [`GcIoPool`], the database's threads for GC reads. The result is in the input's order,
//! so the job's outputs do not depend on the scheduling.
//!
//! The pool exists because a job checks records in batches of 256: with threads started per
//! batch, a job that failed and was retried at once started about 900 threads a second
//! (issue 23). The pool's threads are started once, and its size bounds the reads in flight of
//! all jobs together.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Most threads a [`GcIoPool`] starts, whatever the options ask: 63 is what one job at the
/// largest `gc_io_depth` (64) uses beside its own thread, so the bound never slows a single job.
pub const MAX_GC_IO_THREADS: usize = 63;

/// Threads that run the chunks of GC jobs' batches beside the jobs' own threads (see the
/// module comment). Dropping it stops the threads and waits for them; they are idle by then,
/// because every use (`map_in_parallel`) waits for its chunks before it returns.
pub struct GcIoPool {
    /// `None` only while dropping.
    pool: Option<rayon::ThreadPool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    size: usize,
    /// Threads that have started and not yet ended.
    alive: Arc<AtomicUsize>,
}

impl std::fmt::Debug for GcIoPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcIoPool")
            .field("size", &self.size)
            .finish()
    }
}

impl GcIoPool {
    /// Starts `threads` threads (at least 1, at most [`MAX_GC_IO_THREADS`]), named
    /// `gleaner-gc-io-N`.
    ///
    /// Errors: [`Error::Io`] when the system refuses to start a thread (the ones already
    /// started are stopped again).
    pub fn new(threads: usize) -> Result<GcIoPool> {
        let size = threads.clamp(1, MAX_GC_IO_THREADS);
        let handles = Arc::new(Mutex::new(Vec::with_capacity(size)));
        let started = Arc::clone(&handles);
        let alive = Arc::new(AtomicUsize::new(0));
        let (up, down) = (Arc::clone(&alive), Arc::clone(&alive));
        // Our own threads rather than rayon's default ones, so that dropping the pool can wait
        // for them to end: a closed database leaves no thread of its own behind.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(size)
            .thread_name(|i| format!("gleaner-gc-io-{i}"))
            .start_handler(move |_| {
                up.fetch_add(1, Ordering::SeqCst);
            })
            .exit_handler(move |_| {
                down.fetch_sub(1, Ordering::SeqCst);
            })
            .spawn_handler(move |thread| {
                let mut b = std::thread::Builder::new();
                if let Some(name) = thread.name() {
                    b = b.name(name.to_string());
                }
                if let Some(stack) = thread.stack_size() {
                    b = b.stack_size(stack);
                }
                started.lock().push(b.spawn(|| thread.run())?);
                Ok(())
            })
            .build()
            .map_err(|e| {
                Error::io(
                    "starting GC read threads",
                    std::io::Error::other(e.to_string()),
                )
            });
        match pool {
            Ok(pool) => Ok(GcIoPool {
                pool: Some(pool),
                threads: handles,
                size,
                alive,
            }),
            Err(e) => {
                // rayon stops the threads it started when the build fails; wait for them.
                for h in std::mem::take(&mut *handles.lock()) {
                    let _ = h.join();
                }
                Err(e)
            }
        }
    }

    /// The number of threads.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Threads that have started and not yet ended: up to [`GcIoPool::size`] (they start in
    /// the background after [`GcIoPool::new`]).
    pub fn running(&self) -> usize {
        self.alive.load(Ordering::SeqCst)
    }
}

impl Drop for GcIoPool {
    fn drop(&mut self) {
        // Dropping rayon's pool tells its threads to end once idle; they are (see the type's
        // comment), so the joins below are short.
        drop(self.pool.take());
        for h in std::mem::take(&mut *self.threads.lock()) {
            // A thread that panicked has nothing left to clean up.
            let _ = h.join();
        }
    }
}

/// A database's [`GcIoPool`], started by the first job that asks for it (most databases run
/// jobs at depth 1, or none at all) and stopped at close.
pub(crate) struct LazyGcIoPool {
    threads: usize,
    /// `Err(())` once stopped: a job that starts after `close` runs on its own thread.
    pool: Mutex<std::result::Result<Option<Arc<GcIoPool>>, ()>>,
}

impl LazyGcIoPool {
    /// A pool of `threads` threads (0: never one), not started yet.
    pub(crate) fn new(threads: usize) -> LazyGcIoPool {
        LazyGcIoPool {
            threads: threads.min(MAX_GC_IO_THREADS),
            pool: Mutex::new(Ok(None)),
        }
    }

    /// The pool, started now if this is the first call; `None` when it has no threads, has been
    /// stopped, or the system refused to start its threads (the job then reads one record at a
    /// time, and the next job tries again).
    pub(crate) fn get(&self) -> Option<Arc<GcIoPool>> {
        if self.threads == 0 {
            return None;
        }
        let mut slot = self.pool.lock();
        let pool = slot.as_mut().ok()?;
        if pool.is_none() {
            match GcIoPool::new(self.threads) {
                Ok(p) => *pool = Some(Arc::new(p)),
                Err(e) => log::warn!("GC reads one at a time: {e}"),
            }
        }
        pool.clone()
    }

    /// Threads of the pool as started (0 before the first job that asks, and after
    /// [`LazyGcIoPool::shutdown`]).
    pub(crate) fn threads(&self) -> usize {
        match &*self.pool.lock() {
            Ok(Some(p)) => p.size,
            _ => 0,
        }
    }

    /// Stops the pool: its threads end once the last job holding it lets it go (at `close`, no
    /// job is left, so they end and are joined here).
    pub(crate) fn shutdown(&self) {
        let pool = std::mem::replace(&mut *self.pool.lock(), Err(()));
        drop(pool);
    }
}

/// `f` over every item, in up to `depth` chunks of at least `min_per_thread` items each (handing
/// a chunk to another thread costs microseconds, and many items are answered from a cache in
/// about one), results in `items`' order. The first chunk runs on the caller's thread, the
/// others on `pool`; without a pool, or with one chunk, everything runs on the caller's thread.
/// The first error in `items`' order wins (other chunks still finish). A panic in `f` reaches
/// the caller once every chunk has finished.
pub(crate) fn map_in_parallel<T, R, F>(
    pool: Option<&GcIoPool>,
    items: &[T],
    depth: usize,
    min_per_thread: usize,
    f: &F,
) -> Result<Vec<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> Result<R> + Sync + ?Sized,
{
    let chunks = depth.min(items.len() / min_per_thread.max(1)).max(1);
    let Some(pool) = pool.and_then(|p| p.pool.as_ref()).filter(|_| chunks > 1) else {
        return items.iter().map(f).collect();
    };
    let per = items.len().div_ceil(chunks);
    let run = |chunk: &[T]| chunk.iter().map(f).collect::<Result<Vec<R>>>();
    let mut parts: Vec<Option<Result<Vec<R>>>> = Vec::new();
    parts.resize_with(items.len().div_ceil(per), || None);
    // `in_place_scope`: the caller's thread takes part (it runs the first chunk) rather than
    // handing everything over and sleeping; the scope ends only when every chunk has, so the
    // chunks may borrow what the caller holds (the job's pinned version, its victims).
    pool.in_place_scope(|s| {
        let mut slots = parts.iter_mut();
        let mut chunks = items.chunks(per);
        let first = (slots.next(), chunks.next());
        for (slot, chunk) in slots.zip(chunks) {
            s.spawn(move |_| *slot = Some(run(chunk)));
        }
        if let (Some(slot), Some(chunk)) = first {
            *slot = Some(run(chunk));
        }
    });
    let mut out = Vec::with_capacity(items.len());
    for part in parts {
        out.append(&mut part.expect("the scope ran every chunk")?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn results_keep_the_input_order_at_every_depth() {
        let pool = GcIoPool::new(7).unwrap();
        let items: Vec<u64> = (0..1000).collect();
        for p in [None, Some(&pool)] {
            for depth in [0, 1, 2, 3, 8, 64, 2000] {
                let out = map_in_parallel(p, &items, depth, 4, &|x: &u64| Ok(x * 3)).unwrap();
                assert_eq!(
                    out,
                    items.iter().map(|x| x * 3).collect::<Vec<_>>(),
                    "{depth}"
                );
            }
            let none: Vec<u64> = Vec::new();
            assert!(
                map_in_parallel(p, &none, 8, 1, &|x: &u64| Ok(*x))
                    .unwrap()
                    .is_empty()
            );
        }
    }

    #[test]
    fn chunks_run_at_the_same_time_and_the_first_error_wins() {
        let pool = GcIoPool::new(3).unwrap();
        let items: Vec<u64> = (0..64).collect();
        // Each chunk's first item waits until all four chunks have started: it returns only if
        // they run at the same time, on four threads. The deadline only keeps a broken pool from
        // hanging the test.
        let arrived = std::sync::Mutex::new(HashSet::new());
        let all_in = std::sync::Condvar::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        map_in_parallel(Some(&pool), &items, 4, 4, &|x: &u64| {
            if x.is_multiple_of(16) {
                let mut a = arrived.lock().unwrap();
                a.insert(std::thread::current().id());
                all_in.notify_all();
                while a.len() < 4 && Instant::now() < deadline {
                    a = all_in
                        .wait_timeout(a, Duration::from_millis(100))
                        .unwrap()
                        .0;
                }
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(
            arrived.lock().unwrap().len(),
            4,
            "four chunks, each on its own thread at the same time"
        );
        for p in [None, Some(&pool)] {
            let err = map_in_parallel(p, &items, 4, 1, &|x: &u64| {
                if *x == 20 || *x == 50 {
                    Err(Error::corruption("t", *x, "bad"))
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
            assert!(err.to_string().contains("20"), "{err}");
        }
    }

    #[test]
    fn many_batches_start_no_new_threads() {
        let pool = GcIoPool::new(3).unwrap();
        let items: Vec<u64> = (0..64).collect();
        let ids = std::sync::Mutex::new(HashSet::new());
        for _ in 0..1000 {
            map_in_parallel(Some(&pool), &items, 4, 1, &|_: &u64| {
                ids.lock().unwrap().insert(std::thread::current().id());
                Ok(())
            })
            .unwrap();
        }
        // Thread ids are never reused: a thread started per batch would show up as a new one.
        let seen = ids.lock().unwrap().len();
        assert!(
            seen <= pool.size() + 1,
            "{seen} threads for 1,000 batches, with a pool of {}",
            pool.size()
        );
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_still_works() {
        let pool = GcIoPool::new(2).unwrap();
        let items: Vec<u64> = (0..30).collect();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            map_in_parallel(Some(&pool), &items, 3, 1, &|x: &u64| {
                assert!(*x != 25, "item 25");
                Ok(*x)
            })
        }));
        assert!(caught.is_err());
        let out = map_in_parallel(Some(&pool), &items, 3, 1, &|x: &u64| Ok(*x)).unwrap();
        assert_eq!(out, items);
    }

    #[test]
    fn dropping_the_pool_waits_for_its_threads_to_end() {
        let pool = GcIoPool::new(4).unwrap();
        let items: Vec<u64> = (0..64).collect();
        map_in_parallel(Some(&pool), &items, 5, 1, &|x: &u64| Ok(*x)).unwrap();
        assert!(pool.running() <= 4);
        let alive = Arc::clone(&pool.alive);
        drop(pool);
        // Each thread counts itself out as it ends, and the drop joined them all.
        assert_eq!(alive.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn the_lazy_pool_starts_at_the_first_request_and_not_after_shutdown() {
        let lazy = LazyGcIoPool::new(3);
        assert_eq!(lazy.threads(), 0, "not started before a job asks");
        let pool = lazy.get().expect("started");
        assert!(Arc::ptr_eq(&pool, &lazy.get().expect("the same pool")));
        assert_eq!(lazy.threads(), 3);
        drop(pool);
        lazy.shutdown();
        assert_eq!(lazy.threads(), 0);
        assert!(lazy.get().is_none(), "no pool after shutdown");
        assert!(LazyGcIoPool::new(0).get().is_none());
    }
}
