//! What a lock's key holds: its owner, the acquisition's random token followed by the instance that holds it
//! (`<token>:<instance>`), so that whoever inspects a key can tell who holds it. The scripts compare the whole
//! value; a waiter's mark (`*`) may follow it (see scripts.rs).

/// Length of a token: 128 random bits as lowercase hex digits.
pub const TOKEN_LEN: usize = 32;

/// Longest instance id accepted, in UTF-8 bytes.
pub const MAX_INSTANCE_BYTES: usize = 256;

/// The owner value of an acquisition with `token` (hex, [`TOKEN_LEN`] digits) by `instance`.
pub fn owner(token: &str, instance: &str) -> String {
    let mut owner = String::with_capacity(token.len() + 1 + instance.len());
    owner.push_str(token);
    owner.push(':');
    owner.push_str(instance);
    owner
}

/// The id of a fair waiter (see keys.rs, [`crate::keys::LockKeys::queue`]) with random `bits`, of `instance`: 16 hex
/// digits, `:`, the instance. Shorter than an owner's token, so that the fleet's view never takes a queue for a
/// semaphore's holders.
pub fn waiter(bits: u64, instance: &str) -> String {
    format!("{bits:016x}:{instance}")
}

/// The token of `owner` (what [`owner`] made).
pub fn token(owner: &str) -> &str {
    owner.get(..TOKEN_LEN).unwrap_or(owner)
}

/// Checks a token given back by the caller (a handed-over lock's): [`TOKEN_LEN`] lowercase hex digits.
pub fn check_token(token: &str) -> Result<(), String> {
    if token.len() == TOKEN_LEN && token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Ok(());
    }
    Err(format!("a lock's token is {TOKEN_LEN} lowercase hex digits"))
}

/// The instance that holds a key whose value is `held` (a waiter's mark removed); `None` for a value that is no
/// owner of ours (say, written by an older version, which stored the token alone).
pub fn holder(held: &str) -> Option<&str> {
    let held = held.strip_suffix('*').unwrap_or(held);
    held.get(TOKEN_LEN..)?.strip_prefix(':')
}

/// Checks an instance id: 1 to [`MAX_INSTANCE_BYTES`] bytes, no control characters, not ending in `*` (a waiter's
/// mark). The reason when it is not one.
pub fn check_instance(instance: &str) -> Result<(), String> {
    if instance.is_empty() || instance.len() > MAX_INSTANCE_BYTES {
        return Err(format!("instanceId must be 1 to {MAX_INSTANCE_BYTES} bytes long, got {}", instance.len()));
    }
    if instance.chars().any(char::is_control) || instance.ends_with('*') {
        return Err("instanceId must not hold control characters nor end with '*'".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_names_its_instance_and_keeps_its_token() {
        let token = "0123456789abcdef0123456789abcdef";
        let value = owner(token, "web-1:4242");
        assert_eq!(value, "0123456789abcdef0123456789abcdef:web-1:4242");
        assert_eq!(super::token(&value), token);
        assert_eq!(holder(&value), Some("web-1:4242"));
        assert_eq!(holder(&format!("{value}*")), Some("web-1:4242"), "a waiter's mark is not the instance's");
        assert_eq!(holder(token), None, "a bare token (an older version's) names nobody");
        assert!(check_token(token).is_ok());
        for bad in ["", "0123456789ABCDEF0123456789ABCDEF", &value, &token[1..]] {
            assert!(check_token(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn instance_ids_are_checked() {
        assert!(check_instance("host:1").is_ok());
        for bad in ["", "a*", "tab\there", &"x".repeat(MAX_INSTANCE_BYTES + 1)] {
            assert!(check_instance(bad).is_err(), "{bad:?}");
        }
    }
}
