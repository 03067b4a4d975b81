/**
 * Choosing a gateway's dialect from what its pod shows. The pods are written as each release's
 * pkg/controller/vpc_nat_gateway.go builds them (pod template: containers, init container, env, annotations; owner),
 * and read through gatewayPodTemplate as the Kubernetes adapter reads them; the gateway-state markers come from
 * the recorded runs' nat tables and env files (test/fixtures/gateway-runs/).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { toGatewayPod } from '../../shared/adapters/k8s/cluster.js';
import {
  chooseDialect,
  imageTag,
  natChains,
  parseRelease,
  type ReleaseFacts,
  type ReleaseLine,
} from '../../shared/domain/dialect/index.js';
import { UnsupportedGatewayReleaseError } from '../../shared/domain/errors.js';
import { gatewayPodTemplate, type PodSpecShape } from '../../shared/domain/gateway-pod.js';
import { GATEWAY_CONTAINER } from '../../shared/domain/kube-ovn.js';
import { output, step } from '../support/gateway-runs.js';

type Era = '1.12' | '1.13' | '1.15' | 'master-ha';

/** A gateway pod as the controller of that era writes it. */
function pod(era: Era, image: string): PodSpecShape {
  const annotations: Record<string, string> = {
    'ovn.kubernetes.io/vpc_nat_gw': 'gw1',
    'k8s.v1.cni.cncf.io/networks': 'kube-system/ovn-vpc-external-network',
    'ovn.kubernetes.io/logical_switch': 'vpc1-subnet1',
    'ovn.kubernetes.io/ip_address': '10.0.1.254',
  };
  if (era !== '1.12') {
    annotations['ovn.kubernetes.io/routes'] = '[{"dst":"10.96.0.0/12","gw":"10.0.1.1"}]';
    annotations['ovn-vpc-external-network.kube-system.kubernetes.io/routes'] =
      '[{"dst":"0.0.0.0/0","gw":"172.19.0.1"}]';
  }
  const main = {
    name: GATEWAY_CONTAINER,
    image,
    ...(era === '1.12'
      ? { command: ['bash'], args: ['-c', 'while true; do sleep 10000; done'] }
      : { command: ['sleep', 'infinity'] }),
    ...((era === '1.15' || era === 'master-ha') && {
      env: [
        { name: 'GATEWAY_V4', value: '172.19.0.1' },
        { name: 'GATEWAY_V6', value: '' },
      ],
    }),
  };
  return {
    metadata: {
      annotations,
      ownerReferences: [{ kind: era === 'master-ha' ? 'ReplicaSet' : 'StatefulSet' }],
    },
    spec: {
      containers: [main],
      ...(era === '1.12' && {
        initContainers: [
          {
            name: 'vpc-nat-gw-init',
            image,
            command: ['bash'],
            args: ['-c', 'bash /kube-ovn/nat-gateway.sh init 10.96.0.0/12,10.0.1.1'],
          },
        ],
      }),
    },
  };
}

function facts(p: PodSpecShape, more: Partial<ReleaseFacts> = {}): ReleaseFacts {
  return {
    pod: {
      namespace: 'kube-system',
      name: 'vpc-nat-gw-gw1-0',
      template: gatewayPodTemplate(p, GATEWAY_CONTAINER),
    },
    gateway: 'gw1',
    ...more,
  };
}

const refusal = (f: () => unknown): UnsupportedGatewayReleaseError => {
  try {
    f();
  } catch (e) {
    if (e instanceof UnsupportedGatewayReleaseError) return e;
    throw e;
  }
  throw new Error('no UnsupportedGatewayReleaseError');
};

