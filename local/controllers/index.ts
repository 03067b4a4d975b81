/**
 * The two kube-ovn duties the local stack stands in for (local/controllers/README.md), run against any Kubernetes API through
 * client-node informers, like real controllers: the gateway pod of each VpcNatGateway, and QoSPolicy status.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeOvnRelease } from '../natgw/releases.js';
import { startGatewayStandIn } from './gateway.js';
import { startQosStandIn } from './qos.js';

export interface StandInsOptions {
  kubeConfig: KubeConfig;
  /** Where the gateway pods live (kube-ovn's controller namespace). */
  namespace?: string;
  /** The cluster's service CIDR, in the gateway's init (1.12) or its routes annotation (1.13+). */
  serviceCidr?: string;
  log?: (line: string) => void;
  /** Model kube-ovn's VPC NAT gateway feature switch (see GatewayStandInOptions.featureSwitch); default off. */
  featureSwitch?: boolean;
  /** The kube-ovn release the gateway pods are built and initialised as (default: the lab's). */
  release?: KubeOvnRelease;
}

export interface StandIns {
  stop(): Promise<void>;
}

/** Starts both stand-ins; resolves once their informers have listed (so the world they see is current). */
export async function startStandIns(options: StandInsOptions): Promise<StandIns> {
  const log = options.log ?? (() => {});
  const [gateways, qos] = await Promise.all([
    startGatewayStandIn({
      kubeConfig: options.kubeConfig,
      namespace: options.namespace ?? 'kube-system',
      serviceCidr: options.serviceCidr ?? '10.96.0.0/12',
      log,
      ...(options.featureSwitch !== undefined && { featureSwitch: options.featureSwitch }),
      ...(options.release && { release: options.release }),
    }),
    startQosStandIn({ kubeConfig: options.kubeConfig, log }),
  ]);
  return {
    async stop() {
      await Promise.all([gateways.stop(), qos.stop()]);
    },
  };
}
