//! The pipelined host path: how a host-slice forward splits its batch into chunks so that the
//! copies of one chunk overlap the compute of its neighbours.
//!
//! A chunk of `c` windows runs as its own pass in window region `[start, start + c)` of every
//! device buffer; while the GPU computes chunk `k`, the host uploads chunk `k + 1` and
//! downloads chunk `k - 1`. Only the first upload and the last download are not hidden, so a
//! batch of `n` chunks costs about its compute plus one chunk's copies.

/// Windows per chunk of the pipelined host path: a batch larger than this is split.
///
/// Measured on the H200 (FP32, 2026-12-01, `bilstm bench --backend cuda --host --iters 10`
/// with `BILSTM_HOST_CHUNK` = 0 / 64 / 128 / 256): host forward of batch 1024 153.4 / 87.1 /
/// 92.4 / 102.2 ms and of batch 256 38.9 / 24.4 / 30.3 / 36.2 ms, against 82.2 and 20.6 ms
/// device-resident (a second call: 145.8 / 94.1 / 93.2 / - and 36.6 / 26.1 / 30.4 / -). 64 windows still run at the large-batch rate (5.10 ms, 0.080 ms a window,
/// against 0.080 at 1024) while the one download left exposed, the last chunk's 38.6 MB, is
/// half of 128's.
pub const HOST_CHUNK_WINDOWS: usize = 64;

/// The chunks `(start, windows)` a host forward of `batch` windows runs in, `chunk` windows
/// each (the last one shorter); one chunk for `batch <= chunk`, none for batch 0. A `chunk` of
/// 0 means "do not split".
pub fn host_chunks(batch: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    let step = if chunk == 0 { batch.max(1) } else { chunk };
    (0..batch)
        .step_by(step)
        .map(move |start| (start, step.min(batch - start)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_tile_the_batch_in_order() {
        let got: Vec<_> = host_chunks(300, 128).collect();
        assert_eq!(got, [(0, 128), (128, 128), (256, 44)]);
        let got: Vec<_> = host_chunks(256, 128).collect();
        assert_eq!(got, [(0, 128), (128, 128)]);
        assert_eq!(host_chunks(5, 128).collect::<Vec<_>>(), [(0, 5)]);
        assert_eq!(host_chunks(0, 128).count(), 0);
        assert_eq!(host_chunks(7, 0).collect::<Vec<_>>(), [(0, 7)]);
        for batch in 0..40 {
            for chunk in 0..9 {
                let mut next = 0;
                for (start, n) in host_chunks(batch, chunk) {
                    assert_eq!(start, next);
                    assert!(n >= 1 && (chunk == 0 || n <= chunk));
                    next += n;
                }
                assert_eq!(next, batch, "batch {batch} chunk {chunk}");
            }
        }
    }
}
