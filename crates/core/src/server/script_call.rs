//! One call of a Lua script (snatch-protocol's scripts.rs, each written once) as the redis crate sends it: EVALSHA,
//! and the same call as EVAL for a server that does not have the script yet (which also caches it there).

use redis::{Arg, Cmd, ToRedisArgs};
use snatch_protocol::scripts::{Script, Words};

/// One call of a script: its EVALSHA command, and the script, for when the server does not have it.
#[derive(Clone)]
pub(crate) struct ScriptCall {
    pub(crate) script: &'static Script,
    pub(crate) cmd: Cmd,
}

impl ScriptCall {
    /// `EVALSHA <sha> <keys>`; add the keys, then the arguments, with [`ScriptCall::arg`].
    pub(crate) fn new(script: &'static Script, keys: usize) -> Self {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.hash()).arg(keys);
        Self { script, cmd }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }
}

/// The words of a script call defined in snatch-protocol (scripts.rs), as arguments.
impl Words for ScriptCall {
    fn word(&mut self, word: &str) {
        self.cmd.arg(word);
    }

    fn number(&mut self, n: u128) {
        self.cmd.arg(n.to_string());
    }
}

/// `evalsha`, a call of `script`, as `EVAL <source> …` with the same keys and arguments.
pub(crate) fn as_eval(evalsha: &Cmd, script: &Script) -> Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(script.source());
    for arg in evalsha.args_iter().skip(2) {
        if let Arg::Simple(bytes) = arg {
            eval.arg(bytes);
        }
    }
    eval
}

#[cfg(test)]
mod tests {
    use super::*;
    use snatch_protocol::scripts::RELEASE;

    #[test]
    fn a_call_as_eval_keeps_its_keys_and_arguments() {
        let mut call = ScriptCall::new(&RELEASE, 1);
        call.arg("lock").arg("token");
        let eval = as_eval(&call.cmd, &RELEASE);
        let mut expected = redis::cmd("EVAL");
        expected.arg(RELEASE.source()).arg(1).arg("lock").arg("token");
        assert_eq!(eval.get_packed_command(), expected.get_packed_command());
    }

    #[test]
    fn script_hashes_are_those_the_redis_crate_computes() {
        assert_eq!(RELEASE.hash(), redis::Script::new(RELEASE.source()).get_hash());
    }
}
