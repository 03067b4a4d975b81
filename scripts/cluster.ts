/**
 * `npm run cluster -- [--port N] [--kubeconfig FILE] [--data-dir DIR] [--kube-ovn-version V]`: runs the local Kubernetes API alone,
 * writes a kubeconfig for kubectl and client-node, prints one `ready:` line, and stops on SIGINT/SIGTERM.
 */
import { mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { startKubeApi } from '../local/kube-api/index.js';
import {
  DEFAULT_RELEASE,
  KUBE_OVN_RELEASES,
  type KubeOvnRelease,
  parseRelease,
} from '../local/natgw/releases.js';

const USAGE = `Usage: npm run cluster -- [options]

Runs the local Kubernetes API (kube-apiserver stand-in: kubeovn.io CRDs, pods with simulated NAT gateways).

Options:
  --port N            port to listen on (default 0: any free port)
  --host ADDR         address to listen on (default 127.0.0.1)
  --kubeconfig FILE   where to write the kubeconfig (default .local/kubeconfig)
  --data-dir DIR      keep objects in DIR across restarts; a write is on disk before it is answered
                      (default: in memory only)
  --crd-dir DIR       CRD manifests to install at start (default infra/crds)
  --kube-ovn-version V the kube-ovn release whose nat-gateway.sh gateway pods run: ${KUBE_OVN_RELEASES.join(', ')}
                      (default ${DEFAULT_RELEASE})
  --quiet             do not log what the API does (stderr)
  -h, --help          show this help

Then: KUBECONFIG=<file> kubectl get iptables-eips`;

interface Args {
  port: number;
  host: string;
  kubeconfig: string;
  dataDir?: string;
  crdDir?: string;
  quiet: boolean;
  kubeOvnRelease: KubeOvnRelease;
}

class UsageError extends Error {}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a command's main: one branch per option, read top-down (ADR 0054)
export function parseArgs(argv: readonly string[]): Args | 'help' {
  const args: Args = {
    port: 0,
    host: '127.0.0.1',
    kubeconfig: '.local/kubeconfig',
    quiet: false,
    kubeOvnRelease: DEFAULT_RELEASE,
  };
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i] as string;
    const eq = raw.indexOf('=');
    const flag = raw.startsWith('--') && eq > 0 ? raw.slice(0, eq) : raw;
    const inline = raw.startsWith('--') && eq > 0 ? raw.slice(eq + 1) : undefined;
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '' || (inline === undefined && v.startsWith('--')))
        throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '-h':
      case '--help':
        return 'help';
      case '--port': {
        const v = value();
        if (!/^\d+$/.test(v) || Number(v) > 65535)
          throw new UsageError(`--port must be a number from 0 to 65535, got "${v}"`);
        args.port = Number(v);
        break;
      }
      case '--host':
        args.host = value();
        break;
      case '--kubeconfig':
        args.kubeconfig = value();
        break;
      case '--data-dir':
        args.dataDir = value();
        break;
      case '--crd-dir':
        args.crdDir = value();
        break;
      case '--quiet':
        args.quiet = true;
        break;
      case '--kube-ovn-version': {
        const v = value();
        const release = parseRelease(v);
        if (!release)
          throw new UsageError(
            `--kube-ovn-version must be one of ${KUBE_OVN_RELEASES.join(', ')}, got "${v}"`,
          );
        args.kubeOvnRelease = release;
        break;
      }
      default:
        throw new UsageError(`unknown argument "${raw}"`);
    }
  }
  return args;
}

async function main(): Promise<void> {
  let args: Args | 'help';
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`cluster: ${e.message}\nRun "npm run cluster -- --help" for usage.\n`);
    process.exit(2);
  }
  if (args === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const log = args.quiet ? undefined : (line: string) => process.stderr.write(`kube-api: ${line}\n`);
  const api = await startKubeApi({
    port: args.port,
    host: args.host,
    kubeOvnRelease: args.kubeOvnRelease,
    ...(args.dataDir ? { dataDir: resolve(args.dataDir) } : {}),
    ...(args.crdDir ? { crdDir: resolve(args.crdDir) } : {}),
    ...(log ? { log } : {}),
  });
  const kubeconfig = resolve(args.kubeconfig);
  await mkdir(dirname(kubeconfig), { recursive: true });
  await api.writeKubeconfig(kubeconfig);
  process.stdout.write(`ready: ${api.tlsUrl} kubeconfig=${kubeconfig} kube-ovn=${args.kubeOvnRelease}\n`);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log?.(`${signal}: stopping`);
    api.close().then(
      () => process.exit(0),
      (e: unknown) => {
        process.stderr.write(`cluster: close failed: ${String(e)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((e: unknown) => {
  process.stderr.write(`cluster: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
