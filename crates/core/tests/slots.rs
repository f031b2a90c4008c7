//! The cluster slots snatch-protocol computes (keys.rs) are those the redis crate's cluster client routes by.

use redis::cluster_routing::Slot;
use snatch_core::protocol::keys::{slot, LockKeys};

#[test]
fn slots_are_those_redis_computes() {
    for key in ["snatch:report", "{app}:x", "a{b}c", "a{}b", "{}x{y}", "a}b{", "", "x".repeat(100).as_str()] {
        assert_eq!(format!("{:?}", Slot::for_key(key)), format!("Slot({})", slot(key)), "{key}");
    }
    for (prefix, key) in [("snatch:", "report"), ("{app}:", "report"), ("snatch:", "a{b}c")] {
        let keys = LockKeys::new(prefix, key, true).unwrap();
        assert_eq!(format!("{:?}", Slot::for_key(&keys.fence)), format!("Slot({})", keys.slot()), "{prefix}{key}");
    }
}
