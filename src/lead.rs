//! `NativeCampaign` and `NativeObserver`: a core campaign for leadership and an observer of one, which the facade's
//! `Leadership` and `LeaderObserver` wrap. A term's fn runs through the locker's runner, as every run does; what they
//! tell reaches the facade with the locker's other outcomes (delivery.rs).

use crate::options::millis;
use napi_derive::napi;
use snatch_core::{Campaign, CampaignOptions, Observer, SnatchError};

/// A campaign under way.
#[napi]
pub struct NativeCampaign {
    campaign: Campaign,
}

impl NativeCampaign {
    pub(crate) fn new(campaign: Campaign) -> Self {
        Self { campaign }
    }
}

#[napi]
impl NativeCampaign {
    /// Ends the term under way, if any; resolves once it ended. The campaign goes on after `retry`.
    #[napi]
    pub async fn resign(&self) {
        self.campaign.resign().await;
    }

    /// Ends the term under way, if any, and campaigns no more; resolves once the campaign stopped.
    #[napi]
    pub async fn stop(&self) {
        self.campaign.stop().await;
    }
}

/// An observer under way.
#[napi]
pub struct NativeObserver {
    observer: Observer,
}

impl NativeObserver {
    pub(crate) fn new(observer: Observer) -> Self {
        Self { observer }
    }
}

#[napi]
impl NativeObserver {
    /// Stops observing; resolves once it stopped.
    #[napi]
    pub async fn close(&self) {
        self.observer.close().await;
    }
}

/// A campaign's options from the facade's (ms): `ttl` (default: the locker's) and `retry` (default
/// [`snatch_core::DEFAULT_RETRY`]).
pub(crate) fn campaign_options(ttl: Option<f64>, retry: Option<f64>) -> Result<CampaignOptions, SnatchError> {
    let defaults = CampaignOptions::default();
    Ok(CampaignOptions {
        ttl: ttl.map(|ttl| millis("ttl", ttl)).transpose()?,
        retry: retry.map(|retry| millis("retry", retry)).transpose()?.unwrap_or(defaults.retry),
    })
}
