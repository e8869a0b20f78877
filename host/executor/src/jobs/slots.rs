//! Each tenant's share of the executor's instance slots.

use super::*;

/// Per-tenant semaphores of `share` permits each (fewer where a tenant's
/// quota of instances per executor is smaller): no tenant's running
/// instances can fill every slot of the executor, so another tenant's run
/// always finds one (idle instances are evicted for it by the runtime).
/// A tenant's semaphore is kept once made (one per tenant seen): dropping
/// it while a run holds or awaits a permit would let the tenant past its
/// share.
pub(super) struct TenantSlots {
    share: usize,
    by_tenant: Mutex<HashMap<String, TenantSlot>>,
}

/// One tenant's semaphore and how many permits it has in all (given out
/// or not).
pub(super) struct TenantSlot {
    semaphore: Arc<tokio::sync::Semaphore>,
    permits: usize,
}

impl TenantSlots {
    pub(super) fn new(share: usize) -> Self {
        TenantSlots {
            share: share.max(1),
            by_tenant: Mutex::new(HashMap::new()),
        }
    }

    /// `tenant`'s semaphore, resized to its quota when the admin sent one
    /// (a shrink takes back free permits now and the others as they are
    /// returned, at the tenant's next runs).
    pub(super) fn of(&self, tenant: &str, quota: Option<u32>) -> Arc<tokio::sync::Semaphore> {
        let wanted = quota.map_or(self.share, |quota| {
            self.share
                .min(usize::try_from(quota).unwrap_or(usize::MAX))
                .max(1)
        });
        let mut by_tenant = self
            .by_tenant
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let slot = by_tenant
            .entry(tenant.to_owned())
            .or_insert_with(|| TenantSlot {
                semaphore: Arc::new(tokio::sync::Semaphore::new(wanted)),
                permits: wanted,
            });
        if wanted > slot.permits {
            slot.semaphore.add_permits(wanted - slot.permits);
            slot.permits = wanted;
        } else if wanted < slot.permits {
            slot.permits -= slot.semaphore.forget_permits(slot.permits - wanted);
        }
        slot.semaphore.clone()
    }
}