describe('release text', () => {
  it.each([
    ['1.12', '1.12'],
    ['v1.12.35', '1.12'],
    ['1.13', '1.13'],
    ['v1.14.41', '1.13'],
    ['1.15', '1.15'],
    ['v1.15.3', '1.15'],
    ['v1.16.0-rc1', '1.16'],
    ['v1.16.2-x86', '1.16'],
    ['v1.12.4-amd64-legacy', '1.12'],
    ['v1.17.0', 'master'],
    ['master', 'master'],
  ])('%s is line %s', (text, line) => {
    expect(parseRelease(text)).toMatchObject({ ok: true, line });
  });

  it.each(['v1.11.9', '1.18', 'v2.0.0', 'latest', '', 'v1', '1.x'])('%j is refused, saying why', (text) => {
    const r = parseRelease(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problem).toMatch(/not (supported|a kube-ovn release)/);
  });

  it('image references: registry ports, digests, no tag', () => {
    expect(imageTag('docker.io/kubeovn/vpc-nat-gateway:v1.15.0')).toEqual({
      repository: 'docker.io/kubeovn/vpc-nat-gateway',
      tag: 'v1.15.0',
    });
    expect(imageTag('registry.local:5000/kubeovn/vpc-nat-gateway:v1.15.3@sha256:abcd')).toMatchObject({
      tag: 'v1.15.3',
    });
    expect(imageTag('registry.local:5000/kubeovn/vpc-nat-gateway@sha256:abcd')).toEqual({
      repository: 'registry.local:5000/kubeovn/vpc-nat-gateway',
    });
    expect(imageTag('vpc-nat-gateway')).toEqual({ repository: 'vpc-nat-gateway' });
  });
});

describe('by image tag', () => {
  it.each([
    ['1.12', 'kubeovn/vpc-nat-gateway:v1.12.35', '1.12'],
    ['1.13', 'docker.io/kubeovn/vpc-nat-gateway:v1.14.0', '1.13'],
    ['1.15', 'docker.io/kubeovn/vpc-nat-gateway:v1.15.3', '1.15'],
    ['1.15', 'docker.io/kubeovn/vpc-nat-gateway:v1.16.0-rc1', '1.16'],
    ['1.15', 'docker.io/kubeovn/vpc-nat-gateway:v1.17.0', 'master'],
    ['master-ha', 'kubeovn/vpc-nat-gateway:master', 'master'],
  ] as Array<[Era, string, ReleaseLine]>)('a %s pod with %s speaks %s', (era, image, line) => {
    for (const purpose of ['send', 'read'] as const) {
      const c = chooseDialect(facts(pod(era, image)), purpose);
      expect(c).toMatchObject({ by: 'image', candidates: [line] });
      expect(c.dialect.line).toBe(line);
      expect(c.seen[0]).toBe(`image ${image}`);
    }
  });

  it('an unsupported release in the tag is refused, naming the tag', () => {
    const e = refusal(() => chooseDialect(facts(pod('1.12', 'kubeovn/vpc-nat-gateway:v1.11.9')), 'send'));
    expect(e.message).toContain(
      'image tag v1.11.9: kube-ovn 1.11.9 is not supported (supported: 1.12, 1.13 and 1.14, 1.15, 1.16, master',
    );
    expect(e.message).toContain('vpc-nat-gw-gw1-0');
    expect(e.mayClear).toBe(true);
  });
});

