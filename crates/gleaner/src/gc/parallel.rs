//! Several of a GC job's reads in flight at once. A job's validity lookups and its reads of live
//! records are independent small random reads; one at a time, each waits for the device (the
//! test machine serves three times as many random 4 KiB reads at queue depth 32 as at 1), and
//! a job spent most of its time waiting (docs/benchmarks.md, "GC reads in flight").
//!
//! [`map_in_parallel`] splits a batch into contiguous chunks (neighbours in key order stay on
//! one thread, so they share cached blocks) and runs them on short-lived scoped threads. The
//! result is in the input's order, so the job's outputs do not depend on the scheduling.

use crate::error::Result;

/// `f` over every item, on up to `depth` threads (the caller's included) with at least
/// `min_per_thread` items each (a thread start costs tens of microseconds, so cheap items are
/// not worth one each), results in `items`' order. The first error wins (other chunks still
/// finish). A thread the system refuses to start leaves its chunk to the caller's thread.
pub(crate) fn map_in_parallel<T, R, F>(
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
    let threads = depth.min(items.len() / min_per_thread.max(1)).max(1);
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    let run = |chunk: &[T]| chunk.iter().map(f).collect::<Result<Vec<R>>>();
    std::thread::scope(|s| {
        let mut chunks = items.chunks(per);
        let first = chunks.next().unwrap_or(&[]);
        let spawned: Vec<_> = chunks
            .map(|chunk| {
                let started = std::thread::Builder::new()
                    .name("gleaner-gc-io".into())
                    .spawn_scoped(s, move || run(chunk));
                (chunk, started.ok())
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        let mut first_error = None;
        let mut take = |part: Result<Vec<R>>| match part {
            Ok(mut p) => out.append(&mut p),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        };
        take(run(first));
        for (chunk, handle) in spawned {
            let part = match handle {
                Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                None => run(chunk),
            };
            take(part);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn results_keep_the_input_order_at_every_depth() {
        let items: Vec<u64> = (0..1000).collect();
        for depth in [0, 1, 2, 3, 8, 64, 2000] {
            let out = map_in_parallel(&items, depth, 4, &|x: &u64| Ok(x * 3)).unwrap();
            assert_eq!(
                out,
                items.iter().map(|x| x * 3).collect::<Vec<_>>(),
                "{depth}"
            );
        }
        let none: Vec<u64> = Vec::new();
        assert!(
            map_in_parallel(&none, 8, 1, &|x: &u64| Ok(*x))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn work_runs_on_several_threads_and_the_first_error_wins() {
        let items: Vec<u64> = (0..64).collect();
        let ids = std::sync::Mutex::new(std::collections::HashSet::new());
        map_in_parallel(&items, 4, 4, &|_: &u64| {
            ids.lock().unwrap().insert(std::thread::current().id());
            Ok(())
        })
        .unwrap();
        assert_eq!(ids.lock().unwrap().len(), 4, "one thread per chunk");
        let err = map_in_parallel(&items, 4, 1, &|x: &u64| {
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
