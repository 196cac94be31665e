//! Host-side parallel work on the coupled step's critical path (solute validation, copies into
//! pinned staging): a bounded thread pool of its own.
//!
//! Why not rayon's global pool: on a 64-core host the global pool has 64 threads, and waking
//! them for a few megabytes of copying costs more than the copy (measured: the per-step host
//! work of a coupled step was an order of magnitude slower with 64 threads than with 8). A copy of this size is
//! bound by memory bandwidth, which a handful of threads saturate; the rest only add wake-up
//! latency and cross-socket traffic. Small inputs run on the calling thread.

use std::sync::OnceLock;

use rayon::prelude::*;

/// Most threads of the host pool unless `MPCBOX_HOST_THREADS` says otherwise. In
/// `mpcbox-bench coupling` the coupled step's host work kept getting faster up to 16 threads,
/// while rayon's global pool (a thread per core) on a 64-core host was an order of magnitude
/// slower than 8 threads: the copies are bound by memory, and more threads only contend.
pub const DEFAULT_HOST_THREADS: usize = 16;

/// Below this many elements a host pass runs on the calling thread: waking threads costs
/// more than the work (one core copies 8k doubles in about the time a wake-up takes).
pub const SERIAL_BELOW: usize = 1 << 17;

/// Fewest elements per parallel task: a task then costs far more than its scheduling.
const MIN_CHUNK: usize = 1 << 14;

/// Tasks per pool thread: enough that a slow thread's share is taken by the others.
const TASKS_PER_THREAD: usize = 4;

/// Elements per task of a pass over `len` elements: every thread gets several tasks, however
/// long the pass (a fixed task size left half of the threads idle on the coupled step's
/// staging pieces and on small arrays' checks).
fn chunk_for(len: usize) -> usize {
    len.div_ceil(TASKS_PER_THREAD * host_threads())
        .max(MIN_CHUNK)
}

/// Threads the host pool uses: `MPCBOX_HOST_THREADS` if set to a positive integer, else
/// min(this rank's cores, [`DEFAULT_HOST_THREADS`]).
pub fn host_threads() -> usize {
    let cores = crate::ranks::cores();
    match crate::knobs::knobs()
        .get("MPCBOX_HOST_THREADS")
        .and_then(|s| s.parse::<usize>().ok())
    {
        Some(n) if n > 0 => n,
        _ => cores.min(DEFAULT_HOST_THREADS),
    }
}

/// The pool itself, built on first use. If it cannot be built (no threads available), work
/// runs on the calling thread.
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(host_threads())
            .thread_name(|i| format!("mpcbox-host-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Run `f` on the host pool when `len` elements are worth it, else on this thread.
pub fn install<R: Send>(len: usize, f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(p) if len >= SERIAL_BELOW => p.install(f),
        _ => f(),
    }
}

/// `dst.copy_from_slice(src)` (equal lengths), on the host pool for large arrays.
pub fn copy(dst: &mut [f64], src: &[f64]) {
    assert_eq!(dst.len(), src.len(), "host::copy of unequal lengths");
    if dst.len() < SERIAL_BELOW {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = chunk_for(dst.len());
    install(dst.len(), || {
        dst.par_chunks_mut(chunk)
            .zip(src.par_chunks(chunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
    });
}

/// `dst.copy_from_slice(src)` (equal lengths) with every value tested by `ok` as it passes
/// (the test costs no extra pass over memory): true when every value passed. On the host
/// pool for large arrays; everything is copied either way.
pub fn copy_checked(dst: &mut [f64], src: &[f64], ok: impl Fn(f64) -> bool + Sync) -> bool {
    assert_eq!(
        dst.len(),
        src.len(),
        "host::copy_checked of unequal lengths"
    );
    let chunk = |d: &mut [f64], s: &[f64]| {
        // `&` and not `&&`: no branch in the loop, so it vectorises
        let mut good = true;
        for (d, &v) in d.iter_mut().zip(s) {
            *d = v;
            good &= ok(v);
        }
        good
    };
    if dst.len() < SERIAL_BELOW {
        return chunk(dst, src);
    }
    let size = chunk_for(dst.len());
    install(dst.len(), || {
        dst.par_chunks_mut(size)
            .zip(src.par_chunks(size))
            .map(|(d, s)| chunk(d, s))
            .reduce(|| true, |a, b| a & b)
    })
}

/// Index of the first element of `items` for which `bad` holds, searched on the host pool for
/// large inputs; `None` if there is none.
pub fn find_first<T: Sync>(items: &[T], bad: impl Fn(&T) -> bool + Sync) -> Option<usize> {
    if items.len() < SERIAL_BELOW {
        return items.iter().position(bad);
    }
    let size = chunk_for(items.len());
    install(items.len(), || {
        items
            .par_chunks(size)
            .enumerate()
            .find_map_first(|(c, chunk)| chunk.iter().position(&bad).map(|j| c * size + j))
    })
}

/// The lowest `i < n` for which `bad(i)` holds, searched on the host pool for large `n`:
/// one pass over several arrays indexed alike.
pub fn find_first_index(n: usize, bad: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    if n < SERIAL_BELOW {
        return (0..n).find(|&i| bad(i));
    }
    let size = chunk_for(n);
    install(n, || {
        (0..n.div_ceil(size))
            .into_par_iter()
            .find_map_first(|c| (c * size..((c + 1) * size).min(n)).find(|&i| bad(i)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_and_find_agree_with_serial_code_on_both_sides_of_the_threshold() {
        for n in [0, 7, SERIAL_BELOW - 1, SERIAL_BELOW, 3 * SERIAL_BELOW + 11] {
            let src: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
            let mut dst = vec![0.0; n];
            copy(&mut dst, &src);
            assert_eq!(dst, src, "copy of {n}");
            assert_eq!(find_first_index(n, |i| src[i] < 0.0), None, "none of {n}");
            let mut checked = vec![0.0; n];
            assert!(
                copy_checked(&mut checked, &src, |v| v >= 0.0),
                "all pass, {n}"
            );
            assert_eq!(checked, src, "copy_checked of {n}");
            if n > 0 {
                let mut bad = src.clone();
                bad[n - 1] = f64::NAN;
                assert!(
                    !copy_checked(&mut checked, &bad, |v| v >= 0.0),
                    "NaN fails, {n}"
                );
                assert!(checked[n - 1].is_nan(), "copied all the same, {n}");
            }
            if n > 0 {
                assert_eq!(
                    find_first_index(n, |i| i + 1 >= n),
                    Some(n - 1),
                    "last of {n}"
                );
            }
            assert_eq!(
                find_first(&src, |&x| x < 0.0),
                None,
                "nothing to find in {n}"
            );
            if n > 5 {
                // two hits: the first one must be reported, whichever chunk finds one first
                let at = n - 3;
                let hit = |&x: &f64| x == (at as f64) * 0.5 || x == ((n - 1) as f64) * 0.5;
                assert_eq!(find_first(&src, hit), Some(at), "first hit in {n}");
            }
        }
    }

    #[test]
    fn pool_is_bounded() {
        let n = host_threads();
        assert!(n >= 1);
        if std::env::var("MPCBOX_HOST_THREADS").is_err() {
            assert!(n <= DEFAULT_HOST_THREADS);
        }
    }
}
