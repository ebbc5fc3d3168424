//! Test hooks: fault injection and dirty workspaces, for the GPU tests of a lost partner and
//! of stale buffers. The two methods exist only with the `test-hooks` feature (this crate's
//! tests turn it on); production builds carry neither ([`StallInjection`] itself is plain data
//! the pass reads, always `None` there).

#[cfg(feature = "test-hooks")]
use bilstm_core::CoreError;
use bilstm_core::Direction;
#[cfg(feature = "test-hooks")]
use bilstm_kernels::params::ERROR_PARTNER_LOST;

#[cfg(feature = "test-hooks")]
use crate::backend::CudaBackend;
#[cfg(feature = "test-hooks")]
use crate::error::CudaError;

/// Test-only fault injection: one block of one cooperative recurrence launch returns at once
/// and never publishes, so its partners must time out (see `CudaBackend::inject_stall`, with the `test-hooks` feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallInjection {
    /// The layer whose recurrence is hit.
    pub layer: usize,
    /// Its direction.
    pub direction: Direction,
    /// The block index in that direction's first launch; for the cluster recurrence (one launch
    /// per layer, both directions) the CTA index in the layer's launch, whatever `direction`.
    pub block: u32,
}

#[cfg(feature = "test-hooks")]
impl CudaBackend {
    /// Test-only fault injection: makes one block of one cooperative recurrence launch never
    /// publish (so forward passes of a wide or tiled plan end with [`CudaError::PartnerLost`]
    /// after the spin timeout); `None` turns it off. The resident recurrence has no partners
    /// and ignores it.
    pub fn inject_stall(&mut self, stall: Option<StallInjection>) {
        self.stall = stall;
    }

    /// Test-only: whether TF32 passes on 9.0 behind the register-quad recurrences run the
    /// resident projection in every layer (the default) or the streaming one (as
    /// `BILSTM_PROJ_RESIDENT=0`); the GPU tests compare the two bit for bit.
    pub fn set_resident_projection(&mut self, on: bool) {
        self.resident_projection = on;
    }

    /// Test-only: TF32 passes of cluster plans run what `name` names as `FIXED_RECURRENCE_ENV`
    /// does: a fixed-point kernel at every batch (`8`, `1c8`, `4c4`, ...), the plan's pick
    /// (`auto`, or `None`), or the plan's cluster kernel with section 8's dot (`off`).
    ///
    /// # Errors
    /// [`CudaError::UnknownSetting`] for another name.
    pub fn set_fixed_recurrence(&mut self, name: Option<&str>) -> Result<(), CudaError> {
        self.fixed_recurrence =
            match name {
                None => None,
                Some(n) => Some(crate::backend::parse_fixed_recurrence(Some(n)).ok_or_else(
                    || CudaError::UnknownSetting {
                        setting: "fixed-point recurrence",
                        value: n.to_owned(),
                        expected: crate::backend::FIXED_RECURRENCE_NAMES,
                    },
                )?),
            };
        Ok(())
    }

    /// Test-only: fills every workspace (projections, layer outputs, exchange, final states, error words)
    /// with garbage derived from `seed`, the exchange with words whose flags are valid flags
    /// of the coming pass. A correct forward pass must give the same bits afterwards.
    ///
    /// # Errors
    /// [`CoreError::NotPrepared`]; [`CudaError::Driver`].
    pub fn scribble_workspaces(&mut self, seed: u64) -> Result<(), CudaError> {
        let stream = self.device.main.clone();
        let st = self.prepared.as_mut().ok_or(CoreError::NotPrepared)?;
        let mut rng = bilstm_core::rng::SplitMix64::new(seed);
        let max_flag = (st.config.shape.layers * st.config.shape.frames).max(1) as u64;
        let garbage = |rng: &mut bilstm_core::rng::SplitMix64, n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| f32::from_bits(rng.next_u64() as u32))
                .collect()
        };
        let b = &mut st.buffers;
        let v = garbage(&mut rng, b.proj.len());
        stream
            .memcpy_htod(&v, &mut b.proj)
            .map_err(CudaError::driver("scribbling"))?;
        for out in &mut b.layer_out {
            let v = garbage(&mut rng, out.len());
            stream
                .memcpy_htod(&v, out)
                .map_err(CudaError::driver("scribbling"))?;
        }
        let words: Vec<u64> = (0..b.exchange.len())
            .map(|_| ((1 + rng.next_u64() % max_flag) << 32) | (rng.next_u64() & 0xffff_ffff))
            .collect();
        stream
            .memcpy_htod(&words, &mut b.exchange)
            .map_err(CudaError::driver("scribbling"))?;
        for state in [&mut b.state_h, &mut b.state_c] {
            let v = garbage(&mut rng, state.len());
            stream
                .memcpy_htod(&v, state)
                .map_err(CudaError::driver("scribbling"))?;
        }
        let errors = [ERROR_PARTNER_LOST, 7, 1, 99];
        stream
            .memcpy_htod(&errors[..], &mut b.error)
            .map_err(CudaError::driver("scribbling"))?;
        stream
            .synchronize()
            .map_err(CudaError::driver("scribbling"))?;
        Ok(())
    }
}
