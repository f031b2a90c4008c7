//! What a socket of direct calls says first, and what its replies come to: the credentials, the database, the
//! client name, the release and acquire scripts loaded, a probe of whether the server runs the acquisitions'
//! commands, and which compare-and-delete of its own it offers (offers.rs).

use crate::acquisition;
use crate::direct::target::DirectTarget;
use crate::keys;
use crate::offers::{CompareAndDelete, Offers};
use crate::resp::{self, Reply};
use crate::scripts;

/// The client name of a socket for direct calls, as `CLIENT LIST` shows it.
pub const DIRECT_CLIENT_NAME: &str = "redis-snatch-direct";

/// Who the socket is and where: what the handshake needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Greeting<'a> {
    /// The ACL user, if any (with `password`).
    pub username: Option<&'a str>,
    pub password: Option<&'a str>,
    /// The database number of the URL.
    pub db: i64,
    /// The locker's key prefix: the probe's key is under it.
    pub prefix: &'a str,
    /// What the socket connects to: on a cluster master, the probe's key is of a slot it serves.
    pub target: &'a DirectTarget,
}

/// The replies of a handshake, read one at a time.
#[derive(Debug)]
pub struct Handshake {
    /// Replies of the handshake's own commands still to come; an error among them fails the socket.
    commands: usize,
    /// Replies of the probe still to come.
    probe: usize,
    /// No reply of the probe was (or held) an error so far.
    accepted: bool,
    /// The compare-and-delete commands whose replies are still to come, last, in the order they were tried.
    compared: std::slice::Iter<'static, CompareAndDelete>,
    /// The first of them the server answered with a number.
    offers: Offers,
}

/// Where [`Handshake::take`] ended: the socket's use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Greeted {
    /// The server runs direct acquisitions, and offers these commands of its own.
    Direct(Offers),
    /// The server refuses a command of direct acquisitions: the socket is of no use.
    Refused,
}

impl Handshake {
    /// The bytes to send first, and what reads their replies.
    pub fn new(greeting: &Greeting<'_>) -> (Self, Vec<u8>) {
        let mut commands: Vec<Vec<&str>> = Vec::new();
        if let Some(password) = greeting.password {
            commands.push(["AUTH"].into_iter().chain(greeting.username).chain([password]).collect());
        }
        let db = greeting.db.to_string();
        if greeting.db != 0 {
            commands.push(vec!["SELECT", &db]);
        }
        commands.push(vec!["CLIENT", "SETNAME", DIRECT_CLIENT_NAME]);
        // The scripts direct calls take (a lock's acquisition is plain commands, but for a new counter), each loaded
        // once per socket: their EVALSHA finds them.
        for script in [
            &*scripts::RELEASE,
            &*scripts::ACQUIRE,
            &*scripts::PERMIT_ACQUIRE,
            &*scripts::PERMIT_RELEASE,
            &*scripts::READ_ACQUIRE,
            &*scripts::WRITE_ACQUIRE,
        ] {
            commands.push(vec!["SCRIPT", "LOAD", script.source()]);
        }
        let mut bytes = Vec::new();
        for command in &commands {
            resp::encode(&mut bytes, command);
        }
        let key = probe_key(greeting.prefix, greeting.target);
        let probe = write_probe(&mut bytes, &key);
        // Last: which compare-and-delete the server (and the user's ACL) runs, on a key that does not exist (it
        // answers 0); a server refuses the others as unknown.
        for command in CompareAndDelete::ALL {
            resp::encode(&mut bytes, &command.words(&key, "-"));
        }
        let compared = CompareAndDelete::ALL.iter();
        (Self { commands: commands.len(), probe, accepted: true, compared, offers: Offers::default() }, bytes)
    }

    /// Takes the next reply: `None` while more are to come; then what the socket is for (the probe's answer, and the
    /// compare-and-deletes'), or the refusal of a handshake command (say, AUTH's), which fails the socket.
    pub fn take(&mut self, reply: Reply) -> Option<Result<Greeted, String>> {
        if self.commands > 0 {
            self.commands -= 1;
            return match reply {
                Reply::Error(text) => Some(Err(text)),
                _ => None,
            };
        }
        if self.probe > 0 {
            self.accepted &= !holds_error(&reply);
            self.probe -= 1;
            return None;
        }
        if let Some(&command) = self.compared.next() {
            if matches!(reply, Reply::Int(_)) && self.offers.compare_and_delete.is_none() {
                self.offers.compare_and_delete = Some(command);
            }
        }
        if self.compared.len() > 0 {
            return None;
        }
        Some(Ok(if self.accepted { Greeted::Direct(self.offers) } else { Greeted::Refused }))
    }
}

/// The key the probe uses: under the locker's prefix and, on a cluster master, of a slot it serves (another would be
/// answered MOVED).
fn probe_key(prefix: &str, target: &DirectTarget) -> String {
    match target {
        DirectTarget::Server => [prefix, "redis-snatch-probe"].concat(),
        DirectTarget::Master { slot, .. } => {
            let tag = (0u32..).map(|n| n.to_string()).find(|tag| keys::slot(tag) == *slot).expect("a tag");
            [prefix, "redis-snatch-probe{", &tag, "}"].concat()
        }
    }
}

