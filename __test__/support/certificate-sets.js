'use strict'
// The certificates of the TLS parity matrix (tls-parity.test.js), made by openssl in a temp dir: a CA and an
// unrelated one, then server and client certificates of every kind users bring: X.509 v3 with subjectAltName, v3
// naming the host in its CN only, v1 (what `openssl x509 -req` makes without -extfile), expired, signed by the other
// CA, self-signed, signed by an intermediate CA. EC P-256 keys, SHA-256 signatures.

const { execFile } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const DAYS = 30

// v3 extensions. `plain` has no subjectAltName (a server named by its CN only).
const CONFIG = `
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[san]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
[elsewhere]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:elsewhere.test
[plain]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
`

/** Runs openssl with `args` in `dir`. */
function openssl(dir, args) {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { cwd: dir }, (err, _stdout, stderr) =>
      err ? reject(new Error(`openssl ${args.join(' ')}: ${stderr || err.message}`)) : resolve(),
    )
  })
}

/**
 * Makes the certificates in a fresh temp dir; resolves `{ dir, file(name), pem(name) }`, names being those below
 * (`<name>.crt` and `<name>.key` in `dir`). Servers: san, cn-only, v1, v1-elsewhere, elsewhere, expired,
 * other-ca-san, self-signed, and v1-chain and v3-chain (a leaf of an intermediate CA that `ca` signed, followed by
 * the intermediate). Clients: client-v3, client-v1, client-expired, client-other-ca. CAs: ca, other-ca.
 */
async function makeCertificateSets() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-snatch-parity-'))
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  fs.writeFileSync(path.join(dir, 'openssl.cnf'), CONFIG)
  const run = (...args) => openssl(dir, args)
  const newKey = (name) => ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`]
  const subject = (cn) => ['-subj', `/O=redis-snatch parity/CN=${cn}`]
  const selfSigned = (name, cn, extensions) =>
    run('req', '-x509', '-new', '-config', 'openssl.cnf', '-extensions', extensions, ...newKey(name),
      '-out', `${name}.crt`, '-days', String(DAYS), '-sha256', ...subject(cn))
  /** A certificate for `cn` signed by `ca`, v3 with `extensions` or v1 without; `days` -1 makes it expired. */
  const signed = async (name, cn, { ca = 'ca', extensions = null, days = DAYS } = {}) => {
    await run('req', '-new', '-config', 'openssl.cnf', ...newKey(name), '-out', `${name}.csr`, ...subject(cn))
    const serial = crypto.randomBytes(16)
    serial[0] = (serial[0] & 0x7f) | 0x10
    const v3 = extensions ? ['-extfile', 'openssl.cnf', '-extensions', extensions] : []
    await run('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`,
      '-set_serial', `0x${serial.toString('hex')}`, '-days', String(days), '-sha256', ...v3, '-out', `${name}.crt`)
  }
  await Promise.all([
    selfSigned('ca', 'parity CA', 'ca'),
    selfSigned('other-ca', 'parity other CA', 'ca'),
    selfSigned('self-signed', 'localhost', 'san'),
  ])
  await Promise.all([
    signed('san', 'localhost', { extensions: 'san' }),
    signed('cn-only', 'localhost', { extensions: 'plain' }),
    signed('v1', 'localhost'),
    signed('v1-elsewhere', 'elsewhere.test'),
    signed('elsewhere', 'localhost', { extensions: 'elsewhere' }),
    signed('expired', 'localhost', { extensions: 'san', days: -1 }),
    signed('other-ca-san', 'localhost', { ca: 'other-ca', extensions: 'san' }),
    signed('client-v3', 'parity client', { extensions: 'plain' }),
    signed('client-v1', 'parity client'),
    signed('client-expired', 'parity client', { extensions: 'plain', days: -1 }),
    signed('client-other-ca', 'parity client', { ca: 'other-ca', extensions: 'plain' }),
    signed('intermediate', 'parity intermediate CA', { extensions: 'ca' }),
  ])
  await Promise.all([
    signed('v1-leaf', 'localhost', { ca: 'intermediate' }),
    signed('v3-leaf', 'localhost', { ca: 'intermediate', extensions: 'san' }),
  ])
  // What a server presents for a leaf of the intermediate CA: the leaf, then the intermediate.
  const intermediate = fs.readFileSync(path.join(dir, 'intermediate.crt'), 'utf8')
  for (const version of ['v1', 'v3']) {
    const leaf = fs.readFileSync(path.join(dir, `${version}-leaf.crt`), 'utf8')
    fs.writeFileSync(path.join(dir, `${version}-chain.crt`), leaf + intermediate)
    fs.copyFileSync(path.join(dir, `${version}-leaf.key`), path.join(dir, `${version}-chain.key`))
  }
  const file = (name) => path.join(dir, name)
  return { dir, file, pem: (name) => fs.readFileSync(file(name), 'utf8') }
}

module.exports = { makeCertificateSets }
