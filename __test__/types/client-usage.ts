// `client` takes the clients users have, by their real types: ioredis' Redis and Cluster, node-redis' client and
// cluster (integrations.tsconfig.json).
import Redis, { Cluster } from 'ioredis'
import { createClient, createCluster } from 'redis'
import { createLocker, type Locker } from 'redis-snatch'

export function lockers(): Locker[] {
  return [
    createLocker({ client: new Redis({ host: '127.0.0.1', port: 6380, password: 'secret', tls: { ca: 'pem' } }) }),
    createLocker({ client: new Cluster([{ host: '127.0.0.1', port: 7000 }]), prefix: 'app:' }),
    createLocker({ client: new Redis({ sentinels: [{ host: '127.0.0.1', port: 26379 }], name: 'mymaster' }) }),
    createLocker({ client: createClient({ url: 'redis://127.0.0.1:6379/2' }) }),
    createLocker({ client: createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:7000' }] }) }),
  ]
}