describe('by markers, for a custom tag', () => {
  const custom = 'registry.example/natgw:prod-2026';

  it('the 1.12 init container, and the 1.13 routes annotation without GATEWAY_V4, each settle it', () => {
    expect(chooseDialect(facts(pod('1.12', custom)), 'send')).toMatchObject({
      by: 'markers',
      candidates: ['1.12'],
    });
    expect(chooseDialect(facts(pod('1.13', custom)), 'send')).toMatchObject({
      by: 'markers',
      candidates: ['1.13'],
    });
  });

  it('GATEWAY_V4 leaves 1.15, 1.16 and master open: enough for neither purpose without a read of the gateway', () => {
    for (const purpose of ['send', 'read'] as const) {
      const e = refusal(() => chooseDialect(facts(pod('1.15', custom)), purpose));
      expect(e.needs).toBe('gateway-state');
      expect(e.message).toContain('image tag "prod-2026" is not a release');
      expect(e.message).toContain('it may be 1.15, 1.16, master');
      expect(e.seen).toContain('the container env has GATEWAY_V4 (1.15–master)');
      expect(e.message).toContain('eip-lambdas.io/kube-ovn-release');
    }
  });

  it('the nat table of a real run settles it: HAIRPIN_SNAT on 1.16 and master, not on 1.15', () => {
    const chains = (r: 'v1.15.0' | 'v1.16.0' | 'master') =>
      natChains(output(r, 'after init: nat table (legacy)'));
    const at15 = chooseDialect(
      facts(pod('1.15', custom), { state: { natChains: chains('v1.15.0') } }),
      'send',
    );
    expect(at15).toMatchObject({ by: 'markers', candidates: ['1.15'] });
    for (const r of ['v1.16.0', 'master'] as const) {
      const c = chooseDialect(facts(pod('1.15', custom), { state: { natChains: chains(r) } }), 'send');
      // 1.16 and master agree on everything sent and read; the lowest is reported, both are candidates.
      expect(c).toMatchObject({ by: 'markers', candidates: ['1.16', 'master'] });
      expect(c.dialect.line).toBe('1.16');
    }
  });

  it('the env file and the nat table of real runs settle a pod read without its spec', () => {
    expect(step('v1.15.0', 'after init: env file').exitCode).toBe(0);
    const bare: ReleaseFacts = {
      pod: { namespace: 'kube-system', name: 'vpc-nat-gw-gw1-0' },
      gateway: 'gw1',
    };
    const state = {
      envFile: 'present' as const,
      natChains: natChains(output('v1.15.0', 'after init: nat table (legacy)')),
    };
    expect(chooseDialect({ ...bare, state }, 'send')).toMatchObject({ by: 'markers', candidates: ['1.15'] });
    // An env file on a pod whose spec says 1.13: contradictory.
    const e = refusal(() =>
      chooseDialect(facts(pod('1.13', custom), { state: { envFile: 'present' } }), 'read'),
    );
    expect(e.seen).toContain('/etc/kube-ovn/nat-gateway.env exists (1.15–master)');
  });

  it('a replicated gateway (master HA: pods of a ReplicaSet) is master', () => {
    const c = chooseDialect(facts(pod('master-ha', custom)), 'send');
    expect(c).toMatchObject({ by: 'markers', candidates: ['master'] });
    expect(c.dialect.replicas).toBe('one-or-more');
  });

  it('markers that contradict each other are refused, naming them', () => {
    const p12 = pod('1.12', custom);
    const main = { ...p12.spec!.containers![0]!, env: [{ name: 'GATEWAY_V4', value: '172.19.0.1' }] };
    const p = { ...p12, spec: { ...p12.spec, containers: [main] } };
    const e = refusal(() => chooseDialect(facts(p), 'send'));
    expect(e.message).toContain('its markers contradict each other');
    expect(e.seen).toEqual([
      `image ${custom}`,
      'an init container runs nat-gateway.sh init (1.12)',
      'the container env has GATEWAY_V4 (1.15–master)',
    ]);
  });
});

describe('the override annotation and the default', () => {
  const custom = 'registry.example/natgw:prod-2026';

  it('the annotation wins over the image tag and the markers', () => {
    const c = chooseDialect(
      facts(pod('1.12', 'kubeovn/vpc-nat-gateway:v1.12.35'), { override: '1.15' }),
      'send',
    );
    expect(c).toMatchObject({ by: 'override', candidates: ['1.15'] });
    expect(c.seen[0]).toBe('annotation 1.15');
  });

  it('an annotation that is not a supported release is refused, naming it', () => {
    const e = refusal(() => chooseDialect(facts(pod('1.12', custom), { override: '1.9' }), 'send'));
    expect(e.message).toContain(
      'annotation eip-lambdas.io/kube-ovn-release on VpcNatGateway gw1: kube-ovn 1.9 is not supported',
    );
  });

  it('KUBE_OVN_RELEASE decides what the markers leave open, never against them', () => {
    const c = chooseDialect(facts(pod('1.15', custom), { defaultRelease: '1.16' }), 'send');
    expect(c).toMatchObject({ by: 'default', candidates: ['1.16'] });
    const e = refusal(() => chooseDialect(facts(pod('1.15', custom), { defaultRelease: '1.12' }), 'send'));
    expect(e.message).toContain('KUBE_OVN_RELEASE says 1.12, but the pod shows 1.15, 1.16, master');
    // The markers settle it: the default is not asked.
    expect(chooseDialect(facts(pod('1.13', custom), { defaultRelease: '1.12' }), 'send').dialect.line).toBe(
      '1.13',
    );
    // A tag that is a release wins over the default.
    expect(
      chooseDialect(facts(pod('1.15', 'kubeovn/vpc-nat-gateway:v1.15.0'), { defaultRelease: '1.16' }), 'send')
        .by,
    ).toBe('image');
  });

  it('a pod read without its spec (no template) is decided by the default alone, or refused', () => {
    const bare: ReleaseFacts = {
      pod: { namespace: 'kube-system', name: 'vpc-nat-gw-gw1-0' },
      gateway: 'gw1',
    };
    expect(chooseDialect({ ...bare, defaultRelease: '1.12' }, 'send')).toMatchObject({ by: 'default' });
    const e = refusal(() => chooseDialect(bare, 'send'));
    expect(e.message).toContain('no image tag');
    expect(e.message).toContain('seen: nothing');
  });
});