/// Appends the commands with which the handshake asks whether the server runs direct acquisitions, and returns how
/// many replies they get: the commands of an acquisition (Redis accepts `SET` with both `NX` and `GET` from 7.0 on) on
/// `key` and a fence counter beside it, then their deletion, in a transaction so that nothing of them is left (Redis
/// finds an option it refuses only when the transaction runs). A server that answers any of them with an error gets
/// no direct calls: its one-attempt calls go over the locker's own connection, by the acquire script.
fn write_probe(bytes: &mut Vec<u8>, key: &str) -> usize {
    let fence = [key, ":fence"].concat();
    resp::encode(bytes, &["MULTI"]);
    let values =
        acquisition::Values { lock: key, fence: &fence, token: "", ttl_ms: 1, fence_ttl_ms: 1, keep_counter: true };
    acquisition::write(bytes, &values);
    resp::encode(bytes, &["DEL", key, &fence]);
    resp::encode(bytes, &["EXEC"]);
    acquisition::COMMANDS.len() + 3
}

/// Whether `reply` is an error or, for a transaction's, holds one.
fn holds_error(reply: &Reply) -> bool {
    match reply {
        Reply::Error(_) => true,
        Reply::Array(replies) => replies.iter().any(holds_error),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greeting(password: Option<&'static str>, db: i64) -> (Handshake, Vec<u8>) {
        let target = DirectTarget::Server;
        Handshake::new(&Greeting { username: Some("u"), password, db, prefix: "p:", target: &target })
    }

    #[test]
    fn commands_come_first_and_a_refusal_among_them_fails_the_socket() {
        let (mut handshake, bytes) = greeting(Some("secret"), 2);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$6\r\nsecret\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"));
        assert_eq!(handshake.take(Reply::Error("WRONGPASS".into())), Some(Err("WRONGPASS".into())));
    }

    #[test]
    fn the_probe_is_accepted_unless_a_reply_holds_an_error() {
        for refused in [false, true] {
            let (mut handshake, _) = greeting(None, 0);
            // CLIENT SETNAME, six SCRIPT LOADs.
            assert_eq!(handshake.take(Reply::Status("OK".into())), None);
            for _ in 0..6 {
                assert_eq!(handshake.take(Reply::Other), None);
            }
            // MULTI, three QUEUED, DEL's QUEUED: then EXEC's.
            for _ in 0..5 {
                assert_eq!(handshake.take(Reply::Status("QUEUED".into())), None);
            }
            let set = if refused { Reply::Error("ERR syntax error".into()) } else { Reply::Nil };
            let exec = Reply::Array(vec![set, Reply::Int(1), Reply::Int(1), Reply::Int(2)]);
            assert_eq!(handshake.take(exec), None);
            let expected = if refused { Greeted::Refused } else { Greeted::Direct(Offers::default()) };
            assert_eq!(handshake.take(Reply::Error("ERR unknown command 'DELIFEQ'".into())), None);
            assert_eq!(handshake.take(Reply::Error("ERR unknown command 'DELEX'".into())), Some(Ok(expected)));
        }
    }

    #[test]
    fn the_compare_and_delete_answered_with_a_number_is_offered_and_a_denied_or_unknown_one_is_not() {
        let unknown = || Reply::Error("ERR unknown command".into());
        let denied = || Reply::Error("NOPERM no permissions".into());
        for (delifeq, delex, offered) in [
            (Reply::Int(0), unknown(), Some(CompareAndDelete::DelIfEq)),
            (unknown(), Reply::Int(0), Some(CompareAndDelete::DelEx)),
            (denied(), unknown(), None),
            (unknown(), denied(), None),
        ] {
            let (mut handshake, bytes) = greeting(None, 0);
            assert!(String::from_utf8_lossy(&bytes).ends_with(concat!(
                "*3\r\n$7\r\nDELIFEQ\r\n$20\r\np:redis-snatch-probe\r\n$1\r\n-\r\n",
                "*4\r\n$5\r\nDELEX\r\n$20\r\np:redis-snatch-probe\r\n$4\r\nIFEQ\r\n$1\r\n-\r\n"
            )));
            for _ in 0..13 {
                assert_eq!(handshake.take(Reply::Status("OK".into())), None);
            }
            assert_eq!(handshake.take(delifeq), None);
            let expected = Greeted::Direct(Offers { compare_and_delete: offered });
            assert_eq!(handshake.take(delex), Some(Ok(expected)));
        }
    }

    #[test]
    fn on_a_cluster_master_the_probe_is_of_a_slot_it_serves() {
        let target = DirectTarget::Master { address: "h:1".into(), slot: 4242 };
        assert_eq!(keys::slot(&probe_key("p:", &target)), 4242);
    }
}
