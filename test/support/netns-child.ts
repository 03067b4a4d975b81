/**
 * A process that owns a network-namespace gateway with one pod, for test/e2e/netns-gateway.test.ts to end in each
 * way a run can end: `node --import tsx test/support/netns-child.ts <scripts> <mode> <release> <tag>` prints `ready <namespace>` once
 * the pod is up, then `crash` throws an uncaught exception, `wait` waits to be signalled (SIGTERM, SIGKILL).
 */
import { startNetnsBackend } from '../../local/netns/backend.js';
import type { ReleaseLine } from '../../local/netns/release.js';
import { netnsTestPod } from './netns-pod.js';

const [scripts, mode, line, tag] = process.argv.slice(2) as [string, string, ReleaseLine, string];
const backend = await startNetnsBackend({ scripts });
const pod = netnsTestPod({ name: 'vpc-nat-gw-child-0', uid: 'child', line, tag });
await backend.start(pod, false);
process.stdout.write(`ready ${backend.namespaceOf('kube-system', 'vpc-nat-gw-child-0')}\n`);
if (mode === 'crash')
  setTimeout(() => {
    throw new Error('a crash of the process that owns the namespaces');
  }, 10);
else setInterval(() => {}, 60_000);
