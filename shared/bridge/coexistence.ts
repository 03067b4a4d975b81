/**
 * The check the bridge runs once at start (docs/adr/0096-coexistence-check-at-bridge-start.md): each external subnet
 * a VPC NAT gateway uses must keep this product's dedicated EIP range out of kube-ovn's IPAM, and nothing kube-ovn
 * already allocated may lie inside it (shared/domain/coexistence.ts). A conflict makes the bridge refuse to start; a
 * subnet without a range is logged as a warning.
 *
 * It reads the VpcNatGateways (their external subnets), those Subnets, kube-ovn's `ips.kubeovn.io` objects (the
 * addresses its IPAM restores at start) and the gateway pods' own addresses. An IP list the bridge may not read
 * (403) or an API without that resource (404) is a warning, and the check goes on with the gateway pods.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import {
  type CoexistenceProblem,
  coexistenceProblems,
  type KubeOvnAllocation,
} from '../domain/coexistence.js';
import { podNetworkAddresses } from '../domain/gateway-pod.js';
import { DEFAULT_EXTERNAL_SUBNET, GROUP, Label, Plural, type Subnet, VERSION } from '../domain/kube-ovn.js';
import type { Logger } from '../ports.js';

export class CoexistenceConflict extends Error {
  constructor(readonly problems: readonly CoexistenceProblem[]) {
    super(
      `refusing to start beside kube-ovn: ${problems.map((p) => p.message).join('; ')} ` +
        '(docs/deploy-eks.md, step 2; BRIDGE_COEXISTENCE_CHECK=warn starts anyway)',
    );
    this.name = 'CoexistenceConflict';
  }
}

type Obj = { metadata?: { name?: string; namespace?: string; annotations?: Record<string, string> } };
interface Gateway extends Obj {
  spec?: { externalSubnets?: string[] };
}
interface IpObject extends Obj {
  spec?: { subnet?: string; ipAddress?: string; v4IpAddress?: string; v6IpAddress?: string };
}

const statusOf = (e: unknown): number | undefined => (e as { code?: number }).code;

/** kube-ovn's IP objects as allocations; undefined (with the reason) when they cannot be read. */
async function ipAllocations(custom: CustomObjectsApi): Promise<KubeOvnAllocation[] | string> {
  try {
    const list = (await custom.listClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: 'ips',
    })) as {
      items: IpObject[];
    };
    return list.items.flatMap((ip) => {
      const spec = ip.spec ?? {};
      const text = [spec.v4IpAddress, spec.v6IpAddress, spec.ipAddress].filter(Boolean).join(',');
      const addresses = [...new Set(text.split(',').map((a) => a.trim()))].filter(Boolean);
      return addresses.map((address) => ({
        subnet: spec.subnet ?? '',
        address,
        owner: `ip/${ip.metadata?.name ?? ''}`,
      }));
    });
  } catch (e) {
    const code = statusOf(e);
    if (code === 403 || code === 404) return `ips.${GROUP} could not be listed (HTTP ${code})`;
    throw e;
  }
}

/** Reads what the check needs and returns its problems (shared/domain/coexistence.ts). */
export async function readCoexistence(kubeConfig: KubeConfig, namespace: string, log: Logger) {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const gateways = (await custom.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: Plural.gateway,
  })) as {
    items: Gateway[];
  };
  const names = new Set(
    gateways.items.flatMap((g) => g.spec?.externalSubnets?.slice(0, 1) ?? [DEFAULT_EXTERNAL_SUBNET]),
  );
  const subnets: Subnet[] = [];
  for (const name of [...names].sort()) {
    try {
      subnets.push(
        (await custom.getClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: Plural.subnet,
          name,
        })) as Subnet,
      );
    } catch (e) {
      if (statusOf(e) !== 404) throw e;
      log.warn('coexistence check: external subnet not found; its gateways wait for it', { subnet: name });
    }
  }
  const pods = await core.listNamespacedPod({ namespace, labelSelector: `${Label.vpcNatGw}=true` });
  const allocations: KubeOvnAllocation[] = pods.items.flatMap((p) =>
    Object.entries(podNetworkAddresses(namespace, p.metadata?.annotations)).map(([network, address]) => ({
      subnet: network,
      address,
      owner: `pod/${namespace}/${p.metadata?.name ?? ''}`,
    })),
  );
  const ips = await ipAllocations(custom);
  if (typeof ips === 'string')
    log.warn(`coexistence check: ${ips}; only the gateway pods' own addresses are checked`);
  else allocations.push(...ips);
  return coexistenceProblems(subnets, allocations);
}

/**
 * Runs the check: warnings are logged; conflicts are logged as errors and, with `refuse`, thrown as a
 * CoexistenceConflict (the bridge does not start).
 */
export async function checkCoexistence(
  kubeConfig: KubeConfig,
  namespace: string,
  log: Logger,
  mode: 'refuse' | 'warn',
): Promise<readonly CoexistenceProblem[]> {
  const problems = await readCoexistence(kubeConfig, namespace, log);
  for (const p of problems) {
    const fields = { subnet: p.subnet, code: p.code };
    if (p.severity === 'warning') log.warn(`coexistence check: ${p.message}`, fields);
    else log.error(`coexistence check: ${p.message}`, fields);
  }
  const conflicts = problems.filter((p) => p.severity === 'conflict');
  if (conflicts.length > 0 && mode === 'refuse') throw new CoexistenceConflict(conflicts);
  return problems;
}
