"""What one cycle (acquire + release of a new key) costs a cluster-enabled Redis, by the commands that carry it.

Starts its own cluster-enabled redis-server (all slots), pipes N cycles of each variant with `redis-cli --pipe`,
several rounds interleaved, and prints the server's CPU time (utime + stime) per cycle. Variants:

  tx       redis-snatch on a cluster until 2026-11-27: MULTI, SET lock NX PX GET, INCR counter, PEXPIRE counter, EXEC;
           the release script
  txnopx   the same without the PEXPIRE
  pipe     SET lock NX PX GET, INCR counter, PEXPIRE counter, no transaction; the release script
  pipenopx the same without the PEXPIRE: redis-snatch since 2026-11-27, while its locker kept the counter lately
  script  the acquisition as one small Lua script; the release script
  xsN     N acquisitions of N slots in one `allow-cross-slot-keys` script (Redis 7+), N releases likewise
  raw     raw ioredis: SET lock NX PX; its compare-and-delete script

usage: python3 redis_cost.py [PORT] [N] [variant,...]   (ROUNDS=4 by default)
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import time

SCRIPTS = os.path.join(os.path.dirname(__file__), '../../../crates/protocol/src/scripts/')
RELEASE = ''.join(open(SCRIPTS + name).read() for name in ('release_unwaited.lua', 'wake.lua', 'release.lua'))
TAKE = """local lock, fence, token = KEYS[1], KEYS[2], ARGV[1]
local r1 = redis.call('SET', lock, token, 'NX', 'PX', ARGV[2], 'GET')
local r2 = redis.call('INCR', fence)
redis.call('PEXPIRE', fence, ARGV[3])
if r1 then return -1 end
return r2
"""
CROSS_TAKE = """#!lua flags=allow-cross-slot-keys
local out = {}
for i = 1, #ARGV, 3 do
  local r1 = redis.call('SET', ARGV[i], ARGV[i + 2], 'NX', 'PX', 30000, 'GET')
  local r2 = redis.call('INCR', ARGV[i + 1])
  redis.call('PEXPIRE', ARGV[i + 1], 60000)
  if r1 then out[#out + 1] = -1 else out[#out + 1] = r2 end
end
return out
"""
CROSS_RELEASE = """#!lua flags=allow-cross-slot-keys
local out = {}
for i = 1, #ARGV, 2 do
  if redis.call('GET', ARGV[i]) == ARGV[i + 1] then redis.call('DEL', ARGV[i]); out[#out + 1] = 1
  else out[#out + 1] = 0 end
end
return out
"""
RAW_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def sha(script):
    return hashlib.sha1(script.encode()).hexdigest()


def command(*args):
    out = ['*%d\r\n' % len(args)]
    for arg in map(str, args):
        out.append('$%d\r\n%s\r\n' % (len(arg.encode()), arg))
    return ''.join(out)


def crc16_table():
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
        table.append(crc)
    return table


CRC16_TABLE = crc16_table()


def crc16(data):
    """CRC16 (XMODEM), as Redis Cluster hashes a key."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ CRC16_TABLE[(crc >> 8) ^ byte]
    return crc


# A hash tag for each slot, so that a lock's counter is in its slot, as redis-snatch's prefix counters are.
TAGS = {}
n = 0
while len(TAGS) < 16384:
    TAGS.setdefault(crc16(b'f%d' % n) % 16384, 'f%d' % n)
    n += 1


def counter(lock):
    return 'fence:{%s}' % TAGS[crc16(lock.encode()) % 16384]


def cycles(variant, round_, n):
    """The commands of n cycles of `variant`, on new keys."""
    out = []
    group = int(variant[2:]) if variant.startswith('xs') else 1
    for first in range(0, n, group):
        locks = [('lock:%d:%d' % (round_, i), 'token%d' % i) for i in range(first, first + group)]
        lock, token = locks[0]
        if variant in ('pipe', 'pipenopx'):
            expire = [command('PEXPIRE', counter(lock), 60000)] if variant == 'pipe' else []
            out += [command('SET', lock, token, 'NX', 'PX', 30000, 'GET'), command('INCR', counter(lock)), *expire,
                    command('EVALSHA', sha(RELEASE), 1, lock, token, 1)]
        elif variant in ('tx', 'txnopx'):
            expire = [command('PEXPIRE', counter(lock), 60000)] if variant == 'tx' else []
            out += [command('MULTI'), command('SET', lock, token, 'NX', 'PX', 30000, 'GET'),
                    command('INCR', counter(lock)), *expire, command('EXEC'),
                    command('EVALSHA', sha(RELEASE), 1, lock, token, 1)]
        elif variant == 'script':
            out += [command('EVALSHA', sha(TAKE), 2, lock, counter(lock), token, 30000, 60000),
                    command('EVALSHA', sha(RELEASE), 1, lock, token, 1)]
        elif variant.startswith('xs'):
            takes = [word for lock, token in locks for word in (lock, counter(lock), token)]
            releases = [word for lock, token in locks for word in (lock, token)]
            out += [command('EVALSHA', sha(CROSS_TAKE), 0, *takes),
                    command('EVALSHA', sha(CROSS_RELEASE), 0, *releases)]
        elif variant == 'raw':
            out += [command('SET', lock, token, 'NX', 'PX', 30000),
                    command('EVALSHA', sha(RAW_RELEASE), 1, lock, token)]
        else:
            sys.exit('unknown variant: %s (see the usage at the top of this file)' % variant)
    return ''.join(out).encode()


def main():
    port = sys.argv[1] if len(sys.argv) > 1 else '17001'
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    variants = sys.argv[3].split(',') if len(sys.argv) > 3 else ['tx', 'pipenopx', 'script', 'xs4', 'xs8', 'raw']
    folder = tempfile.mkdtemp()
    server = subprocess.Popen(['redis-server', '--port', port, '--bind', '127.0.0.1', '--cluster-enabled', 'yes',
                               '--cluster-config-file', folder + '/nodes.conf', '--save', '', '--appendonly', 'no',
                               '--dir', folder], stdout=subprocess.DEVNULL)

    def cli(*args):
        return subprocess.run(['redis-cli', '-p', port, *args], capture_output=True, text=True).stdout

    def cpu_seconds():
        fields = open('/proc/%d/stat' % server.pid).read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

    try:
        for _ in range(50):
            if cli('ping').strip() == 'PONG':
                break
            time.sleep(0.1)
        cli('cluster', 'addslotsrange', '0', '16383')
        while 'cluster_state:ok' not in cli('cluster', 'info'):
            time.sleep(0.1)
        for script in (RELEASE, TAKE, CROSS_TAKE, CROSS_RELEASE, RAW_RELEASE):
            cli('script', 'load', script)
        results = {variant: [] for variant in variants}
        for round_ in range(int(os.environ.get('ROUNDS', 4))):
            for variant in variants:
                data = cycles(variant, round_, n)
                cli('config', 'resetstat')
                before = cpu_seconds()
                subprocess.run(['redis-cli', '-p', port, '--pipe'], input=data, capture_output=True, check=True)
                results[variant].append((cpu_seconds() - before) * 1e6 / n)
                failed = [line for line in cli('info', 'commandstats').splitlines()
                          if 'calls=' in line and ('rejected_calls=0' not in line or 'failed_calls=0' not in line)]
                if failed:
                    sys.exit('%s: commands failed: %s' % (variant, failed))
        for variant, values in results.items():
            print('%-7s %s µs of Redis CPU per cycle' % (variant, ' '.join('%.2f' % v for v in values)))
    finally:
        server.terminate()


if __name__ == '__main__':
    main()
