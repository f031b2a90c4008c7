//! `NativeLock`: a held lock handed to JS by `tryLock` / `lock`.

use crate::errors::to_napi;
use napi::bindgen_prelude::BigInt;
use napi_derive::napi;
use snatch_core::Lease;
use std::sync::Arc;

/// A held lock; the facade's `Lock` wraps it.
#[napi]
pub struct NativeLock {
    lease: Arc<Lease>,
}

impl NativeLock {
    pub(crate) fn new(lease: Arc<Lease>) -> Self {
        Self { lease }
    }
}

#[napi]
impl NativeLock {
    /// The key as the user gave it.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.lease.key().to_owned()
    }

    /// The owner's random token.
    #[napi(getter)]
    pub fn token(&self) -> String {
        self.lease.token().to_owned()
    }

    /// The fencing token.
    #[napi(getter)]
    pub fn fence(&self) -> BigInt {
        BigInt::from(self.lease.fence())
    }

    /// Milliseconds the lease is still guaranteed; 0 once lost or released.
    #[napi]
    pub fn remaining_ms(&self) -> f64 {
        self.lease.remaining().as_secs_f64() * 1000.0
    }

    /// Sets the lease to `ttl` ms (default: the acquisition's ttl); false when the lock was no longer ours.
    #[napi]
    pub async fn extend(&self, ttl: Option<f64>) -> napi::Result<bool> {
        let ttl = ttl.map(|v| crate::options::millis("ttl", v)).transpose().map_err(to_napi)?;
        self.lease.extend(ttl).await.map_err(to_napi)
    }

    /// Releases the lock (subject to minHold); false when it was no longer ours.
    #[napi]
    pub async fn release(&self) -> napi::Result<bool> {
        self.lease.release().await.map_err(to_napi)
    }
}
