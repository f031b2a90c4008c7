//! Which keys this process waited for most: a table of at most [`CONTENTION_KEYS`] keys, each with its waits, the
//! time spent waiting and the waits that timed out. Bounded whatever the number of keys: when it is full, a key not in
//! it takes the place of the key waited for least (by total wait), starting from that key's total, so that a key
//! waited for a lot enters and stays (the space-saving algorithm, weighted by the time waited); its own counts start
//! at its entry.

use std::sync::Mutex;
use std::time::Duration;

/// The most keys the table keeps.
pub const CONTENTION_KEYS: usize = 100;

/// How many keys `contention()` gives without a `limit`.
pub const DEFAULT_CONTENTION_LIMIT: usize = 10;

/// A key's waits, since it entered the table (or since the last reset).
#[derive(Debug, Clone, PartialEq)]
pub struct Contended {
    pub key: String,
    /// Acquisitions that found the key held and waited for it (acquired meanwhile or not).
    pub waits: u64,
    /// The time they waited, in all.
    pub wait_ms: f64,
    /// Those that did not get it within their `wait`.
    pub timeouts: u64,
}

/// A key of the table and its rank: the total wait it entered with (the key it replaced had that much) plus its own.
#[derive(Debug)]
struct Row {
    counts: Contended,
    floor: f64,
}

impl Row {
    fn rank(&self) -> f64 {
        self.floor + self.counts.wait_ms
    }
}

/// The table of the keys waited for most (see the module).
#[derive(Debug, Default)]
pub struct Contention {
    rows: Mutex<Vec<Row>>,
}

impl Contention {
    /// An acquisition of `key` waited `waited`, and got it (or, `timed_out`, not).
    pub fn record(&self, key: &str, waited: Duration, timed_out: bool) {
        let ms = waited.as_secs_f64() * 1000.0;
        let mut rows = self.rows.lock().expect("contention poisoned");
        let index = match rows.iter().position(|row| row.counts.key == key) {
            Some(index) => index,
            None => {
                let counts = Contended { key: key.to_owned(), waits: 0, wait_ms: 0.0, timeouts: 0 };
                if rows.len() < CONTENTION_KEYS {
                    rows.push(Row { counts, floor: 0.0 });
                    rows.len() - 1
                } else {
                    let (index, least) = rows
                        .iter()
                        .enumerate()
                        .min_by(|(_, a), (_, b)| a.rank().total_cmp(&b.rank()))
                        .map(|(i, row)| (i, row.rank()))
                        .expect("the table is full");
                    rows[index] = Row { counts, floor: least };
                    index
                }
            }
        };
        let counts = &mut rows[index].counts;
        counts.waits += 1;
        counts.wait_ms += ms;
        counts.timeouts += u64::from(timed_out);
    }

    /// The `limit` keys waited for most (by total wait, then waits), most first; with `reset`, the table is emptied.
    pub fn top(&self, limit: usize, reset: bool) -> Vec<Contended> {
        let mut rows = self.rows.lock().expect("contention poisoned");
        let mut top: Vec<&Row> = rows.iter().collect();
        top.sort_by(|a, b| b.rank().total_cmp(&a.rank()).then(b.counts.waits.cmp(&a.counts.waits)));
        let top = top.into_iter().take(limit).map(|row| row.counts.clone()).collect();
        if reset {
            rows.clear();
        }
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_waits_total_wait_and_timeouts_per_key_most_first() {
        let table = Contention::default();
        table.record("a", Duration::from_millis(10), false);
        table.record("b", Duration::from_millis(300), true);
        table.record("a", Duration::from_millis(20), false);
        let top = table.top(10, false);
        assert_eq!(top[0], Contended { key: "b".into(), waits: 1, wait_ms: 300.0, timeouts: 1 });
        assert_eq!(top[1], Contended { key: "a".into(), waits: 2, wait_ms: 30.0, timeouts: 0 });
        assert_eq!(table.top(1, true).len(), 1);
        assert!(table.top(10, false).is_empty(), "reset");
    }

    #[test]
    fn stays_bounded_and_keeps_the_keys_waited_for_most() {
        let table = Contention::default();
        // Two hot keys among a stream of 200,000 keys waited for once each, briefly.
        for i in 0..200_000u32 {
            table.record(&format!("cold:{i}"), Duration::from_micros(100), false);
            if i % 1000 == 0 {
                table.record("hot:1", Duration::from_millis(50), false);
                table.record("hot:2", Duration::from_millis(20), i % 2000 == 0);
            }
        }
        assert_eq!(table.rows.lock().unwrap().len(), CONTENTION_KEYS);
        let top = table.top(2, false);
        assert_eq!(top.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(), ["hot:1", "hot:2"]);
        assert_eq!(top[0].waits, 200);
        assert_eq!(top[1].timeouts, 100);
    }
}