describe('gatewayPodTemplate', () => {
  it('reads image, env, the init script, routes with their destinations, and the owner', () => {
    const t = gatewayPodTemplate(pod('1.15', 'kubeovn/vpc-nat-gateway:v1.15.0'), GATEWAY_CONTAINER);
    expect(t).toEqual({
      image: 'kubeovn/vpc-nat-gateway:v1.15.0',
      env: { GATEWAY_V4: '172.19.0.1', GATEWAY_V6: '' },
      initRunsScript: false,
      routes: {
        'ovn.kubernetes.io/routes': ['10.96.0.0/12'],
        'ovn-vpc-external-network.kube-system.kubernetes.io/routes': ['0.0.0.0/0'],
      },
      ownerKind: 'StatefulSet',
    });
    const t12 = gatewayPodTemplate(pod('1.12', 'kubeovn/vpc-nat-gateway:v1.12.35'), GATEWAY_CONTAINER);
    expect(t12).toMatchObject({ env: {}, initRunsScript: true, routes: {} });
  });

  it('a 1.12 routes annotation for API access (no default route) is not a 1.13+ marker', () => {
    const p = pod('1.12', 'registry.example/natgw:custom');
    p.metadata!.annotations!['api-nad.kube-system.kubernetes.io/routes'] =
      '[{"dst":"10.96.0.1","gw":"10.0.2.1"}]';
    expect(chooseDialect(facts(p), 'send').dialect.line).toBe('1.12');
    // Not JSON: no destinations.
    p.metadata!.annotations!['api-nad.kube-system.kubernetes.io/routes'] = 'garbage';
    expect(gatewayPodTemplate(p, GATEWAY_CONTAINER).routes).toEqual({
      'api-nad.kube-system.kubernetes.io/routes': [],
    });
  });

  it('a pod without the gateway container has no image or env', () => {
    expect(
      gatewayPodTemplate(
        { spec: { containers: [{ name: 'other', image: 'x:v1.15.0' }] } },
        GATEWAY_CONTAINER,
      ),
    ).toEqual({
      env: {},
      initRunsScript: false,
      routes: {},
    });
  });
});

describe('the Kubernetes adapter reads the template with the pod', () => {
  it('toGatewayPod carries what the dialect is chosen from', () => {
    const p = pod('1.15', 'docker.io/kubeovn/vpc-nat-gateway:v1.15.3');
    // The pod as the API returns it (client-node's V1Pod), with what toGatewayPod needs besides the template.
    const v1 = structuredClone(p) as V1Pod;
    v1.metadata = { ...v1.metadata, name: 'vpc-nat-gw-gw1-0', namespace: 'kube-system', uid: 'u1' };
    v1.status = { phase: 'Running' };
    const gp = toGatewayPod(v1, 'kube-system');
    expect(gp.template).toEqual(gatewayPodTemplate(p, GATEWAY_CONTAINER));
    expect(chooseDialect({ pod: gp, gateway: 'gw1' }, 'send')).toMatchObject({
      by: 'image',
      candidates: ['1.15'],
    });
  });
});
