'use strict'
// The certificates of the TLS parity matrix (tls-parity.test.js), made by openssl in a temp dir: a CA and an
// unrelated one, then server and client certificates of every kind users bring: X.509 v3 with subjectAltName, v3
// naming the host in its CN only, v1 (what `openssl x509 -req` makes without -extfile), expired, signed by the other
// CA, self-signed, signed by an intermediate CA. EC P-256 keys, SHA-256 signatures.

const fs = require('node:fs')
const path = require('node:path')
const { OPENSSL_CONFIG, certificateDir, certificateMaker } = require('./deployments')

// The harness's extensions (`ca`; `server`: subjectAltName IP:127.0.0.1, DNS:localhost, DNS:redis.test), and these:
// `elsewhere` names another host in its subjectAltName; `plain` has none (a server named by its CN only).
const CONFIG = `${OPENSSL_CONFIG}
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

/**
 * Makes the certificates in a fresh temp dir; resolves `{ dir, file(name), pem(name) }`, names being those below
 * (`<name>.crt` and `<name>.key` in `dir`). Servers: san, cn-only, v1, v1-elsewhere, elsewhere, expired,
 * other-ca-san, self-signed, and v1-chain and v3-chain (a leaf of an intermediate CA that `ca` signed, followed by
 * the intermediate). Clients: client-v3, client-v1, client-expired, client-other-ca. CAs: ca, other-ca.
 */
async function makeCertificateSets() {
  const dir = certificateDir('redis-snatch-parity-', CONFIG)
  const { selfSigned, signed } = certificateMaker(dir)
  await Promise.all([
    selfSigned('ca', 'parity CA', 'ca'),
    selfSigned('other-ca', 'parity other CA', 'ca'),
    selfSigned('self-signed', 'localhost', 'server'),
  ])
  await Promise.all([
    signed('san', 'localhost', { extensions: 'server' }),
    signed('cn-only', 'localhost', { extensions: 'plain' }),
    signed('v1', 'localhost'),
    signed('v1-elsewhere', 'elsewhere.test'),
    signed('elsewhere', 'localhost', { extensions: 'elsewhere' }),
    signed('expired', 'localhost', { extensions: 'server', days: -1 }),
    signed('other-ca-san', 'localhost', { ca: 'other-ca', extensions: 'server' }),
    signed('client-v3', 'parity client', { extensions: 'plain' }),
    signed('client-v1', 'parity client'),
    signed('client-expired', 'parity client', { extensions: 'plain', days: -1 }),
    signed('client-other-ca', 'parity client', { ca: 'other-ca', extensions: 'plain' }),
    signed('intermediate', 'parity intermediate CA', { extensions: 'ca' }),
  ])
  await Promise.all([
    signed('v1-leaf', 'localhost', { ca: 'intermediate' }),
    signed('v3-leaf', 'localhost', { ca: 'intermediate', extensions: 'server' }),
  ])
  // What a server presents for a leaf of the intermediate CA: the leaf, then the intermediate.
  const file = (name) => path.join(dir, name)
  const intermediate = fs.readFileSync(file('intermediate.crt'), 'utf8')
  for (const version of ['v1', 'v3']) {
    fs.writeFileSync(file(`${version}-chain.crt`), fs.readFileSync(file(`${version}-leaf.crt`), 'utf8') + intermediate)
    fs.copyFileSync(file(`${version}-leaf.key`), file(`${version}-chain.key`))
  }
  return { dir, file, pem: (name) => fs.readFileSync(file(name), 'utf8') }
}

module.exports = { makeCertificateSets }
