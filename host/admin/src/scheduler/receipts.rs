//! Run receipts: each dispatch carries an HMAC of its run id and the
//! executor address under a key every admin of the database shares; a
//! result counts only with it.

use super::*;

/// A run receipt: HMAC-SHA256 under `key` of the run id and the executor
/// address it was sent to, in hex.
pub(super) fn run_receipt(key: &[u8], run_id: u64, address: &str) -> hmac::Hmac<sha2::Sha256> {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(run_id.to_string().as_bytes());
    mac.update(b"\n");
    mac.update(address.as_bytes());
    mac
}

impl Scheduler {
    /// The receipt of `run_id` sent to `address`: the executor returns it
    /// with the result, and a result without the right one is refused.
    pub(super) fn receipt(&self, run_id: u64, address: &str) -> String {
        use hmac::Mac;
        hex::encode(
            run_receipt(&self.receipt_key, run_id, address)
                .finalize()
                .into_bytes(),
        )
    }

    /// Whether `result` carries the receipt of its run's dispatch to the
    /// executor it names (compared in constant time).
    pub(super) fn receipt_holds(&self, result: &RunResult) -> bool {
        use hmac::Mac;
        let Ok(presented) = hex::decode(&result.receipt) else {
            return false;
        };
        run_receipt(&self.receipt_key, result.run_id, &result.executor)
            .verify_slice(&presented)
            .is_ok()
    }
}
